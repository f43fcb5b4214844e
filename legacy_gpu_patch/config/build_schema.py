"""Schema of a recipe's `build:` section (parsed and validated when the recipe loads; run by `lgpatch build`)."""

from __future__ import annotations

from legacy_gpu_patch.config.schema import WHEN, Bool, Key, ListOf, Map, MapOf, Str, relpath_check

PHASES = ("setup", "configure", "build", "wheel", "test")

COMMAND_SCHEMA = Map(
    {
        "name": Key(
            Str(pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]*", what="a name of letters, digits, '_', '.', '-'"),
            required=True,
        ),
        "phase": Key(Str(choices=PHASES), default="build"),
        # argv items get ${param} and build variables substituted one by one; no shell ever sees them.
        "argv": Key(ListOf(Str(allow_numbers=True), min_items=1), required=True),
        "env": Key(MapOf(Str(allow_numbers=True)), default=dict),
        "cwd": Key(Str(check=relpath_check), default="."),
        "when": Key(WHEN, default=None),
        "optional": Key(Bool(), default=False),
    },
    what="build command",
)

BUILD_SCHEMA = Map(
    {
        "env": Key(MapOf(Str(allow_numbers=True)), default=dict),
        "commands": Key(ListOf(COMMAND_SCHEMA, min_items=1), required=True),
        "wheel_dir": Key(Str(check=relpath_check), default="dist"),
    },
    what="build section",
)
