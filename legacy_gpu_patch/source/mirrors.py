"""The cache's bare git mirrors: one per repository URL, shared by sources, backports and submodules.

A mirror is cloned once (online) or seeded from any local clone with `lgpatch cache add-mirror URL CLONE` (offline
machines); later work trees are local clones of it, so only the first `apply` talks to the remote.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, cast

from legacy_gpu_patch import progress
from legacy_gpu_patch.errors import SourceError
from legacy_gpu_patch.gitutil import Git
from legacy_gpu_patch.source import cache


def clone_mirror(url: str, dest: Path) -> None:
    """Create a bare mirror with GitPython, showing clone progress (the one place we talk to the remote)."""
    import git

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    with progress.bar(f"cloning {url}", unit="items") as bar:

        class _Progress(git.RemoteProgress):
            def update(self, op_code: int, cur_count: Any, max_count: Any = None, message: str = "") -> None:
                bar.update(float(cur_count or 0), float(max_count) if max_count else None)

        try:
            # GitPython takes a RemoteProgress here (its annotation names only the callable form)
            git.Repo.clone_from(url, tmp, mirror=True, progress=cast(Any, _Progress()),
                                env={"GIT_TERMINAL_PROMPT": "0"})
        except git.GitCommandError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SourceError(
                f"cannot clone {url}: {str(exc.stderr).strip() or exc}",
                hint="offline? pass --source PATH with a local clone or mirror of this repository",
            ) from None
    try:
        os.replace(tmp, dest)  # a killed clone never leaves a half mirror under the real name
    except OSError:
        # Another lgpatch cloned the same URL at the same time and won: use its mirror, drop ours.
        shutil.rmtree(tmp, ignore_errors=True)
        if not (dest / "HEAD").exists():
            raise


def fetch_into(store: Path, url: str, refspecs: list[str]) -> None:
    import git

    with progress.bar(f"fetching {url}", unit="items"):
        try:
            git.Repo(store).git.fetch(url, *refspecs, env={"GIT_TERMINAL_PROMPT": "0"})
        except git.GitCommandError as exc:
            raise SourceError(
                f"cannot fetch {' '.join(refspecs)} from {url}: {str(exc.stderr).strip() or exc}",
                hint="offline? pass --source PATH with a local clone that has this ref",
            ) from None


def pin_ref(commit: str) -> str:
    """A tag on a pinned commit, so that clones of the mirror (which take branches and tags) bring it along."""
    return f"refs/tags/lgpatch/pin-{commit}"


def has_commit(url: str, commit: str) -> bool:
    """Whether the cache's mirror of `url` exists and already holds `commit` (a warm mirror: no fetch needed)."""
    mirror = cache.mirror_path(url)
    return mirror.exists() and Git(mirror).rev(commit) is not None


def mirror_holding(url: str, commit: str, offline: bool, what: str, first: list[str] | None = None) -> Path:
    """The cache mirror of `url`, holding `commit`: cloned when missing, then fetched (the `first` refspecs, then the
    commit itself) when the commit is not there yet. Offline, a missing commit is an error that says how to seed."""
    mirror = cache.mirror_path(url)
    store = Git(mirror)
    if mirror.exists() and store.rev(commit):
        return mirror
    if offline:
        raise SourceError(
            f"{what}: commit {commit[:12]} of {url} is not in the cache and --offline was given",
            hint=f"on a machine with network, clone it and run `lgpatch cache add-mirror {url} CLONE` here",
        )
    if not mirror.exists():
        clone_mirror(url, mirror)
    for refspecs in ([first] if first else []) + [[commit]]:
        if store.rev(commit) is None:
            fetch_into(mirror, url, refspecs)
    if store.rev(commit) is None:
        raise SourceError(f"{what}: {url} has no commit {commit}")
    return mirror


def add_mirror(url: str, clone: Path) -> Path:
    """Make `clone` (any local clone, bare or not, shallow or not) the cache's mirror of `url`."""
    src = Git(clone)
    if src.run("rev-parse", "--git-dir", check=False).returncode != 0:
        raise SourceError(f"{clone}: not a git repository")
    mirror = cache.mirror_path(url)
    if mirror.exists():
        _fetch_all(Git(mirror), clone)
        return mirror
    mirror.parent.mkdir(parents=True, exist_ok=True)
    tmp = mirror.with_name(mirror.name + f".tmp-add-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        Git(mirror.parent).run("init", "--quiet", "--bare", str(tmp))
        _fetch_all(Git(tmp), clone)
        if not Git(tmp).out("for-each-ref", "--count=1"):
            raise SourceError(
                f"{clone}: no branch, tag or HEAD commit to copy; nothing was added",
                hint="a shallow fetch of a bare commit leaves no ref: `git update-ref refs/heads/pinned COMMIT` first",
            )
        tmp.rename(mirror)  # a killed add never leaves a half mirror under the real name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return mirror


def _fetch_all(store: Git, clone: Path) -> None:
    # Every commit of the clone must come along, also one only HEAD reaches (a detached submodule checkout).
    source = str(Path(clone).resolve())
    head = Git(clone).rev("HEAD")
    # --update-shallow: a shallow clone (only the pins, as carried to an offline node) is a valid source
    proc = store.run("fetch", "--quiet", "--update-shallow", source, "+refs/heads/*:refs/heads/*",
                     "+refs/tags/*:refs/tags/*", check=False)
    if proc.returncode != 0:
        raise SourceError(f"cannot copy {clone} into the cache: {proc.stderr.decode(errors='replace').strip()}")
    if head and store.rev(head) is None:
        store.run("fetch", "--quiet", "--update-shallow", source, f"+{head}:{pin_ref(head)}")
