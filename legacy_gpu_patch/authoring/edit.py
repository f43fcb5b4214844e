"""`lgpatch edit [STEP]`: put the work tree at the state after STEP (default: the end of the series) for editing.

The steps above STEP are taken off the branch (their commit stays reachable in refs/lgpatch/edit-tail) and the edit
is recorded in .git/lgpatch/edit.json; `lgpatch refresh` folds the edits into STEP (or adds a step after it) and
re-applies the steps above on top. The tree must be clean to move; editing where the tree already is needs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from legacy_gpu_patch import console
from legacy_gpu_patch.authoring import session
from legacy_gpu_patch.authoring.txn import write_atomic
from legacy_gpu_patch.config.recipe import SearchPath
from legacy_gpu_patch.errors import DirtyTreeError, PatchError, StateError
from legacy_gpu_patch.ledger.worktree import WorkTree


@dataclass(frozen=True)
class EditResult:
    step: str | None  # key of the step being edited, None for the end
    kind: str | None
    moved_from: str | None  # the commit the tree was at before (when edit moved it down)
    above: list[str]  # the steps taken off, re-applied by refresh
    applied: int  # steps `edit` had to apply first
    pending: bool = False  # STEP does not apply: the tree is at the state before it


def start_edit(wt: WorkTree, search: SearchPath, name: str | None) -> EditResult:
    session.finish_pending(wt, search)
    recipe = session.tree_recipe(wt, search)
    plan = session.selected_plan(recipe, wt.state.params)
    ledger = wt.ledger()
    if ledger.foreign:
        raise StateError(f"{wt.root} has {len(ledger.foreign)} commit(s) on top that lgpatch did not make",
                         hint="move them to a branch first; refresh captures uncommitted edits only")
    target = session.match_step(name, plan) if name else None
    index = plan.index(target) if target else len(plan) - 1
    dirty = wt.dirty_paths()
    keep = session.in_sync_prefix(ledger.applied, plan)
    applied = 0
    if keep <= index:
        # Steps up to STEP are missing or out of date: apply the recipe first (on a clean tree only).
        if dirty:
            raise DirtyTreeError(f"the tree is not at the recipe's current series and has {len(dirty)} edited "
                                 "path(s); applying under them could lose them",
                                 hint="`lgpatch refresh` them first, or `lgpatch apply --stash`")
        try:
            applied = len(session.reapply(wt, recipe).applied)
        except PatchError as exc:
            ledger = wt.ledger()
            synced = session.in_sync_prefix(ledger.applied, plan)
            if target is not None and synced == index == len(ledger.applied):
                return _edit_pending(wt, target.step.key, target.step.kind, exc)  # STEP itself fails
            if synced <= index:
                raise  # a step before STEP fails: that one is to be edited first
            console.warn(exc.message)  # a step above STEP fails; refresh re-applies it after the edit
        ledger = wt.ledger()
    head = wt.git.head()
    assert head is not None
    step_commit = ledger.applied[index].commit if index >= 0 else wt.baseline
    above = [a.key for a in ledger.applied[index + 1:]]
    moved_from = None
    if step_commit != head:
        if dirty:
            shown = ", ".join(dirty[:5])
            raise DirtyTreeError(f"cannot move the tree to {target.step.key if target else 'the end'} with "
                                 f"uncommitted edits ({shown})",
                                 hint="`lgpatch refresh` them first (or `git stash`), then edit the other step")
        wt.git.run("update-ref", session.TAIL_REF, head)
        edit = session.Edit(target.step.key if target else None, step_commit, head)
        write_atomic(session.edit_path(wt), session.edit_json(edit))
        with wt.journal("rewind", target=step_commit):
            wt.git.run("reset", "--quiet", "--hard", step_commit)
        moved_from = head
    else:
        edit = session.Edit(target.step.key if target else None, head, None)
        write_atomic(session.edit_path(wt), session.edit_json(edit))
    return EditResult(edit.step, target.step.kind if target else None, moved_from, above, applied)


def _edit_pending(wt: WorkTree, key: str, kind: str, failure: PatchError) -> EditResult:
    """STEP itself does not apply to this tree (a new upstream version): edit the state before it, so that the
    user makes its change by hand and refresh replaces the step by their patch."""
    head = wt.git.head()
    assert head is not None
    write_atomic(session.edit_path(wt), session.edit_json(session.Edit(key, head, None, pending=True)))
    console.warn(failure.message)
    return EditResult(key, kind, None, [], 0, pending=True)
