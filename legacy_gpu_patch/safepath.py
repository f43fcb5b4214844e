"""Refuse paths that would write outside the work tree, before anything is written.

Recipes and patches come from the internet (IBM's LMS patch is a URL). A diff header like `+++ b/../../.bashrc`,
an absolute path, a path into `.git`, or a path through a symlink that points outside the tree must never be written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from legacy_gpu_patch.errors import UnsafePathError


def check_relpath(rel: str, what: str) -> str:
    """Lexical checks; returns the normalised relative path (forward slashes)."""
    if not rel or "\0" in rel:
        raise UnsafePathError(f"{what}: empty or NUL-containing path {rel!r}")
    if rel.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", rel):
        raise UnsafePathError(f"{what}: absolute path {rel!r} refused")
    # Only "/" separates folders: on POSIX a backslash is an ordinary file-name character.
    parts = rel.split("/")
    if any(p == ".." for p in parts):
        raise UnsafePathError(f"{what}: path {rel!r} contains '..'")
    parts = [p for p in parts if p not in ("", ".")]
    if not parts:
        raise UnsafePathError(f"{what}: path {rel!r} names the tree root")
    if any(p.lower() == ".git" for p in parts):
        # The tree's own .git, or a nested repository's: hooks and config there run code.
        raise UnsafePathError(f"{what}: path {rel!r} would write into a .git folder")
    return "/".join(parts)


def resolve_inside(root: Path, rel: str, what: str) -> Path:
    """The absolute path for `rel`, refusing any symlink on the way that leads outside `root`.

    A symlink as the final component is refused too: patching it would change whatever it points to.
    """
    norm = check_relpath(rel, what)
    root_real = Path(os.path.realpath(root))
    target = root / norm
    if target.is_symlink():
        raise UnsafePathError(f"{what}: {norm!r} is a symbolic link; refusing to write through it")
    real = Path(os.path.realpath(target))
    if real != root_real and root_real not in real.parents:
        raise UnsafePathError(f"{what}: {norm!r} resolves to {real}, outside the work tree {root_real}")
    return target


def check_diff_name(name: str, what: str) -> None:
    """A name as written in a diff header, before -p stripping: stripping must not turn `/etc/x` or `../x` into a
    harmless-looking relative path."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", name):
        raise UnsafePathError(f"{what}: absolute path {name!r} refused")
    if any(part == ".." for part in name.split("/")):
        raise UnsafePathError(f"{what}: path {name!r} contains '..'")
