"""`lgpatch refresh [-C DIR] [--into PATCHSET] [--name N] [-m MESSAGE] [--fold]`."""

from __future__ import annotations

from pathlib import Path

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import search_path, workdir_option


@click.command("refresh")
@workdir_option()
@click.option("--into", metavar="PATCHSET", help="Append the new step to this patchset (default: the recipe's own).")
@click.option("--name", metavar="N", help="The new step's id (default: from the message).")
@click.option("--message", "-m", metavar="MESSAGE",
              help="The patch's message (default: the last classified build error's summary).")
@click.option("--fold", is_flag=True, help="Fold into the declarative step being edited, replacing it by a patch step.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result on stdout.")
@click.pass_context
def command(ctx: click.Context, workdir: Path, into: str | None, name: str | None, message: str | None, fold: bool,
            as_json: bool) -> None:
    """Capture the uncommitted edits as a patch step of the recipe; leave the tree applied and clean."""
    from legacy_gpu_patch.authoring.refresh import RefreshOptions, refresh
    from legacy_gpu_patch.ledger.worktree import WorkTree

    wt = WorkTree.open(workdir)
    try:
        result = refresh(wt, search_path(ctx), RefreshOptions(into=into, name=name, message=message, fold=fold))
        where = wt.describe_head()
    finally:
        wt.release_lock()
    for note in result.notes:
        console.note(note)
    if as_json:
        console.emit_json({"workdir": str(wt.root), "mode": result.mode, "step": result.step,
                           "patch_file": str(result.patch_file), "paths": result.paths,
                           "reapplied": result.reapplied, "exact": result.exact, "at": where})
        return
    verb = {"fold": "folded into", "after": "new step", "append": "new step",
            "finished": "finished the interrupted refresh of"}[result.mode]
    click.echo(f"{verb} {result.step}: {result.patch_file} ({len(result.paths)} file(s))")
    if len(result.reapplied) > 1:
        console.info(f"re-applied {len(result.reapplied)} step(s): {', '.join(result.reapplied)}")
    console.info(f"the tree is clean at {where}")
