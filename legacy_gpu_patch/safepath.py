"""Refuse paths that would write outside the work tree, before anything is written.

Recipes and patches come from the internet (IBM's LMS patch is a URL). A diff header like `+++ b/../../.bashrc`,
an absolute path, a path into `.git`, or a path through a symlink that points outside the tree or into `.git` (a
committed `gitlink -> .git`) must never be written.
"""

from __future__ import annotations

import os
import re
import stat
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


def _refuse_unless_regular(root_real: Path, real: Path, norm: str, what: str, root_ok: bool = False) -> None:
    """`real` must lie under the tree and outside every `.git` folder (the tree's own, or a nested repository's)."""
    try:
        parts = real.relative_to(root_real).parts
    except ValueError:
        raise UnsafePathError(f"{what}: {norm!r} resolves to {real}, outside the work tree {root_real}") from None
    if not parts and not root_ok:
        raise UnsafePathError(f"{what}: {norm!r} resolves to the tree root itself")
    if any(p.lower() == ".git" for p in parts):
        raise UnsafePathError(
            f"{what}: {norm!r} resolves to {real}, inside a .git folder (through a symbolic link in the tree)"
        )


def real_location(root: Path, rel: str) -> Path:
    """Where writing `root/rel` would land: its parent folders resolved through every symlink (existing ones; the
    missing rest taken as written), the last component as it is."""
    target = Path(root) / rel
    return Path(os.path.realpath(target.parent)) / target.name


def resolve_inside(root: Path, rel: str, what: str) -> Path:
    """The absolute path for `rel`, refused unless writing it would write a regular path of this tree.

    Every parent folder is resolved through symlinks (a committed `gitlink -> .git`, `up -> ..`, chains of links,
    links made by an earlier step): the real location must be under the tree and outside any `.git` folder. A
    symlink as the final component is refused too (writing it would change whatever it points to), and so is an
    existing path that is neither a regular file nor a folder (a FIFO or device).
    """
    norm = check_relpath(rel, what)
    root_real = Path(os.path.realpath(root))
    target = Path(root) / norm
    if target.is_symlink():
        raise UnsafePathError(f"{what}: {norm!r} is a symbolic link; refusing to write through it")
    _refuse_unless_regular(root_real, real_location(root, norm), norm, what)
    try:
        mode = target.lstat().st_mode
    except FileNotFoundError:
        return target
    except NotADirectoryError:
        raise UnsafePathError(f"{what}: {norm!r}: a parent of it is a file, not a folder") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UnsafePathError(f"{what}: {norm!r} is not a regular file (a FIFO, socket or device)")
    return target


def check_link_target(root: Path, rel: str, link_text: str, what: str) -> None:
    """A symlink `rel -> link_text` that a patch creates must point at a regular path of this tree: not absolute,
    not out of the tree (`..` past the root, through links or not) and not into `.git`."""
    norm = check_relpath(rel, what)
    if not link_text or "\0" in link_text or link_text.startswith("/"):
        raise UnsafePathError(f"{what}: symbolic link {norm!r} -> {link_text!r}: an absolute or empty target")
    root_real = Path(os.path.realpath(root))
    parent_real = Path(os.path.realpath((Path(root) / norm).parent))
    # realpath follows the links that exist and takes the rest (also '..') as written: a dangling link is checked
    # where it would point, so a later link cannot complete a route into .git without being checked itself.
    real = Path(os.path.realpath(parent_real / link_text))
    _refuse_unless_regular(root_real, real, f"{norm} -> {link_text}", what, root_ok=True)


def check_diff_name(name: str, what: str) -> None:
    """A name as written in a diff header, before -p stripping: stripping must not turn `/etc/x` or `../x` into a
    harmless-looking relative path."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", name):
        raise UnsafePathError(f"{what}: absolute path {name!r} refused")
    if any(part == ".." for part in name.split("/")):
        raise UnsafePathError(f"{what}: path {name!r} contains '..'")


def real_relpath(root: Path, rel: str) -> str:
    """`rel` as git must stage it: relative to the tree, with the links among its parent folders resolved (git
    refuses a path 'beyond a symbolic link'). Call after resolve_inside accepted `rel`."""
    root_real = Path(os.path.realpath(root))
    return real_location(root, rel).relative_to(root_real).as_posix()
