"""Submodules through the mirror cache, so a build machine without network can still check them out.

`git submodule update` would fetch every submodule from the URL in .gitmodules (GitHub, for PyTorch), which an
offline cluster node cannot reach, and it fetches all ~30 of PyTorch's when a CUDA build needs about ten. Here each
submodule is resolved to a bare mirror in lgpatch's cache (cache.mirror_path of its URL, the same place the
superproject's mirror lives), cloned or fetched there when online, or put there beforehand with
`lgpatch cache add-mirror URL CLONE` (a clone made on a machine with network). The submodule's URL in the work
tree's .git/config is then pointed at that mirror, and git itself does the checkout, so the result is an ordinary
submodule that `git submodule status` understands.

A recipe says `submodules: true` (all, recursively) or lists the paths its build needs (those only, not recursive).
"""

from __future__ import annotations

import posixpath
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from legacy_gpu_patch import progress
from legacy_gpu_patch.errors import SourceError
from legacy_gpu_patch.gitutil import Git
from legacy_gpu_patch.source import mirrors

# git >= 2.38.1 refuses file:// submodules unless told otherwise; our mirrors are local paths by design.
_FILE_OK = ("-c", "protocol.file.allow=always")


@dataclass(frozen=True)
class Submodule:
    name: str
    path: str
    url: str  # absolute: relative .gitmodules URLs are resolved against the superproject's URL
    commit: str  # the gitlink in the superproject's commit: the pin


def resolve_url(url: str, parent_url: str) -> str:
    """.gitmodules may say `../cpuinfo.git`, relative to the superproject's own URL (git's rule)."""
    if not url.startswith(("./", "../")):
        return url
    parsed = urllib.parse.urlsplit(parent_url)
    base = parsed.path if parsed.scheme else parent_url
    joined = posixpath.normpath(posixpath.join(base.rstrip("/"), url))
    return urllib.parse.urlunsplit(parsed._replace(path=joined)) if parsed.scheme else joined


def listed(tree: Git, parent_url: str, commit: str = "HEAD") -> list[Submodule]:
    """The submodules of `commit`: names and URLs from its .gitmodules, pins from its gitlinks."""
    proc = tree.run("config", "--blob", f"{commit}:.gitmodules", "--null", "--get-regexp",
                    r"^submodule\..*\.(path|url)$", check=False)
    if proc.returncode != 0:
        return []  # no .gitmodules in that commit
    fields: dict[str, dict[str, str]] = {}
    for entry in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if not entry:
            continue
        key, _, value = entry.partition("\n")
        name, _, attr = key[len("submodule."):].rpartition(".")
        fields.setdefault(name, {})[attr] = value.strip()
    links = {}
    raw = tree.run("ls-tree", "-r", "-z", commit).stdout.decode("utf-8", "surrogateescape")
    for entry in raw.split("\0"):
        meta, _, path = entry.partition("\t")
        if meta.startswith("160000 commit "):
            links[path] = meta.split()[2]
    out = []
    for name, attrs in fields.items():
        path = attrs.get("path", "")
        if path in links and attrs.get("url"):
            out.append(Submodule(name, path, resolve_url(attrs["url"], parent_url), links[path]))
    return sorted(out, key=lambda s: s.path)


def select(available: list[Submodule], wanted: bool | list[str], where: str) -> list[Submodule]:
    if wanted is True:
        return available
    if not wanted:
        return []
    by_path = {s.path: s for s in available}
    unknown = [p for p in wanted if p.rstrip("/") not in by_path]
    if unknown:
        raise SourceError(
            f"{where}: no submodule at {', '.join(unknown)}",
            hint="the recipe's submodules list names paths from .gitmodules; known: "
            + ", ".join(sorted(by_path)[:12]) + ("…" if len(by_path) > 12 else ""),
        )
    return [by_path[p.rstrip("/")] for p in wanted]


def mirror_with(sub: Submodule, offline: bool) -> Path:
    """The cache mirror of the submodule's URL, holding its pinned commit (cloned or fetched when online)."""
    try:
        mirror = mirrors.mirror_holding(sub.url, sub.commit, offline, f"submodule {sub.path}")
    except SourceError as exc:
        raise missing_submodule(sub, offline, exc) from None
    _pin_ref(Git(mirror), sub.commit)
    return mirror


def missing_submodule(sub: Submodule, offline: bool, cause: SourceError) -> SourceError:
    """What to do when a submodule is neither in the cache nor reachable. `--source` replaces the superproject
    only, so the clone/fetch error's own hint ("pass --source PATH") would not help here."""
    why = "--offline was given" if offline else f"it could not be cloned or updated ({cause.message[-300:]})"
    return SourceError(
        f"submodule {sub.path} ({sub.url} at commit {sub.commit}) is not in the cache and {why}",
        hint=f"clone {sub.url} on a machine with network and run `lgpatch cache add-mirror {sub.url} CLONE` "
        "here, or re-run with --no-submodules (the tree then has no submodules; a build that needs them fails)",
    )


def _pin_ref(store: Git, commit: str) -> None:
    """A tag on the pin: `git submodule update` clones branches and tags only, and a commit that nothing there
    reaches (a shallow mirror, a pin on a deleted branch) would otherwise not come along."""
    store.run("update-ref", mirrors.pin_ref(commit), commit)


def update(tree_dir: Path, wanted: bool | list[str], parent_url: str, offline: bool) -> list[str]:
    """Check out the wanted submodules of the work tree from cache mirrors; returns their paths."""
    tree = Git(tree_dir)
    chosen = select(listed(tree, parent_url), wanted, f"{parent_url} submodules")
    done = []
    for sub in chosen:
        with progress.bar(f"submodule {sub.path}", unit="items"):
            mirror = mirror_with(sub, offline)
            tree.run("submodule", "init", "--", sub.path)
            tree.run("config", f"submodule.{sub.name}.url", str(mirror))
            proc = tree.run(*_FILE_OK, "submodule", "update", "--no-recommend-shallow", "--", sub.path, check=False)
            if proc.returncode != 0:
                raise SourceError(
                    f"submodule {sub.path}: checkout of {sub.commit[:12]} from {mirror} failed: "
                    + proc.stderr.decode(errors="replace").strip()[-400:]
                )
        done.append(sub.path)
        if wanted is True:  # all means all the way down, like `git submodule update --recursive`
            done += [f"{sub.path}/{p}" for p in update(tree_dir / sub.path, True, sub.url, offline)]
    return done
