"""`lgpatch edit [STEP] [-C DIR]`: put the work tree at the state after STEP (default: the end) for editing."""

from __future__ import annotations

from pathlib import Path

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import search_path, workdir_option


@click.command("edit")
@click.argument("step", required=False)
@workdir_option()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result on stdout.")
@click.pass_context
def command(ctx: click.Context, step: str | None, workdir: Path, as_json: bool) -> None:
    """Put the tree at the state after STEP (PATCHSET/ID, ID or 1-based number; default: the end) for editing.

    Then edit files and run `lgpatch refresh`: it folds the edits into STEP (a patch step) or adds a patch step
    after it, and re-applies the steps above.
    """
    from legacy_gpu_patch.authoring.edit import start_edit
    from legacy_gpu_patch.ledger.worktree import WorkTree

    wt = WorkTree.open(workdir)
    try:
        result = start_edit(wt, search_path(ctx), step)
        where = wt.describe_head()
    finally:
        wt.release_lock()
    if as_json:
        console.emit_json({"workdir": str(wt.root), "step": result.step, "kind": result.kind, "at": where,
                           "pending": result.pending,
                           "moved_from": result.moved_from, "above": result.above, "applied_first": result.applied})
        return
    if result.applied:
        console.info(f"applied {result.applied} pending step(s) first")
    if result.above:
        console.info(f"took {len(result.above)} step(s) off the top for now: {', '.join(result.above)}")
    target = result.step or "the end of the series"
    if result.pending:
        console.info(f"{result.step} does not apply here: the tree is at the state before it ({where}); make its "
                     "change by hand, then `lgpatch refresh`" + (" --fold" if result.kind != "patch" else "")
                     + f" replaces {result.step} by your edits")
        return
    console.info(f"editing {target} in {wt.root} (at {where})")
    if result.step and result.kind == "patch":
        then = f"`lgpatch refresh` folds your edits into {result.step}"
    elif result.step:
        then = f"`lgpatch refresh` adds a patch step after {result.step} ({result.kind}; --fold replaces it)"
    else:
        then = "`lgpatch refresh` adds your edits as a new patch step"
    console.info(f"change files, then: {then}" + (" and re-applies the steps above" if result.above else ""))
