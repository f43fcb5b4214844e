"""Schema of a recipe's `build:` section (parsed and validated when the recipe loads; run by `lgpatch build`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class BuildCommand:
    name: str
    phase: str
    argv: tuple[str, ...]  # ${param} and build variables not yet substituted
    env: Mapping[str, str]
    cwd: str
    when: dict[str, Any] | None
    optional: bool


@dataclass(frozen=True)
class BuildSection:
    env: Mapping[str, str]
    commands: tuple[BuildCommand, ...]
    wheel_dir: str


def make_build(data: dict[str, Any]) -> BuildSection:
    """The validated `build:` mapping as its frozen type."""
    commands = tuple(
        BuildCommand(c["name"], c["phase"], tuple(c["argv"]), dict(c["env"]), c["cwd"], c["when"], c["optional"])
        for c in data["commands"]
    )
    return BuildSection(dict(data["env"]), commands, data["wheel_dir"])
