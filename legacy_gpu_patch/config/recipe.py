"""Recipes: the recipe schema (as data), the frozen Recipe, and lookup by name, alias or path.

A recipe pins a source and lists ordered steps: references to patchsets (folders under patchsets/, see
patchset.py) or inline steps. Everything is validated once, at load time, with errors that name file, line and key
path; the sections are then frozen typed objects (source_schema, build_schema, verify_schema), never dicts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.config import conditions
from legacy_gpu_patch.config.build_schema import BUILD_SCHEMA, BuildSection, make_build
from legacy_gpu_patch.config.params import PARAM_SCHEMA, Param, check_param, check_when, param_problem
from legacy_gpu_patch.config.patchset import (
    NAME,
    NAME_WHAT,
    STEP_SCHEMA,
    TEMPLATED,
    PatchBody,
    Patchset,
    Step,
    display,
    item_lines,
    load_patchset,
    steps_from,
)
from legacy_gpu_patch.config.schema import (
    WHEN,
    AnyOf,
    Ctx,
    Key,
    ListOf,
    Map,
    MapOf,
    Str,
    did_you_mean,
)
from legacy_gpu_patch.config.search import RECIPE_PATH_ENV, SearchPath
from legacy_gpu_patch.config.source_schema import SOURCE_SCHEMA, Source, make_source
from legacy_gpu_patch.config.verify_schema import VERIFY_SCHEMA, Probe, make_probe
from legacy_gpu_patch.config.yamlio import LineDict, load_file
from legacy_gpu_patch.errors import ConfigError

# Re-exported: callers look recipes up with a SearchPath and read their Steps.
__all__ = ["Param", "Recipe", "RecipeEntry", "SearchPath", "Step", "all_recipes", "find_recipe", "load_recipe",
           "param_problem"]

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
class RecipeEntry:
    """A recipe step as written: a patchset (with the recipe-level `when`) or an inline step."""

    patchset: Patchset | None
    when: dict[str, Any] | None
    step: Step | None

    def steps(self) -> tuple[Step, ...]:
        if self.step is not None:
            return (self.step,)
        return self.patchset.steps if self.patchset is not None else ()


@dataclass(frozen=True)
class Recipe:
    name: str
    aliases: tuple[str, ...]
    description: str
    source_kind: str  # "git" | "sdist" (source.kind)
    source: Source
    params: dict[str, Param]
    entries: tuple[RecipeEntry, ...]
    ignore: tuple[str, ...]
    build: BuildSection | None
    verify: tuple[Probe, ...]
    notes: str
    path: Path
    digest: str = field(default="")

    def param_kinds(self) -> dict[str, str]:
        return {name: p.kind for name, p in self.params.items()}


# --------------------------------------------------------------------------------------------- checks


def check_templates(step: Step, params: dict[str, Param], ctx: Ctx) -> None:
    """Every ${name} a step uses must be a parameter: caught when the recipe loads, not halfway through apply."""
    text = step.templated_text()
    if text is None:
        return
    field_name = TEMPLATED[step.kind]
    for name in sorted(conditions.template_names(text)):
        if name not in params:
            line = dict(step.body_lines).get(field_name) or ctx.line
            raise ctx.child(step.kind).child(field_name, line).error(
                f"${{{name}}} is not a parameter{did_you_mean(name, params)}; this recipe has: "
                f"{', '.join(params) or 'none'}"
            )


# --------------------------------------------------------------------------------------------- loading


class _EntryLoader:
    """Turns the validated `steps:` list into RecipeEntries, checking names, `when:` and templates."""

    def __init__(self, path: Path, raw: Any, params: dict[str, Param], search: SearchPath) -> None:
        self.path, self.raw, self.params, self.search = path, raw, params, search
        self.seen: set[str] = set()

    def patchset(self, item: str | dict[str, Any], ctx: Ctx) -> RecipeEntry:
        name = item if isinstance(item, str) else item["patchset"]
        when = None if isinstance(item, str) else item.get("when")
        check_when(when, self.params, ctx)
        folder = self.search.find_patchset(name)
        if folder is None:
            raise ctx.error(
                f"patchset {name!r} not found{did_you_mean(name, self.search.patchset_names())}; looked in "
                + ", ".join(display(d) for d in self.search.patchset_dirs)
            )
        ps = load_patchset(folder)
        if name in self.seen:
            raise ctx.error(f"patchset {name!r} is listed twice")
        self.seen.add(name)
        check_when(ps.when, self.params, Ctx(display(folder / "patchset.yaml"), "", ps.when_line))
        for step in ps.steps:
            step_ctx = Ctx(step.source_file, f"steps[{step.index}]", step.line)
            check_when(step.when, self.params, step_ctx)
            check_templates(step, self.params, step_ctx)
        return RecipeEntry(ps, when, None)

    def inline(self, item: dict[str, Any], i: int, ctx: Ctx) -> RecipeEntry:
        raw_steps = self.raw.get("steps") if isinstance(self.raw, dict) else None
        raw_item = raw_steps[i] if isinstance(raw_steps, list) and i < len(raw_steps) else None
        step = steps_from([item], [ctx.line], "recipe", self.path.parent, ctx.source, [raw_item], i)[0]
        if f"recipe/{step.id}" in self.seen:
            raise ctx.error(f"duplicate inline step id {step.id!r}")
        self.seen.add(f"recipe/{step.id}")
        check_when(step.when, self.params, ctx)
        check_templates(step, self.params, ctx)
        if isinstance(step.body, PatchBody) and not (self.path.parent / step.body.path).is_file():
            raise ctx.child("patch").error(f"patch file {step.body.path!r} not found next to the recipe")
        return RecipeEntry(None, None, step)


def _entries(path: Path, raw: Any, data: dict[str, Any], params: dict[str, Param], search: SearchPath,
             root: Ctx) -> tuple[RecipeEntry, ...]:
    loader = _EntryLoader(path, raw, params, search)
    step_lines = item_lines(raw, "steps")
    top_line = getattr(raw, "key_lines", {}).get("steps")
    entries = []
    for i, item in enumerate(data["steps"]):
        ctx = root.child("steps").child(i, step_lines[i] if i < len(step_lines) else top_line)
        if isinstance(item, str) or "patchset" in item:
            entries.append(loader.patchset(item, ctx))
        else:
            entries.append(loader.inline(item, i, ctx))
    return tuple(entries)


def _check_sections(raw: Any, data: dict[str, Any], params: dict[str, Param], root: Ctx) -> None:
    """`when:` of build commands and probes, and an sdist that says where it comes from."""
    for j, cmd in enumerate((data["build"] or {}).get("commands", [])):
        check_when(cmd.get("when"), params, root.child("build").child("commands").child(j))
    for j, probe in enumerate(data["verify"]):
        check_when(probe.get("when"), params, root.child("verify").child(j))
    sdist = data["source"].get("sdist")
    if sdist is not None and not sdist.get("url") and not (sdist.get("name") and sdist.get("version")):
        raw_source = raw.get("source") if isinstance(raw, dict) else None
        line = raw_source.key_lines.get("sdist") if isinstance(raw_source, LineDict) else None
        raise root.child("source").child("sdist", line).error("needs either 'url' or both 'name' and 'version'")


def load_recipe(path: Path, search: SearchPath) -> Recipe:
    search = search.for_recipe_file(path)
    shown = display(path)
    raw = load_file(path, shown)
    root = Ctx(shown, "", getattr(raw, "line", 0))
    data = RECIPE_SCHEMA.validate(raw, root)
    params = {
        name: check_param(name, p, root.child("parameters").child(name, _param_line(raw, name)))
        for name, p in data["parameters"].items()
    }
    entries = _entries(path, raw, data, params, search, root)
    _check_sections(raw, data, params, root)
    source = make_source(data["source"])
    return Recipe(
        name=data["name"],
        aliases=tuple(data["aliases"]),
        description=data["description"],
        source_kind=source.kind,
        source=source,
        params=params,
        entries=entries,
        ignore=tuple(data["ignore"]),
        build=make_build(data["build"]) if data["build"] is not None else None,
        verify=tuple(make_probe(p) for p in data["verify"]),
        notes=data["notes"],
        path=path,
        digest=hashlib.sha256(path.read_bytes()).hexdigest(),
    )


def _param_line(raw: Any, name: str) -> int | None:
    params = raw.get("parameters") if isinstance(raw, dict) else None
    return params.key_lines.get(name) if isinstance(params, LineDict) else None


# --------------------------------------------------------------------------------------------- lookup


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
            raise ConfigError(f"{display(known[name_or_path])}: alias index out of date for {name_or_path!r}")
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
