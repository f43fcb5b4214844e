"""Creating a new work tree: the pristine source in a temporary sibling folder, renamed onto the claimed workdir.

A killed creation leaves only a `.NAME.lgpatch-new-PID` folder (removed by the next apply once PID is gone) and
possibly the empty workdir it had claimed; two applies racing for the same new workdir are serialised by an flock
on that folder (see _creating).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from legacy_gpu_patch.config.recipe import Recipe
from legacy_gpu_patch.errors import StateError
from legacy_gpu_patch.gitutil import Git
from legacy_gpu_patch.ledger import locks
from legacy_gpu_patch.ledger.worktree import State, WorkTree
from legacy_gpu_patch.source import sources

if TYPE_CHECKING:
    from legacy_gpu_patch.ledger.engine import ApplyOptions


def is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def _clean_stale_tmp(workdir: Path) -> None:
    """Remove half-created trees of killed runs (their pid is gone)."""
    for candidate in workdir.parent.glob(f".{workdir.name}.lgpatch-new-*"):
        pid = candidate.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not locks.pid_alive(int(pid)):
            shutil.rmtree(candidate, ignore_errors=True)


@contextlib.contextmanager
def creating(workdir: Path) -> Iterator[bool]:
    """Claim the right to create `workdir`: an flock on the (empty) folder itself. Yields True while we hold it and
    the folder is still empty; False when someone else made the tree first (open it as an existing one).

    Two applies racing for a new workdir: the loser finds the folder locked and gets the lock error (exit 7), or
    arrives after the winner renamed its tree into place and finds that tree's own lock held, or finds it done.
    The winner keeps the claim until it holds the new tree's lock, so there is no gap between the two.
    """
    workdir.parent.mkdir(parents=True, exist_ok=True)
    made = False
    try:
        workdir.mkdir()
        made = True
    except FileExistsError:
        pass
    fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        holder = locks.take_or_name_holder(fd)
        if holder is not None:
            raise StateError(
                f"another lgpatch process ({holder}) is creating {workdir}",
                hint="wait for it to finish, then run lgpatch again (it will find the tree made)",
            )
        ours = os.fstat(fd).st_ino == workdir.stat().st_ino and is_empty_dir(workdir)
        try:
            yield ours
        except BaseException:
            if made and is_empty_dir(workdir):
                with contextlib.suppress(OSError):
                    workdir.rmdir()  # leave no empty folder where none was
            raise
    finally:
        os.close(fd)


def create_tree(recipe: Recipe, opts: ApplyOptions) -> tuple[WorkTree, sources.Prepared]:
    """Make the pristine tree in a temporary sibling folder, then rename it onto the empty, claimed workdir (atomic
    for a killed run). The caller holds the claim (creating)."""
    workdir = opts.workdir
    _clean_stale_tmp(workdir)
    tmp = workdir.parent / f".{workdir.name}.lgpatch-new-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if recipe.source_kind == "git":
            prepared = sources.prepare_git(recipe, tmp, opts.source, opts.offline, opts.submodules)
        else:
            prepared = sources.prepare_sdist(recipe, tmp, opts.offline)
        state = State(
            recipe=recipe.name,
            recipe_file=str(recipe.path.resolve()),
            params=opts.params,
            source=prepared.description,
            baseline=prepared.baseline,
            source_dir=str(prepared.source_dir) if prepared.source_dir else None,
            notes=list(prepared.notes),
        )
        WorkTree.create(tmp, state, recipe.ignore)
        # Take the new tree's own lock before it appears under its name: nobody can open it unlocked.
        wt = WorkTree(tmp, state)
        wt.acquire_lock()
        try:
            os.replace(tmp, workdir)  # onto the empty folder we hold: atomic
        except OSError as exc:
            wt.release_lock()
            raise StateError(f"{workdir} is no longer empty ({exc.strerror}); the new tree was not put there",
                             hint="something else wrote into the folder while lgpatch was creating the tree") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    wt.root = workdir.resolve()
    wt.git = Git(wt.root)
    wt.repair()
    return wt, prepared
