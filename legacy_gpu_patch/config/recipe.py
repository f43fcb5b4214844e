"""Recipes and patchsets: schemas (as data), frozen typed objects, and lookup by name or alias.

A recipe pins a source and lists ordered steps: references to patchsets (folders under patchsets/) or inline steps.
Everything is validated once, at load time, with errors that name file, line and key path.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.build_schema import BUILD_SCHEMA
from legacy_gpu_patch.config.resources import builtin_patchsets_dir, builtin_recipes_dir
from legacy_gpu_patch.config.schema import (
    WHEN,
    AnyOf,
    Bool,
    Ctx,
    Int,
    Key,
    ListOf,
    Map,
    MapOf,
    Scalar,
    Str,
    did_you_mean,
    regex_check,
    relpath_check,
)
from legacy_gpu_patch.config.verify_schema import VERIFY_SCHEMA
from legacy_gpu_patch.config.yamlio import LineDict, load_file
from legacy_gpu_patch.errors import ConfigError

NAME = r"[a-z0-9][a-z0-9.+_-]*"
NAME_WHAT = "a name of lowercase letters, digits, '.', '+', '_', '-'"
SHA256 = r"[0-9a-f]{64}"
COMMIT = r"[0-9a-f]{40}"
RECIPE_PATH_ENV = "LGPATCH_RECIPE_PATH"
PATCHSET_PATH_ENV = "LGPATCH_PATCHSET_PATH"

STEP_KINDS = ("patch", "url-patch", "regex", "insert", "backport")
PARAM_KINDS = ("version", "arch", "bool", "string")
DETECTORS = ("python", "cuda")

# --------------------------------------------------------------------------------------------- step schemas

_regex = Str(check=regex_check, what="a regular expression")
_rel = Str(check=relpath_check, what="a relative path")

STEP_BODIES: dict[str, Any] = {
    "patch": _rel,  # a unified diff in the patchset folder
    "url-patch": Map(
        {
            "url": Key(Str(pattern=r"https?://\S+", what="an http(s) URL"), required=True),
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
            "on_missing": Key(Str(choices=("error", "warn", "ignore")), default="error"),
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
            "on_missing": Key(Str(choices=("error", "warn", "ignore")), default="error"),
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

RECIPE_STEP_SCHEMA = AnyOf(
    [
        (lambda v: isinstance(v, dict) and "patchset" in v,
         Map({"patchset": Key(Str(pattern=NAME, what=NAME_WHAT), required=True),
              "when": Key(WHEN, default=None)}, what="patchset reference")),
        (lambda v: isinstance(v, str), Str(pattern=NAME, what="a patchset name")),
        (lambda v: isinstance(v, dict), STEP_SCHEMA),
    ],
    what="a patchset name, {patchset: NAME, when: ...} or an inline step",
)

PARAM_SCHEMA = Map(
    {
        "type": Key(Str(choices=PARAM_KINDS), default="string"),
        "default": Key(Scalar(), required=True),
        "choices": Key(ListOf(Scalar()), default=None),
        "allowed": Key(Str(), default=None),  # a range for version/arch parameters
        "detect": Key(Str(choices=DETECTORS), default=None),  # used when default is "auto"
        # A string parameter's values must match this (whole) regex: values reach source files through templates.
        "pattern": Key(Str(check=regex_check, what="a regular expression"), default=None),
        "description": Key(Str(), default=""),
    },
    what="parameter mapping",
)

SOURCE_SCHEMA = Map(
    {
        "git": Key(
            Map(
                {
                    "url": Key(Str(), required=True),
                    "ref": Key(Str(allow_numbers=True), required=True),
                    "commit": Key(Str(pattern=COMMIT, what="a full 40-hex commit id"), required=True),
                    # true: all, recursively; or the paths the build needs (PyTorch has ~30, a CUDA build needs ~10)
                    "submodules": Key(AnyOf([(lambda v: isinstance(v, list),
                                              ListOf(Str(check=relpath_check, what="a submodule path"), min_items=1)),
                                             (lambda v: True, Bool())], what="true/false or a list of submodule paths"),
                                      default=False),
                },
                what="git source",
            )
        ),
        "sdist": Key(
            Map(
                {
                    "name": Key(Str(), default=None),
                    "version": Key(Str(allow_numbers=True), default=None),
                    "url": Key(Str(pattern=r"https?://\S+", what="an http(s) URL"), default=None),
                    "sha256": Key(Str(pattern=SHA256, what="64 lowercase hex digits"), required=True),
                    "index": Key(Str(), default="https://pypi.org/simple"),
                },
                what="sdist source",
            )
        ),
    },
    one_of=("git", "sdist"),
    what="source mapping",
    one_of_why="a recipe has one source",
)

RECIPE_SCHEMA = Map(
    {
        "name": Key(Str(pattern=NAME, what=NAME_WHAT), required=True),
        "aliases": Key(ListOf(Str(pattern=NAME, what=NAME_WHAT)), default=list),
        "description": Key(Str(), required=True),
        "source": Key(SOURCE_SCHEMA, required=True),
        "parameters": Key(MapOf(PARAM_SCHEMA, key=Str(pattern=r"[a-z][a-z0-9_]*", what="a parameter name")),
                          default=dict),
        "steps": Key(ListOf(RECIPE_STEP_SCHEMA, min_items=1), required=True),
        "ignore": Key(ListOf(Str()), default=list),  # build outputs that are not user edits
        "build": Key(BUILD_SCHEMA, default=None),
        "verify": Key(VERIFY_SCHEMA, default=list),
        "notes": Key(Str(), default=""),  # run-time notes shown after apply/build
    },
    what="recipe mapping",
)

# --------------------------------------------------------------------------------------------- typed objects


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: Any
    choices: tuple[Any, ...] | None
    allowed: str | None
    detect: str | None
    description: str
    pattern: str | None = None


@dataclass(frozen=True)
class Step:
    """One atomic unit of change; `patchset` is the folder its files are relative to (None for inline steps)."""

    id: str
    kind: str
    body: Any
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


@dataclass(frozen=True)
class Patchset:
    name: str
    description: str
    mirrors: str
    when: dict[str, Any] | None
    steps: tuple[Step, ...]
    path: Path
    when_line: int = 0


@dataclass(frozen=True)
class RecipeEntry:
    """A recipe step as written: a patchset (with the recipe-level `when`) or an inline step."""

    patchset: Patchset | None
    when: dict[str, Any] | None
    step: Step | None


@dataclass(frozen=True)
class Recipe:
    name: str
    aliases: tuple[str, ...]
    description: str
    source_kind: str  # "git" | "sdist"
    source: dict[str, Any]
    params: dict[str, Param]
    entries: tuple[RecipeEntry, ...]
    ignore: tuple[str, ...]
    build: dict[str, Any] | None
    verify: tuple[dict[str, Any], ...]
    notes: str
    path: Path
    digest: str = field(default="")

    def param_kinds(self) -> dict[str, str]:
        return {name: p.kind for name, p in self.params.items()}


# --------------------------------------------------------------------------------------------- loading


def _steps_from(raw_steps: list[dict[str, Any]], lines: list[int], patchset: str, base_dir: Path,
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
                body=raw[kind],
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


def _item_lines(data: Any, key: str) -> list[int]:
    value = data.get(key) if isinstance(data, dict) else None
    return list(getattr(value, "item_lines", []))


def load_patchset(folder: Path) -> Patchset:
    manifest = folder / "patchset.yaml"
    shown = _display(manifest)
    if not manifest.is_file():
        raise ConfigError(f"{shown}: patchset manifest not found")
    raw = load_file(manifest, shown)
    data = PATCHSET_SCHEMA.validate(raw, Ctx(shown, "", getattr(raw, "line", 0)))
    if data["name"] != folder.name:
        raise Ctx(shown, "name", _key_line(raw, "name")).error(
            f"patchset name {data['name']!r} must equal its folder name {folder.name!r}"
        )
    steps = _steps_from(data["steps"], _item_lines(raw, "steps"), data["name"], folder, shown,
                        list(raw.get("steps") or []))
    for i, step in enumerate(steps):
        if step.kind == "patch":
            target = folder / step.body
            if not target.is_file():
                raise Ctx(shown, f"steps[{i}].patch", step.line).error(
                    f"patch file {step.body!r} not found in {_display(folder)}"
                )
    return Patchset(data["name"], data["description"], data["mirrors"], data["when"], tuple(steps), folder,
                    _key_line(raw, "when"))


def _key_line(raw: Any, key: str) -> int:
    return raw.key_lines.get(key, 0) if isinstance(raw, LineDict) else 0


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class SearchPath:
    """Where recipes and patchsets are looked up, user folders first (they may override built-ins)."""

    recipe_dirs: tuple[Path, ...]
    patchset_dirs: tuple[Path, ...]

    @classmethod
    def from_options(cls, extra_recipe_dirs: Sequence[str | Path] = ()) -> SearchPath:
        user: list[Path] = [Path(p) for p in extra_recipe_dirs]
        env = os.environ.get(RECIPE_PATH_ENV, "")
        user += [Path(p) for p in env.split(os.pathsep) if p]
        recipe_dirs = [*user, builtin_recipes_dir()]
        patchset_dirs: list[Path] = []
        env_ps = os.environ.get(PATCHSET_PATH_ENV, "")
        patchset_dirs += [Path(p) for p in env_ps.split(os.pathsep) if p]
        for d in user:
            patchset_dirs += [d / "patchsets", d.parent / "patchsets"]
        patchset_dirs.append(builtin_patchsets_dir())
        return cls(tuple(recipe_dirs), tuple(patchset_dirs))

    def for_recipe_file(self, path: Path) -> SearchPath:
        """A recipe given by path finds the patchsets beside it first (its folder's patchsets/ or ../patchsets/)."""
        here = path.resolve().parent
        extra = tuple(d for d in (here / "patchsets", here.parent / "patchsets") if d not in self.patchset_dirs)
        return SearchPath(self.recipe_dirs, extra + self.patchset_dirs)

    def recipe_files(self) -> list[Path]:
        seen: set[str] = set()
        files = []
        for d in self.recipe_dirs:
            if not d.is_dir():
                continue
            for f in sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml")):
                if f.stem not in seen:
                    seen.add(f.stem)
                    files.append(f)
        return files

    def find_patchset(self, name: str) -> Path | None:
        for d in self.patchset_dirs:
            candidate = d / name
            if (candidate / "patchset.yaml").is_file():
                return candidate
        return None

    def patchset_names(self) -> list[str]:
        names: set[str] = set()
        for d in self.patchset_dirs:
            if d.is_dir():
                names.update(p.parent.name for p in d.glob("*/patchset.yaml"))
        return sorted(names)


def check_when(when: dict[str, Any] | None, params: dict[str, Param], ctx: Ctx) -> None:
    for name, cond in (when or {}).items():
        if name not in params:
            raise ctx.child("when").child(name).error(
                f"unknown parameter{did_you_mean(name, params)}; this recipe has: {', '.join(params) or 'none'}"
            )
        problem = conditions.check_condition(params[name].kind, cond)
        if problem:
            raise ctx.child("when").child(name).error(problem)


TEMPLATED = {"regex": "replace", "insert": "text"}  # the step fields where ${param} is substituted


def check_templates(step: Step, params: dict[str, Param], ctx: Ctx) -> None:
    """Every ${name} a step uses must be a parameter: caught when the recipe loads, not halfway through apply."""
    field_name = TEMPLATED.get(step.kind)
    if field_name is None:
        return
    for name in sorted(conditions.template_names(step.body[field_name])):
        if name not in params:
            line = dict(step.body_lines).get(field_name) or ctx.line
            raise ctx.child(step.kind).child(field_name, line).error(
                f"${{{name}}} is not a parameter{did_you_mean(name, params)}; this recipe has: "
                f"{', '.join(params) or 'none'}"
            )


def _check_param(name: str, p: dict[str, Any], ctx: Ctx) -> Param:
    kind = p["type"]
    default = p["default"]
    if p["allowed"] is not None:
        if kind not in ("version", "arch"):
            raise ctx.child("allowed").error("'allowed' ranges apply to version and arch parameters only")
        problem = conditions.check_condition(kind, p["allowed"])
        if problem:
            raise ctx.child("allowed").error(problem)
    if default == "auto" and not p["detect"] and kind != "string":
        raise ctx.child("default").error("'auto' needs 'detect: python' or 'detect: cuda'")
    param = Param(name, kind, default, tuple(p["choices"]) if p["choices"] else None, p["allowed"], p["detect"],
                  p["description"], p["pattern"])
    if default != "auto":
        problem = param_problem(param, default)
        if problem:
            raise ctx.child("default").error(problem)
    return param


def param_problem(param: Param, value: Any) -> str | None:
    """Why `value` is not valid for `param`, or None."""
    try:
        if param.kind == "version":
            conditions.parse_version(str(value))
        elif param.kind == "arch":
            conditions.arch_number(str(value))
        elif param.kind == "bool" and not isinstance(value, bool):
            return f"expected true or false, got {value!r}"
    except ValueError as exc:
        return str(exc)
    if param.choices is not None and str(value) not in {str(c) for c in param.choices}:
        choices = [str(c) for c in param.choices]
        return f"{value!r} is not one of {', '.join(choices)}{did_you_mean(str(value), choices)}"
    if param.pattern is not None and not re.fullmatch(param.pattern, str(value)):
        return f"{value!r} does not match the pattern {param.pattern!r}"
    if param.allowed is not None and not conditions.holds(param.kind, param.allowed, value):
        return f"{value!r} is outside the allowed range {param.allowed}"
    return None


def load_recipe(path: Path, search: SearchPath) -> Recipe:
    search = search.for_recipe_file(path)
    shown = _display(path)
    raw = load_file(path, shown)
    root = Ctx(shown, "", getattr(raw, "line", 0))
    data = RECIPE_SCHEMA.validate(raw, root)
    lines = getattr(raw, "key_lines", {})
    params = {
        name: _check_param(name, p, root.child("parameters").child(name, _param_line(raw, name)))
        for name, p in data["parameters"].items()
    }
    entries: list[RecipeEntry] = []
    step_lines = _item_lines(raw, "steps")
    inline: list[dict[str, Any]] = []
    seen_keys: set[str] = set()
    for i, item in enumerate(data["steps"]):
        ctx = root.child("steps").child(i, step_lines[i] if i < len(step_lines) else lines.get("steps"))
        if isinstance(item, str) or "patchset" in item:
            name = item if isinstance(item, str) else item["patchset"]
            when = None if isinstance(item, str) else item.get("when")
            check_when(when, params, ctx)
            folder = search.find_patchset(name)
            if folder is None:
                raise ctx.error(
                    f"patchset {name!r} not found{did_you_mean(name, search.patchset_names())}; looked in "
                    + ", ".join(_display(d) for d in search.patchset_dirs)
                )
            ps = load_patchset(folder)
            if name in seen_keys:
                raise ctx.error(f"patchset {name!r} is listed twice")
            seen_keys.add(name)
            check_when(ps.when, params, Ctx(_display(folder / "patchset.yaml"), "", ps.when_line))
            for step in ps.steps:
                step_ctx = Ctx(step.source_file, f"steps[{step.index}]", step.line)
                check_when(step.when, params, step_ctx)
                check_templates(step, params, step_ctx)
            entries.append(RecipeEntry(ps, when, None))
        else:
            inline.append(item)
            raw_steps = raw.get("steps") if isinstance(raw, dict) else None
            raw_item = raw_steps[i] if isinstance(raw_steps, list) and i < len(raw_steps) else None
            step = _steps_from([item], [ctx.line], "recipe", path.parent, shown, [raw_item], i)[0]
            if f"recipe/{step.id}" in seen_keys:
                raise ctx.error(f"duplicate inline step id {step.id!r}")
            seen_keys.add(f"recipe/{step.id}")
            check_when(step.when, params, ctx)
            check_templates(step, params, ctx)
            if step.kind == "patch" and not (path.parent / step.body).is_file():
                raise ctx.child("patch").error(f"patch file {step.body!r} not found next to the recipe")
            entries.append(RecipeEntry(None, None, step))
    for j, cmd in enumerate((data["build"] or {}).get("commands", [])):
        check_when(cmd.get("when"), params, root.child("build").child("commands").child(j))
    for j, probe in enumerate(data["verify"]):
        check_when(probe.get("when"), params, root.child("verify").child(j))
    source_kind = "git" if "git" in data["source"] else "sdist"
    source = data["source"][source_kind]
    if source_kind == "sdist" and not source.get("url") and not (source.get("name") and source.get("version")):
        raw_source = raw.get("source") if isinstance(raw, dict) else None
        line = raw_source.key_lines.get("sdist") if isinstance(raw_source, LineDict) else None
        raise root.child("source").child("sdist", line).error("needs either 'url' or both 'name' and 'version'")
    return Recipe(
        name=data["name"],
        aliases=tuple(data["aliases"]),
        description=data["description"],
        source_kind=source_kind,
        source=source,
        params=params,
        entries=tuple(entries),
        ignore=tuple(data["ignore"]),
        build=data["build"],
        verify=tuple(data["verify"]),
        notes=data["notes"],
        path=path,
        digest=hashlib.sha256(path.read_bytes()).hexdigest(),
    )


def _param_line(raw: Any, name: str) -> int | None:
    params = raw.get("parameters") if isinstance(raw, dict) else None
    return params.key_lines.get(name) if isinstance(params, LineDict) else None


def _quick_names(path: Path) -> tuple[str, list[str]]:
    """Name and aliases read cheaply (regex), so that listing or lookup does not validate every recipe."""
    text = path.read_text(encoding="utf-8", errors="replace")
    name_m = re.search(r"^name:\s*['\"]?([^'\"\s#]+)", text, re.M)
    alias_m = re.search(r"^aliases:\s*\[([^\]]*)\]", text, re.M)
    aliases = [a.strip().strip("'\"") for a in alias_m.group(1).split(",")] if alias_m else []
    if not alias_m:
        block = re.search(r"^aliases:\s*\n((?:\s+-\s*.+\n?)+)", text, re.M)
        if block:
            aliases = [ln.strip()[1:].strip().strip("'\"") for ln in block.group(1).splitlines() if ln.strip()]
    return (name_m.group(1) if name_m else path.stem), [a for a in aliases if a]


def find_recipe(name_or_path: str, search: SearchPath) -> Recipe:
    """Resolve a recipe by file path, name or alias; unknown names get the closest suggestion."""
    as_path = Path(name_or_path)
    if name_or_path.endswith((".yaml", ".yml")) and as_path.is_file():
        return load_recipe(as_path, search)
    known: dict[str, Path] = {}
    for f in search.recipe_files():
        name, aliases = _quick_names(f)
        for n in (name, f.stem, *aliases):
            known.setdefault(n, f)
    if name_or_path in known:
        recipe = load_recipe(known[name_or_path], search)
        if name_or_path not in (recipe.name, known[name_or_path].stem, *recipe.aliases):
            raise ConfigError(f"{_display(known[name_or_path])}: alias index out of date for {name_or_path!r}")
        return recipe
    raise ConfigError(
        f"no recipe named {name_or_path!r}{did_you_mean(name_or_path, known)}",
        hint="`lgpatch list` shows the known recipes; --recipe-path DIR or "
        f"{RECIPE_PATH_ENV} adds your own folders",
    )


def all_recipes(search: SearchPath, problems: list[ConfigError] | None = None) -> Iterable[Recipe]:
    """Every recipe on the search path. With `problems`, a broken recipe is collected there instead of stopping
    the listing (one bad file in a user's folder must not hide all the others)."""
    for f in search.recipe_files():
        try:
            yield load_recipe(f, search)
        except ConfigError as exc:
            if problems is None:
                raise
            problems.append(exc)
