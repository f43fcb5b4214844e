"""Schema of a recipe's `verify:` section: compile probes run by `lgpatch verify`."""

from __future__ import annotations

from legacy_gpu_patch.schema import WHEN, Key, ListOf, Map, Str, relpath_check

PROBE_SCHEMA = Map(
    {
        "name": Key(Str(pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]*", what="a probe name"), required=True),
        "file": Key(Str(check=relpath_check), required=True),
        "lang": Key(Str(choices=("cuda", "cxx")), default="cuda"),
        "flags": Key(ListOf(Str(allow_numbers=True)), default=list),
        "include": Key(ListOf(Str(check=relpath_check)), default=list),
        # What the pristine (unpatched) tree does: "fail" proves the patch is what fixes it.
        "unpatched": Key(Str(choices=("fail", "pass", "any")), default="any"),
        "expect_error": Key(Str(), default=None),
        "skip": Key(Str(), default=None),
        "when": Key(WHEN, default=None),
    },
    what="verify probe",
)

VERIFY_SCHEMA = ListOf(PROBE_SCHEMA)
