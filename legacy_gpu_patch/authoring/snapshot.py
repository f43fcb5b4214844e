"""The user's uncommitted edits as git objects: a tree, a commit in a rescue ref, and format-patch text.

The snapshot is taken through a private index file (GIT_INDEX_FILE), so the user's own index and work tree are not
touched; the rescue ref (refs/lgpatch/rescue/…) keeps the edits reachable whatever happens to the tree afterwards
(`git checkout <ref> -- .` brings them back; `git log refs/lgpatch/rescue` lists them).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass

from legacy_gpu_patch.errors import StateError
from legacy_gpu_patch.ledger.worktree import WorkTree

RESCUE_PREFIX = "refs/lgpatch/rescue/"


@dataclass(frozen=True)
class Snapshot:
    head: str  # the commit the edits were made on
    tree: str  # the tree of the work tree with the edits (ignored files excluded, as git status shows them)
    commit: str  # a commit of that tree on top of head
    ref: str  # the rescue ref pointing at `commit`


def take(wt: WorkTree, why: str) -> Snapshot:
    head = wt.git.head()
    if head is None:
        raise StateError(f"{wt.root}: the work tree has no commit")
    index = WorkTree.meta_dir(wt.root) / f"snapshot-index-{os.getpid()}"
    real = wt.root / ".git" / "index"
    try:
        if real.exists():
            # copy2 keeps the index file's mtime: git's racy-entry check compares file mtimes against it, and a
            # fresh mtime would make git trust the stat data of a file edited in the same second (same size).
            shutil.copy2(real, index)
        env = {"GIT_INDEX_FILE": str(index)}
        wt.git.run("add", "--all", "--", ".", env=env)
        tree = wt.git.out("write-tree", env=env)
    finally:
        index.unlink(missing_ok=True)
    message = f"lgpatch: your uncommitted edits, saved before {why}\n"
    commit = wt.git.out("commit-tree", tree, "-p", head, input=message.encode())
    ref = f"{RESCUE_PREFIX}{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.getpid()}"
    wt.git.run("update-ref", ref, commit)
    return Snapshot(head, tree, commit, ref)


def changed_paths(wt: WorkTree, base: str, tree: str) -> list[str]:
    out = wt.git.run("diff", "--no-renames", "--name-only", "-z", base, tree).stdout
    return [p.decode("utf-8", errors="surrogateescape") for p in out.split(b"\0") if p]


def binary_paths(wt: WorkTree, base: str, tree: str) -> list[str]:
    out = wt.git.out("diff", "--no-renames", "--numstat", base, tree)
    return [line.split("\t", 2)[2] for line in out.splitlines() if line.startswith("-\t-\t")]


def format_patch(wt: WorkTree, base: str, tree: str, message: str) -> bytes:
    """`git format-patch` text of the change base → tree, with `message` (subject + body)."""
    commit = wt.git.out("commit-tree", tree, "-p", base, input=message.encode("utf-8"), fixed_date=True)
    return wt.git.run("format-patch", "-1", "--stdout", "--no-signature", "--no-renames", commit,
                      fixed_date=True).stdout


def drop(wt: WorkTree, snap: Snapshot) -> None:
    wt.git.run("update-ref", "-d", snap.ref, check=False)
