"""lgpatch revert: back to the pristine baseline, exactly (the tree hash equals the pristine one)."""

from __future__ import annotations

from pathlib import Path

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import workdir_option
from legacy_gpu_patch.ledger.engine import revert
from legacy_gpu_patch.ledger.worktree import WorkTree


@click.command("revert")
@workdir_option()
@click.option("--stash", is_flag=True, help="Keep uncommitted edits in a git stash instead of refusing.")
@click.option("--keep-commits", "keep_branch", metavar="BRANCH", default=None,
              help="Keep your own commits on top of the steps on a new branch BRANCH instead of refusing.")
@click.pass_context
def command(ctx: click.Context, workdir: Path, stash: bool, keep_branch: str | None) -> None:
    """Return the work tree to its pristine baseline."""
    wt = WorkTree.open(workdir)
    try:
        report = revert(wt, stash, keep_branch)
        tree = wt.git.tree_of("HEAD")
    finally:
        wt.release_lock()
    for n in report.notes:
        console.note(n)
    console.info(f"{wt.root}: back at the pristine baseline {wt.baseline[:12]} (tree {tree[:12]})")
