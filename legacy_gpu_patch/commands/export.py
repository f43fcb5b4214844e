"""lgpatch export DIR: the applied steps as a git format-patch series plus a quilt `series` file."""

from __future__ import annotations

from pathlib import Path

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import workdir_option
from legacy_gpu_patch.ledger.engine import export
from legacy_gpu_patch.ledger.worktree import WorkTree


@click.command("export")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@workdir_option()
@click.pass_context
def command(ctx: click.Context, dest: Path, workdir: Path) -> None:
    """Write the applied steps to DEST (git am / quilt compatible)."""
    wt = WorkTree.open(workdir, shared=True)
    try:
        names = export(wt, dest)
    finally:
        wt.release_lock()
    console.info(f"wrote {len(names)} patch(es) and a series file to {dest}")
