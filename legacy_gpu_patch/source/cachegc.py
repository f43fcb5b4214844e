"""What the cache holds, how big it is, and what `lgpatch cache gc` may remove.

gc removes only what nothing needs: temporaries of killed downloads and clones (their process is gone or they
have not changed for an hour), downloads that no known recipe pins, and, with `mirrors=True`, mirrors that no
known recipe reaches: not its source, not a backport's repository, not a submodule of those at the pinned commits
(read from the mirrors themselves, all the way down). A mirror in use is never removed.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from legacy_gpu_patch.config.patchset import BackportBody, UrlPatchBody
from legacy_gpu_patch.config.recipe import Recipe
from legacy_gpu_patch.config.source_schema import GitSource, SdistSource
from legacy_gpu_patch.gitutil import Git, pid_alive
from legacy_gpu_patch.source import cache, submodules

STALE_AFTER_S = 3600.0  # a temporary download untouched this long belongs to no live process
_PID_SUFFIX = re.compile(r"\.tmp-(?:add-)?(\d+)$")


@dataclass(frozen=True)
class Entry:
    kind: str  # download | mirror | temporary
    path: Path
    size: int
    label: str


def tree_size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue  # removed while we looked
    return total


def _stale_temporary(path: Path) -> bool:
    match = _PID_SUFFIX.search(path.name)
    if match:

        return not pid_alive(int(match.group(1)))
    return time.time() - path.lstat().st_mtime > STALE_AFTER_S


def entries() -> list[Entry]:
    root = cache.cache_root()
    out: list[Entry] = []
    downloads = root / "downloads" / "sha256"
    for f in sorted(downloads.iterdir()) if downloads.is_dir() else []:
        kind = "temporary" if f.name.startswith(".") else "download"
        out.append(Entry(kind, f, tree_size(f), f.name))
    mirrors = root / "mirrors"
    for dirpath, dirnames, _files in os.walk(mirrors) if mirrors.is_dir() else []:
        for d in sorted(dirnames):
            p = Path(dirpath) / d
            if _PID_SUFFIX.search(d):
                out.append(Entry("temporary", p, tree_size(p), p.relative_to(mirrors).as_posix()))
            elif d.endswith(".git") and (p / "HEAD").exists():
                out.append(Entry("mirror", p, tree_size(p), p.relative_to(mirrors).as_posix()))
        dirnames[:] = [d for d in dirnames if not d.endswith(".git") and not _PID_SUFFIX.search(d)]
    return out


def _repos_of(recipe: Recipe) -> list[tuple[str, str | None]]:
    """(url, pinned commit or None) of every repository a recipe reaches directly."""
    repos: list[tuple[str, str | None]] = []
    git_source = recipe.source if isinstance(recipe.source, GitSource) else None
    if git_source is not None:
        repos.append((git_source.url, git_source.commit))
    for entry in recipe.entries:
        for step in [entry.step] if entry.step else list(entry.patchset.steps if entry.patchset else ()):
            if isinstance(step.body, BackportBody):
                url = step.body.repo or (git_source.url if git_source is not None else None)
                if url:
                    repos.append((url, step.body.commit))
    return repos


def mirrors_in_use(recipes: Iterable[Recipe]) -> set[Path]:
    keep: set[Path] = set()
    todo = [repo for r in recipes for repo in _repos_of(r)]
    while todo:
        url, commit = todo.pop()
        mirror = cache.mirror_path(url)
        if mirror in keep:
            continue
        keep.add(mirror)
        if commit and mirror.exists() and Git(mirror).rev(commit):
            todo += [(s.url, s.commit) for s in submodules.listed(Git(mirror), url, commit)]
    return keep


def collectable(recipes: list[Recipe], mirrors: bool) -> list[Entry]:
    pinned = {r.source.sha256 for r in recipes if isinstance(r.source, SdistSource)}
    for r in recipes:
        for entry in r.entries:
            for step in [entry.step] if entry.step else list(entry.patchset.steps if entry.patchset else ()):
                if isinstance(step.body, UrlPatchBody):
                    pinned.add(step.body.sha256)
    in_use = mirrors_in_use(recipes) if mirrors else set()

    def garbage(e: Entry) -> bool:
        if e.kind == "temporary":
            return _stale_temporary(e.path)
        if e.kind == "download":
            return e.label not in pinned
        return mirrors and e.path not in in_use

    return [e for e in entries() if garbage(e)]


def remove(entry: Entry) -> None:
    if entry.path.is_dir() and not entry.path.is_symlink():
        shutil.rmtree(entry.path, ignore_errors=True)
    else:
        entry.path.unlink(missing_ok=True)
