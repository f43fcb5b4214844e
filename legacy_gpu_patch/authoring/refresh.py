"""`lgpatch refresh`: the user's uncommitted edits become a `patch:` step of the recipe (or fold into the step being
edited); the patchset files and the ledger are updated and the tree is left applied and clean.

Order of work, so that nothing the user edited is lost whatever stops the process:
  1. snapshot the edits into a rescue ref (snapshot.py) — the work tree is not touched;
  2. write the patch file, patchset.yaml and the recipe in one journaled file transaction (txn.py); a kill here is
     undone by the next command, and the edits are still in the tree;
  3. reset the tree to the commit the edits were made on and re-apply the series through the engine (the new or
     folded step, then every step above it); a kill here leaves a tree at a step boundary with the recipe complete,
     which the next edit/refresh/apply finishes (.git/lgpatch/reapply.json says so);
  4. check that the refreshed step reproduces the edited tree exactly, then drop the rescue ref.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from legacy_gpu_patch import console
from legacy_gpu_patch.authoring import placement, session, snapshot, txn
from legacy_gpu_patch.config.recipe import Recipe, SearchPath, load_recipe
from legacy_gpu_patch.errors import PatchError, StateError
from legacy_gpu_patch.ledger.plan import PlannedStep
from legacy_gpu_patch.ledger.worktree import WorkTree


@dataclass(frozen=True)
class RefreshOptions:
    into: str | None = None
    name: str | None = None
    message: str | None = None
    fold: bool = False


@dataclass
class RefreshResult:
    mode: str  # fold | after | append | finished (an interrupted refresh completed)
    step: str
    patch_file: Path
    paths: list[str]
    reapplied: list[str] = field(default_factory=list)
    exact: bool = True
    notes: list[str] = field(default_factory=list)


def refresh(wt: WorkTree, search: SearchPath, opts: RefreshOptions) -> RefreshResult:
    finished = session.finish_pending(wt, search)
    recipe = session.tree_recipe(wt, search)
    edit = session.current_edit(wt)
    ledger = wt.ledger()
    if ledger.foreign:
        raise StateError(f"{wt.root} has {len(ledger.foreign)} commit(s) on top that lgpatch did not make",
                         hint="refresh captures uncommitted edits: `git reset --soft` your commits first")
    dirty = wt.dirty_paths()
    if finished and not dirty:  # running refresh again after it was killed: finishing it was the whole job
        return RefreshResult("finished", str(finished.get("step")), Path(str(finished.get("patch_file"))), [])
    if not dirty:
        raise StateError(f"nothing to refresh: {wt.root} has no uncommitted edits",
                         hint="edit files in the tree first (`lgpatch edit [STEP]` puts it at a step)")
    snap = snapshot.take(wt, "refresh")
    paths = snapshot.changed_paths(wt, snap.head, snap.tree)
    binary = snapshot.binary_paths(wt, snap.head, snap.tree)
    if not paths or binary:
        snapshot.drop(wt, snap)
        if binary:
            raise PatchError(f"refresh: binary file(s) cannot be a patch step: {', '.join(binary[:5])}",
                             hint="add binary files with a backport step; the tree was left as it was")
        raise StateError("nothing to refresh: the edits are only in ignored files")
    try:
        place = _placement(wt, recipe, search, edit, snap.head, opts)
        patch = snapshot.format_patch(wt, place.base, snap.tree, place.message)
    except BaseException:
        snapshot.drop(wt, snap)  # nothing was written and the tree is untouched: no rescue needed
        raise
    pending = len(session.selected_plan(recipe, wt.state.params)) - len(ledger.applied)
    if pending > 0 and edit is None:
        place.notes.append(f"{pending} step(s) of the recipe are not applied in this tree; the new step goes after "
                           "them, so they must apply first (`lgpatch edit STEP` to change an applied step)")
    writes: dict[Path, bytes | None] = {place.patch_path: patch, **place.writes}
    if session.edit_path(wt).exists():
        writes[session.edit_path(wt)] = None
    writes[session.reapply_path(wt)] = json.dumps({"rescue": snap.ref, "step": place.step_key, "time": time.time(),
                                                   "patch_file": str(place.patch_path)}).encode()
    with txn.file_transaction(wt, writes, rescue=snap.ref):
        new_recipe = load_recipe(recipe.path, search)  # a file we wrote that does not load: all are put back
    result = RefreshResult(place.mode, place.step_key, place.patch_path, paths, notes=list(place.notes))
    txn.checkpoint("refresh:reapply")
    _reapply(wt, new_recipe, snap, place, result)
    return result


def _placement(wt: WorkTree, recipe: Recipe, search: SearchPath, edit: session.Edit | None, head: str,
               opts: RefreshOptions) -> placement.Placement:
    plan = session.selected_plan(recipe, wt.state.params)
    edited = _edited_step(edit, plan)
    message = opts.message or last_error_summary(wt) or "hand edits"
    if edited is None or opts.into:
        if opts.fold and edited is None:
            raise StateError("--fold needs a step being edited", hint="`lgpatch edit STEP` first")
        return placement.append(recipe, search, opts.into, head, message, opts.name)
    if edit is not None and edit.pending:
        if opts.name or (edited.step.kind != "patch" and not opts.fold):
            raise StateError(f"{edited.step.key} does not apply to this tree, so refresh replaces it by your edits"
                             + ("" if opts.name else f" — and it is a {edited.step.kind} step, never rewritten "
                                "without --fold"),
                             hint="`lgpatch refresh --fold` replaces it by a patch step" if not opts.name else
                             "leave out --name: the step keeps its id")
        return placement.fold(edited, recipe, edit.commit, opts.message, opts.fold)
    if not opts.name and (edited.step.kind == "patch" or opts.fold):
        return placement.fold(edited, recipe, _parent_of(wt, edited.step.key), opts.message, opts.fold)
    return placement.after(edited, recipe, head, message, opts.name)


def _edited_step(edit: session.Edit | None, plan: list[PlannedStep]) -> PlannedStep | None:
    if edit is None or edit.step is None:
        return None
    found = [p for p in plan if p.step.key == edit.step]
    if not found:
        raise StateError(f"the step being edited ({edit.step}) is no longer in the recipe's plan",
                         hint="`lgpatch edit` again (your edits are untouched)")
    return found[0]


def _parent_of(wt: WorkTree, key: str) -> str:
    applied = wt.ledger().applied
    for i, step in enumerate(applied):
        if step.key == key:
            return applied[i - 1].commit if i else wt.baseline
    raise StateError(f"step {key} is not applied in {wt.root}")


def _reapply(wt: WorkTree, recipe: Recipe, snap: snapshot.Snapshot, place: placement.Placement,
             result: RefreshResult) -> None:
    with wt.journal("reset", target=snap.head):
        wt.git.run("reset", "--quiet", "--hard", snap.head)
        wt.git.run("clean", "--quiet", "-fd")
    try:
        report = session.reapply(wt, recipe)
    except PatchError as exc:
        session.reapply_path(wt).unlink(missing_ok=True)
        raise PatchError(
            f"{exc.message}\n  your edits are saved as step {place.step_key} in {place.patch_path} "
            f"(and in {snap.ref}); the steps above it no longer apply on top of them",
            hint="fix the failing step's patch against this tree, then `lgpatch apply`; "
            f"`git diff {snap.head} {snap.ref}` shows your edits",
        ) from None
    session.reapply_path(wt).unlink(missing_ok=True)
    result.reapplied = [a["step"] for a in report.applied]
    ledger = {a.key: a.commit for a in wt.ledger().applied}
    commit = ledger.get(place.step_key)
    if commit is None:
        result.exact = False
        console.warn(f"{place.step_key} is not applied for this tree's parameters (its `when:` is false): your "
                     f"edits are in {place.patch_path} and {snap.ref}, not in the tree")
        return
    result.exact = wt.git.tree_of(commit) == snap.tree
    if result.exact:
        snapshot.drop(wt, snap)
        wt.git.run("update-ref", "-d", session.TAIL_REF, check=False)
    else:
        result.notes.append(f"{place.step_key} sits earlier in the series than where you edited, so the tree "
                            f"after it differs from your edited tree; your edits are kept in {snap.ref}")


def last_error_summary(wt: WorkTree) -> str | None:
    """The first error finding of the last `lgpatch build` in this tree (its report.json), as a one-line subject."""
    data = txn.read_json(WorkTree.meta_dir(wt.root) / "build" / "report.json")
    if not data:
        return None
    errors = [f for f in data.get("findings", []) if f.get("severity") == "error" and not f.get("secondary")]
    if not errors:
        return None
    first = errors[0]
    message = " ".join(str(first.get("message", "")).split())[:100]
    where = ""
    if first.get("file") and str(first["file"]) not in message:
        where = f" ({first['file']}{':' + str(first['line']) if first.get('line') else ''})"
    return f"Fix {first.get('category', 'build error')}: {message}{where}"
