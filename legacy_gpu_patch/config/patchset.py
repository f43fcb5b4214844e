"""Steps and patchsets: the step schemas (as data), the typed step bodies, and loading a patchset folder.

A step does one thing (one of STEP_KINDS); its body is validated by the schema and then turned, once, into one of
the frozen body types below, so the ledger reads `body.pattern` rather than `body["pattern"]`. The constants shared
with recipe.py (names, digests, commit ids) live here, in the lower module, so that recipe.py imports patchset.py
and never the other way round.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from legacy_gpu_patch.config.schema import (
    WHEN,
    Bool,
    Ctx,
    Int,
    Key,
    ListOf,
    Map,
    Str,
    regex_check,
    relpath_check,
)
from legacy_gpu_patch.config.yamlio import LineDict, load_file
from legacy_gpu_patch.errors import ConfigError

NAME = r"[a-z0-9][a-z0-9.+_-]*"
NAME_WHAT = "a name of lowercase letters, digits, '.', '+', '_', '-'"
SHA256 = r"[0-9a-f]{64}"
COMMIT = r"[0-9a-f]{40}"
HTTP_URL = r"https?://\S+"

STEP_KINDS = ("patch", "url-patch", "regex", "insert", "backport")
# The step fields where ${param} is substituted, one per kind that has one (plan.py digests exactly these).
TEMPLATED = {"regex": "replace", "insert": "text"}

# --------------------------------------------------------------------------------------------- step schemas

_regex = Str(check=regex_check, what="a regular expression")
_rel = Str(check=relpath_check, what="a relative path")
_ON_MISSING = Str(choices=("error", "warn", "ignore"))

STEP_BODIES: dict[str, Any] = {
    "patch": _rel,  # a unified diff in the patchset folder
    "url-patch": Map(
        {
            "url": Key(Str(pattern=HTTP_URL, what="an http(s) URL"), required=True),
            "sha256": Key(Str(pattern=SHA256, what="64 lowercase hex digits"), required=True),
            "strip": Key(Int(minimum=0), default=1),
        },
        what="url-patch mapping",
    ),
    "regex": Map(
        {
            "files": Key(ListOf(Str(), min_items=1, single_ok=True), required=True),
            "exclude": Key(ListOf(Str(), single_ok=True), default=list),
            "pattern": Key(_regex, required=True),
            "replace": Key(Str(allow_numbers=True), required=True),
            "word": Key(Bool(), default=True),  # wrap the pattern in word boundaries
            "on_missing": Key(_ON_MISSING, default="error"),
            "count": Key(Int(minimum=0), default=None),  # expected number of replacements (a guard against drift)
        },
        what="regex mapping",
    ),
    "insert": Map(
        {
            "file": Key(_rel, required=True),
            "text": Key(Str(), required=True),
            "after": Key(_regex, default=None),
            "before": Key(_regex, default=None),
            "at": Key(Str(choices=("end", "start")), default=None),
            "on_missing": Key(_ON_MISSING, default="error"),
        },
        what="insert mapping",
    ),
    "backport": Map(
        {
            "repo": Key(Str(), default=None),  # default: the recipe's git source
            "ref": Key(Str(allow_numbers=True), required=True),
            "commit": Key(Str(pattern=COMMIT, what="a full 40-hex commit id"), required=True),
            "files": Key(ListOf(_rel, min_items=1), required=True),
        },
        what="backport mapping",
    ),
}

STEP_SCHEMA = Map(
    {
        "id": Key(Str(pattern=NAME, what=NAME_WHAT), required=True),
        "description": Key(Str(), default=""),
        "when": Key(WHEN, default=None),
        **{kind: Key(body) for kind, body in STEP_BODIES.items()},
    },
    one_of=STEP_KINDS,
    what="step mapping",
    one_of_why="a step does one thing",
)

PATCHSET_SCHEMA = Map(
    {
        "name": Key(Str(pattern=NAME, what=NAME_WHAT), required=True),
        "description": Key(Str(), required=True),
        "mirrors": Key(Str(), default=""),  # the upstream change this patchset mirrors
        "when": Key(WHEN, default=None),
        # may be empty: `lgpatch new-recipe` starts the recipe's own patchset with no steps
        "steps": Key(ListOf(STEP_SCHEMA), required=True),
    },
    what="patchset mapping",
)

# --------------------------------------------------------------------------------------------- typed bodies


@dataclass(frozen=True)
class PatchBody:
    path: str  # a unified diff, relative to the step's base_dir


@dataclass(frozen=True)
class UrlPatchBody:
    url: str
    sha256: str
    strip: int


@dataclass(frozen=True)
class RegexBody:
    files: tuple[str, ...]
    exclude: tuple[str, ...]
    pattern: str
    replace: str
    word: bool
    on_missing: str
    count: int | None


@dataclass(frozen=True)
class InsertBody:
    file: str
    text: str
    after: str | None
    before: str | None
    at: str | None
    on_missing: str


@dataclass(frozen=True)
class BackportBody:
    repo: str | None
    ref: str
    commit: str
    files: tuple[str, ...]


StepBody = Union[PatchBody, UrlPatchBody, RegexBody, InsertBody, BackportBody]
_BODY_TYPES: dict[str, type] = {"url-patch": UrlPatchBody, "regex": RegexBody, "insert": InsertBody,
                                "backport": BackportBody}


def make_body(kind: str, data: Any) -> StepBody:
    """The validated body of a `kind` step (schema output, defaults filled in) as its frozen type."""
    if kind == "patch":
        return PatchBody(data)
    cls = _BODY_TYPES[kind]
    values = {f.name: tuple(data[f.name]) if isinstance(data[f.name], list) else data[f.name]
              for f in dataclasses.fields(cls)}
    body: StepBody = cls(**values)
    return body


def body_data(body: StepBody) -> Any:
    """The body as the plain data the schema produced: what a step's digest hashes (so digests stay stable)."""
    if isinstance(body, PatchBody):
        return body.path
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(body).items()}


# --------------------------------------------------------------------------------------------- typed objects


@dataclass(frozen=True)
class Step:
    """One atomic unit of change; `patchset` is the folder its files are relative to ("recipe" for inline steps)."""

    id: str
    kind: str
    body: StepBody
    description: str
    when: dict[str, Any] | None
    patchset: str
    base_dir: Path
    source_file: str
    line: int
    index: int = 0  # position in its patchset's (or the recipe's) steps list, for error paths
    body_lines: tuple[tuple[str, int], ...] = ()  # line of each key of the step's body mapping

    @property
    def key(self) -> str:
        return f"{self.patchset}/{self.id}"

    def templated_text(self) -> str | None:
        """The one body field where ${param} is substituted (TEMPLATED names it per kind), or None."""
        field_name = TEMPLATED.get(self.kind)
        return getattr(self.body, field_name) if field_name else None


@dataclass(frozen=True)
class Patchset:
    name: str
    description: str
    mirrors: str
    when: dict[str, Any] | None
    steps: tuple[Step, ...]
    path: Path
    when_line: int = 0


# --------------------------------------------------------------------------------------------- loading


def steps_from(raw_steps: list[dict[str, Any]], lines: list[int], patchset: str, base_dir: Path,
               source: str, raw_items: list[Any] | None = None, first_index: int = 0) -> list[Step]:
    steps = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_steps):
        line = lines[i] if i < len(lines) else 0
        if raw["id"] in seen:
            raise Ctx(source, f"steps[{i}].id", line).error(
                f"duplicate step id {raw['id']!r} (also steps[{seen[raw['id']]}])"
            )
        seen[raw["id"]] = i
        kind = next(k for k in STEP_KINDS if k in raw)
        original = raw_items[i] if raw_items is not None and i < len(raw_items) else None
        body = original.get(kind) if isinstance(original, LineDict) else None
        body_lines = tuple(body.key_lines.items()) if isinstance(body, LineDict) else ()
        steps.append(
            Step(
                id=raw["id"],
                kind=kind,
                body=make_body(kind, raw[kind]),
                description=raw.get("description", ""),
                when=raw.get("when"),
                patchset=patchset,
                base_dir=base_dir,
                source_file=source,
                line=line,
                index=first_index + i,
                body_lines=body_lines,
            )
        )
    return steps


def item_lines(data: Any, key: str) -> list[int]:
    value = data.get(key) if isinstance(data, dict) else None
    return list(getattr(value, "item_lines", []))


def key_line(raw: Any, key: str) -> int:
    return raw.key_lines.get(key, 0) if isinstance(raw, LineDict) else 0


def display(path: Path) -> str:
    """A path as errors show it: relative to the current folder when it can be."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def load_patchset(folder: Path) -> Patchset:
    manifest = folder / "patchset.yaml"
    shown = display(manifest)
    if not manifest.is_file():
        raise ConfigError(f"{shown}: patchset manifest not found")
    raw = load_file(manifest, shown)
    data = PATCHSET_SCHEMA.validate(raw, Ctx(shown, "", getattr(raw, "line", 0)))
    if data["name"] != folder.name:
        raise Ctx(shown, "name", key_line(raw, "name")).error(
            f"patchset name {data['name']!r} must equal its folder name {folder.name!r}"
        )
    steps = steps_from(data["steps"], item_lines(raw, "steps"), data["name"], folder, shown,
                       list(raw.get("steps") or []))
    for i, step in enumerate(steps):
        if isinstance(step.body, PatchBody) and not (folder / step.body.path).is_file():
            raise Ctx(shown, f"steps[{i}].patch", step.line).error(
                f"patch file {step.body.path!r} not found in {display(folder)}"
            )
    return Patchset(data["name"], data["description"], data["mirrors"], data["when"], tuple(steps), folder,
                    key_line(raw, "when"))
