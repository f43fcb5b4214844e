"""Where a refresh puts the user's edits: which step, which files change, and with what text.

    fold      the step being edited is a `patch:` step (or --fold): its patch file becomes base → edited tree
    after     the step being edited is declarative (regex/insert/…): a new patch step right after it, so the
              declarative step is never rewritten behind the user's back
    append    no step is being edited: a new patch step at the end of the recipe's own patchset (or --into)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from legacy_gpu_patch.authoring import yamledit
from legacy_gpu_patch.config.patchset import NAME, PatchBody, Step
from legacy_gpu_patch.config.recipe import Recipe, SearchPath
from legacy_gpu_patch.config.resources import builtin_patchsets_dir, builtin_recipes_dir
from legacy_gpu_patch.errors import ConfigError
from legacy_gpu_patch.ledger.plan import PlannedStep


@dataclass
class Placement:
    mode: str  # fold | after | append
    step_key: str
    step_id: str
    patch_path: Path
    base: str  # the commit the patch is written against
    message: str
    writes: dict[Path, bytes] = field(default_factory=dict)  # yaml files that change (the patch is added later)
    notes: list[str] = field(default_factory=list)


def slug(text: str, limit: int = 40) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    cut = words[:limit].rstrip("-")
    return cut or "edit"


def _unique(base: str, taken: set[str]) -> str:
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def check_writable(folder: Path, what: str) -> None:
    here = folder.resolve()
    for shipped in (builtin_patchsets_dir().resolve(), builtin_recipes_dir().resolve()):
        if here == shipped or shipped in here.parents:
            raise ConfigError(
                f"{what} is one of lgpatch's shipped files ({folder}); refresh writes only your own recipe folders",
                hint="copy the recipe and its patchsets into a folder of yours and use --recipe-path DIR",
            )


def _manifest_of(step: Step, recipe: Recipe) -> Path:
    return recipe.path if step.patchset == "recipe" else step.base_dir / "patchset.yaml"


def _new_patch_file(folder: Path, step_id: str) -> Path:
    taken = {p.name for p in folder.glob("*.patch")} if folder.is_dir() else set()
    return folder / _unique(f"{step_id}.patch", taken)


def fold(planned: PlannedStep, recipe: Recipe, base: str, message: str | None, forced: bool) -> Placement:
    step = planned.step
    check_writable(step.base_dir, f"step {step.key}")
    if step.kind == "patch":
        path = step.base_dir / step.body.path if isinstance(step.body, PatchBody) else step.base_dir / str(step.body)
        msg = message or _patch_subject(path) or step.description or step.key
        return Placement("fold", step.key, step.id, path, base, msg)
    if not forced:
        raise AssertionError("fold of a declarative step needs --fold")
    path = _new_patch_file(step.base_dir, step.id)
    manifest = _manifest_of(step, recipe)
    msg = message or step.description or f"{step.key} as a patch"
    item = yamledit.patch_step_item(step.id, step.description or msg.split("\n", 1)[0], path.name, step.when)
    text = yamledit.replace_item(manifest, manifest.read_text(encoding="utf-8"), step.index, item)
    place = Placement("fold", step.key, step.id, path, base, msg, {manifest: text.encode()})
    place.notes.append(f"{step.key} was a {step.kind} step; --fold replaced it by a patch step ({path.name}) "
                       "holding its change and your edits")
    return place


def after(planned: PlannedStep, recipe: Recipe, head: str, message: str, name: str | None) -> Placement:
    step = planned.step
    check_writable(step.base_dir, f"step {step.key}")
    manifest = _manifest_of(step, recipe)
    siblings = _ids_in(recipe, step.patchset)
    step_id = _checked_name(name) if name else _unique(slug(message.split("\n", 1)[0]), siblings)
    if step_id in siblings:
        raise ConfigError(f"{step.patchset} already has a step {step_id!r}", hint="choose another --name")
    path = _new_patch_file(step.base_dir, step_id)
    item = yamledit.patch_step_item(step_id, message.split("\n", 1)[0], path.name)
    text = yamledit.insert_item(manifest, manifest.read_text(encoding="utf-8"), item, step.index)
    place = Placement("after", f"{step.patchset}/{step_id}", step_id, path, head, message, {manifest: text.encode()})
    if step.kind != "patch":
        place.notes.append(f"{step.key} is a {step.kind} step and is left as written; your edits are a new patch "
                           f"step after it (`lgpatch refresh --fold` would replace it by one patch step)")
    return place


def append(recipe: Recipe, search: SearchPath, into: str | None, head: str, message: str,
           name: str | None) -> Placement:
    patchset = _checked_name(into) if into else recipe.name
    listed = next((e.patchset for e in recipe.entries if e.patchset and e.patchset.name == patchset), None)
    folder = listed.path if listed else search.for_recipe_file(recipe.path).find_patchset(patchset)
    writes: dict[Path, bytes] = {}
    notes: list[str] = []
    if folder is None:
        check_writable(recipe.path.parent, f"recipe {recipe.name}")
        folder = recipe.path.parent / "patchsets" / patchset
        manifest_text = yamledit.patchset_manifest(patchset, f"Hand edits of recipe {recipe.name}")
        notes.append(f"created patchset {patchset} in {folder}")
    else:
        check_writable(folder, f"patchset {patchset}")
        manifest_text = (folder / "patchset.yaml").read_text(encoding="utf-8")
    if listed is None:
        check_writable(recipe.path.parent, f"recipe {recipe.name}")
        text = yamledit.insert_item(recipe.path, recipe.path.read_text(encoding="utf-8"),
                                    f"- {patchset}\n", None)
        writes[recipe.path] = text.encode()
        notes.append(f"added patchset {patchset} to the end of {recipe.path.name}")
    siblings = {s.id for s in listed.steps} if listed else _ids_in_manifest(folder)
    step_id = _checked_name(name) if name else _unique(slug(message.split("\n", 1)[0]), siblings)
    if step_id in siblings:
        raise ConfigError(f"{patchset} already has a step {step_id!r}", hint="choose another --name")
    path = _new_patch_file(folder, step_id)
    item = yamledit.patch_step_item(step_id, message.split("\n", 1)[0], path.name)
    manifest = folder / "patchset.yaml"
    writes[manifest] = yamledit.insert_item(manifest, manifest_text, item, None).encode()
    return Placement("append", f"{patchset}/{step_id}", step_id, path, head, message, writes, notes)


def _checked_name(name: str) -> str:
    if not re.fullmatch(NAME, name):
        raise ConfigError(f"{name!r} is not a valid name: use lowercase letters, digits, '.', '+', '_', '-'")
    return name


def _ids_in(recipe: Recipe, patchset: str) -> set[str]:
    ids: set[str] = set()
    for entry in recipe.entries:
        if entry.patchset and entry.patchset.name == patchset:
            ids |= {s.id for s in entry.patchset.steps}
        elif entry.step and patchset == "recipe":
            ids.add(entry.step.id)
    return ids


def _ids_in_manifest(folder: Path) -> set[str]:
    if not (folder / "patchset.yaml").is_file():
        return set()
    from legacy_gpu_patch.config.recipe import load_patchset

    return {s.id for s in load_patchset(folder).steps}


def _patch_subject(path: Path) -> str | None:
    """The subject of a format-patch file (without [PATCH]), to keep it when the patch is refreshed."""
    try:
        head = path.read_text(encoding="utf-8", errors="replace").split("\ndiff --git", 1)[0]
    except OSError:
        return None
    m = re.search(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n [^\n]*)*)", head, re.M)
    if not m:
        return None
    subject = " ".join(part.strip() for part in m.group(1).split("\n"))
    body = head[m.end():].split("\n\n", 1)
    rest = body[1].split("\n---\n", 1)[0].strip() if len(body) > 1 else ""
    return subject + (f"\n\n{rest}" if rest else "")
