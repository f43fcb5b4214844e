"""What authoring keeps in the ledger's folder next to state.json, and helpers shared by edit and refresh.

    .git/lgpatch/edit.json     an edit in progress: which step, the commit the tree was put at, the tail of steps
                               that were above it (also kept in refs/lgpatch/edit-tail)
    .git/lgpatch/reapply.json  a refresh whose recipe files are written but whose re-apply did not finish (killed or
                               interrupted): the next edit/refresh finishes it; `lgpatch apply` does the same
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legacy_gpu_patch import console
from legacy_gpu_patch.authoring.txn import read_json
from legacy_gpu_patch.config.recipe import Recipe, SearchPath, find_recipe, load_recipe
from legacy_gpu_patch.errors import DirtyTreeError, PatchError, StateError
from legacy_gpu_patch.ledger.engine import ApplyOptions, ApplyReport, apply_open
from legacy_gpu_patch.ledger.plan import PlannedStep, make_plan
from legacy_gpu_patch.ledger.worktree import AppliedStep, WorkTree

TAIL_REF = "refs/lgpatch/edit-tail"


@dataclass(frozen=True)
class Edit:
    step: str | None  # the step key being edited; None: the end of the series
    commit: str  # HEAD when the edit started
    tail: str | None  # the commit that was HEAD before `edit` moved the tree down (None: not moved)
    pending: bool = False  # STEP does not apply here: the tree is at the state *before* it, refresh replaces it


def edit_path(wt: WorkTree) -> Path:
    return WorkTree.meta_dir(wt.root) / "edit.json"


def reapply_path(wt: WorkTree) -> Path:
    return WorkTree.meta_dir(wt.root) / "reapply.json"


def edit_json(edit: Edit) -> bytes:
    return (json.dumps({"step": edit.step, "commit": edit.commit, "tail": edit.tail, "pending": edit.pending,
                        "time": time.time()}, indent=2) + "\n").encode()


def current_edit(wt: WorkTree) -> Edit | None:
    """The edit in progress, if the tree is still where `edit` put it (else the marker is stale and dropped)."""
    data = read_json(edit_path(wt))
    if data is None:
        return None
    if data.get("commit") != wt.git.head():
        edit_path(wt).unlink(missing_ok=True)
        console.note("an earlier `lgpatch edit` no longer matches the tree (it was moved since); ignoring it")
        return None
    return Edit(data.get("step"), str(data["commit"]), data.get("tail"), bool(data.get("pending")))


def tree_recipe(wt: WorkTree, search: SearchPath) -> Recipe:
    """The recipe the tree was applied from (the file recorded in the ledger, else by name)."""
    recorded = Path(wt.state.recipe_file)
    if recorded.is_file():
        return load_recipe(recorded, search)
    return find_recipe(wt.state.recipe, search)


def reapply(wt: WorkTree, recipe: Recipe) -> ApplyReport:
    opts = ApplyOptions(workdir=wt.root, params=dict(wt.state.params), strict=False)
    try:
        return apply_open(wt, recipe, opts)
    except PatchError:
        clear_rolled_back_step(wt)
        raise


def clear_rolled_back_step(wt: WorkTree) -> None:
    """A step that failed cleanly was rolled back by the engine, but its journal entry stays (engine.apply_step);
    the next command would take edits made since — the user's hand fix of that very step — for partial changes
    of a killed step and stash them. The tree is at a step boundary: the entry is stale, drop it."""
    data = read_json(wt.journal_path)
    if data and data.get("op") == "step" and data.get("head") == wt.git.head() and not wt.dirty_paths():
        wt.journal_path.unlink(missing_ok=True)


def finish_pending(wt: WorkTree, search: SearchPath) -> dict[str, Any] | None:
    """A refresh killed after writing the recipe files but before its re-apply finished: finish it now.

    Returns what the interrupted refresh recorded (step, patch_file, rescue), or None when there was none."""
    data = read_json(reapply_path(wt))
    if data is None:
        return None
    rescue = str(data.get("rescue") or "")
    console.note(f"finishing the re-apply of an interrupted refresh (your edits: {rescue})")
    if wt.dirty_paths():
        # Killed before the tree was reset: the edits in it are the ones now in the patch (and the rescue ref).
        from legacy_gpu_patch.authoring import snapshot

        now = snapshot.take(wt, "finishing an interrupted refresh")
        if not rescue or wt.git.rev(rescue) is None or wt.git.tree_of(rescue) != now.tree:
            raise DirtyTreeError(
                f"an interrupted refresh must re-apply the series, but {wt.root} has edits made since "
                f"(kept in {now.ref})",
                hint=f"`git diff {rescue or 'HEAD'} {now.ref}` shows them; commit nothing, `git stash` them, "
                "run `lgpatch apply`, then `git stash pop` and `lgpatch refresh`",
            )
        snapshot.drop(wt, now)
        with wt.journal("reset", target=wt.git.head()):
            wt.git.run("reset", "--quiet", "--hard", "HEAD")
            wt.git.run("clean", "--quiet", "-fd")
    reapply(wt, tree_recipe(wt, search))
    reapply_path(wt).unlink(missing_ok=True)
    if rescue:
        wt.git.run("update-ref", "-d", rescue, check=False)
    return data


def selected_plan(recipe: Recipe, params: dict[str, Any]) -> list[PlannedStep]:
    return [p for p in make_plan(recipe, params) if p.selected]


def match_step(name: str, plan: list[PlannedStep]) -> PlannedStep:
    """A step by key (patchset/id), by id when that is unique, or by 1-based position."""
    exact = [p for p in plan if p.step.key == name]
    by_id = [p for p in plan if p.step.id == name]
    if name.isdigit() and 1 <= int(name) <= len(plan):
        return plan[int(name) - 1]
    if exact:
        return exact[0]
    if len(by_id) == 1:
        return by_id[0]
    keys = ", ".join(p.step.key for p in plan) or "none"
    if by_id:
        raise StateError(f"step id {name!r} is ambiguous: {', '.join(p.step.key for p in by_id)}",
                         hint="name it as PATCHSET/ID")
    from legacy_gpu_patch.config.schema import did_you_mean

    raise StateError(f"no step {name!r} in this tree's plan{did_you_mean(name, [p.step.key for p in plan])}; "
                     f"its steps: {keys}")


def in_sync_prefix(applied: tuple[AppliedStep, ...], plan: list[PlannedStep]) -> int:
    keep = 0
    for have, want in zip(applied, plan):
        if have.key != want.step.key or have.digest != want.digest:
            break
        keep += 1
    return keep
