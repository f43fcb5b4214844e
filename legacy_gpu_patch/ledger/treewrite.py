"""The one place a step writes to the work tree: every write, delete and new link goes through here.

Each function re-checks its path with safepath.resolve_inside at the moment of writing, after the step has checked
all its paths up front (so a refusal normally comes before anything is written). The second check catches what the
first could not see: a link that an earlier change of the same step created on the way to a later path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from legacy_gpu_patch.safepath import check_link_target, real_relpath, resolve_inside

SYMLINK_MODE = 0o120000


@dataclass
class FileChange:
    path: str
    new_bytes: bytes | None  # None: delete; for a symlink (mode SYMLINK_MODE) the link's target
    mode: int | None = None  # 0o755 / 0o644 when the diff says so, SYMLINK_MODE for a new link
    rename_from: str | None = None


def write_file(root: Path, rel: str, data: bytes, mode: int | None = None, what: str = "write") -> str:
    """Write `root/rel` atomically (via a temporary sibling and rename), keeping the old file's mode by default.
    Returns the path git stages (links in the parent folders resolved)."""
    target = resolve_inside(root, rel, what)
    target.parent.mkdir(parents=True, exist_ok=True)
    target = resolve_inside(root, rel, what)  # mkdir went through the checked parents; nothing new on the way
    tmp = target.with_name(f".{target.name}.lgpatch-tmp")
    old_mode = target.stat().st_mode & 0o777 if target.exists() else None
    with open(tmp, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(tmp, mode)
    elif old_mode is not None:
        os.chmod(tmp, old_mode)
    os.replace(tmp, target)
    return real_relpath(root, rel)


def delete_file(root: Path, rel: str, what: str = "delete") -> str:
    target = resolve_inside(root, rel, what)
    staged = real_relpath(root, rel)
    if target.exists():
        target.unlink()
    return staged


def make_link(root: Path, rel: str, link_text: str, what: str = "link") -> str:
    """Create the symlink `root/rel -> link_text`; refused when it would point out of the tree or into .git."""
    check_link_target(root, rel, link_text, what)
    target = resolve_inside(root, rel, what)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.lgpatch-tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(link_text, tmp)
    os.replace(tmp, target)
    return real_relpath(root, rel)


def write_changes(root: Path, changes: list[FileChange]) -> list[str]:
    """Write computed changes in order; return the paths touched."""
    touched = []
    for change in changes:
        if change.new_bytes is None:
            touched.append(delete_file(root, change.path))
        elif change.mode == SYMLINK_MODE:
            touched.append(make_link(root, change.path, change.new_bytes.decode("utf-8", errors="surrogateescape")))
        else:
            touched.append(write_file(root, change.path, change.new_bytes, change.mode))
    return touched
