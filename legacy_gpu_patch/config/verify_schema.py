"""Schema of a recipe's `verify:` section: compile probes run by `lgpatch verify`.

A probe compiles one file of the tree (optionally followed by a `snippet` that uses what the file declares) with
the real compiler, once in the patched tree and once in a pristine checkout of the baseline. `setup` makes the
generated headers a real build would make first (CMake's configure_file, emulated; a generator script run with
the build's Python), into a scratch folder that `${gen}` names.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from legacy_gpu_patch.config.schema import WHEN, AnyOf, Key, ListOf, Map, MapOf, Scalar, Str, relpath_check


def _include_check(text: str) -> str | None:
    # An include folder is tree-relative, or inside the probe's scratch folder of generated headers.
    if text == "${gen}" or text.startswith("${gen}/"):
        return relpath_check(text[len("${gen}/"):]) if text != "${gen}" else None
    return relpath_check(text)


CONFIGURE_SCHEMA = Map(
    {
        "in": Key(Str(check=relpath_check), required=True),  # a *.h.in template of the tree
        "out": Key(Str(check=relpath_check), required=True),  # relative to ${gen}
        # @VAR@ / ${VAR} values and #cmakedefine switches; names not given are undefined (empty, #undef, 0).
        "define": Key(MapOf(Scalar()), default=dict),
    },
    what="configure mapping",
)

SETUP_SCHEMA = AnyOf(
    [
        (lambda v: isinstance(v, dict) and "configure" in v,
         Map({"configure": Key(CONFIGURE_SCHEMA, required=True)}, what="configure step")),
        (lambda v: isinstance(v, dict) and "run" in v,
         Map({"run": Key(ListOf(Str(allow_numbers=True), min_items=1), required=True)}, what="run step")),
    ],
    what="a setup step: {configure: {in, out, define}} or {run: [argv...]}",
)

PROBE_SCHEMA = Map(
    {
        "name": Key(Str(pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]*", what="a probe name"), required=True),
        "file": Key(Str(check=relpath_check), required=True),
        "lang": Key(Str(choices=("cuda", "cxx")), default="cuda"),
        "flags": Key(ListOf(Str(allow_numbers=True)), default=list),
        "include": Key(ListOf(Str(check=_include_check)), default=list),
        # Headers that must be found (in the toolkit or the extra CUDA include folders); else the probe is skipped
        # with the reason, because the failure would say nothing about the patch.
        "requires": Key(ListOf(Str()), default=list),
        "setup": Key(ListOf(SETUP_SCHEMA), default=list),
        # Code compiled after `#include "<file>"`: a header probe that tests a use, not just that it parses.
        "snippet": Key(Str(), default=None),
        # What the pristine (unpatched) tree does: "fail" proves the patch is what fixes it.
        "unpatched": Key(Str(choices=("fail", "pass", "any")), default="any"),
        "expect_error": Key(Str(), default=None),  # a regex the pristine failure must contain
        "skip": Key(Str(), default=None),  # cannot be compiled standalone: the reason, listed by `lgpatch verify`
        "when": Key(WHEN, default=None),
    },
    what="verify probe",
)

VERIFY_SCHEMA = ListOf(PROBE_SCHEMA)


@dataclass(frozen=True)
class ConfigureSetup:
    """Emulates CMake's configure_file: `template` (in the tree) → `out` (in ${gen}) with `define` applied."""

    template: str
    out: str
    define: Mapping[str, Any]


@dataclass(frozen=True)
class RunSetup:
    argv: tuple[str, ...]  # ${...} rendered when it runs


SetupStep = Union[ConfigureSetup, RunSetup]


@dataclass(frozen=True)
class Probe:
    name: str
    file: str
    lang: str  # cuda | cxx
    flags: tuple[str, ...]
    include: tuple[str, ...]
    requires: tuple[str, ...]
    setup: tuple[SetupStep, ...]
    snippet: str | None
    unpatched: str  # fail | pass | any
    expect_error: str | None
    skip: str | None
    when: dict[str, Any] | None


def _make_setup(data: dict[str, Any]) -> SetupStep:
    if "configure" in data:
        spec = data["configure"]
        return ConfigureSetup(spec["in"], spec["out"], dict(spec["define"]))
    return RunSetup(tuple(data["run"]))


def make_probe(data: dict[str, Any]) -> Probe:
    """One validated probe mapping (defaults filled in) as its frozen type."""
    return Probe(data["name"], data["file"], data["lang"], tuple(data["flags"]), tuple(data["include"]),
                 tuple(data["requires"]), tuple(_make_setup(s) for s in data["setup"]), data["snippet"],
                 data["unpatched"], data["expect_error"], data["skip"], data["when"])


def probe_setup_key(step: SetupStep) -> str:
    """A stable identity for a setup step, so that steps shared by several probes run once per tree."""
    return json.dumps([type(step).__name__, dataclasses.asdict(step)], sort_keys=True, default=str)
