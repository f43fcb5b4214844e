"""Getting the pristine source into a new work tree: a pinned git commit (through a bare mirror) or an sdist.

Git sources are cloned once into a bare mirror in the cache; every work tree is then a local clone of the mirror, so
a second `apply` needs no network. The recipe's tag must resolve to its pinned commit: a tag that moved is an attack
or a mistake, and we refuse it. `--source PATH` (a local clone or mirror) replaces the URL.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legacy_gpu_patch import progress
from legacy_gpu_patch.config.recipe import Recipe
from legacy_gpu_patch.config.source_schema import GitSource, SdistSource
from legacy_gpu_patch.errors import SourceError, UnsafePathError
from legacy_gpu_patch.gitutil import Git
from legacy_gpu_patch.safepath import check_relpath, resolve_inside
from legacy_gpu_patch.source import cache, mirrors
from legacy_gpu_patch.source import submodules as sub_mirrors


@dataclass(frozen=True)
class Prepared:
    baseline: str  # the commit that is the pristine tree
    source_dir: Path | None  # where git objects came from (mirror or --source), for backports
    notes: tuple[str, ...]
    description: str  # for state.json and status


# ------------------------------------------------------------------------------------------------ git


def verify_pin(store: Git, ref: str, commit: str, what: str) -> str | None:
    """Check the tag against the pin. Returns a note when the tag is absent but the pinned commit is present."""
    tagged = store.rev(f"refs/tags/{ref}")
    if tagged is None:
        tagged = store.rev(f"refs/remotes/origin/{ref}") or store.rev(f"refs/heads/{ref}")
    if tagged is not None and tagged != commit:
        raise SourceError(
            f"{what}: {ref} resolves to {tagged}, but the recipe pins {commit}; refusing to use it",
            hint="a moved tag is an attack or a mistake: check upstream, then update the recipe's pin deliberately",
        )
    if store.rev(commit) is None:
        raise SourceError(f"{what}: the pinned commit {commit} is not in {store.root}")
    if tagged is None:
        return f"{what} has no ref {ref!r}; using the pinned commit {commit[:12]} directly"
    return None


def remote_ref(url: str, ref: str, cwd: Path) -> tuple[str | None, str | None]:
    """(commit the remote's tag or branch `ref` points at, None) — or (None, why it could not be asked)."""
    wanted = [f"refs/tags/{ref}", f"refs/tags/{ref}^{{}}", f"refs/heads/{ref}"]
    proc = Git(cwd).run("ls-remote", "--", url, *wanted, check=False)
    if proc.returncode != 0:
        said = proc.stderr.decode(errors="replace").strip().splitlines()
        return None, said[-1] if said else f"git ls-remote exit {proc.returncode}"
    found = {name: sha for sha, _, name in (line.partition("\t") for line in proc.stdout.decode().splitlines())}
    for name in wanted[1], wanted[0], wanted[2]:  # an annotated tag's commit is the peeled ^{} entry
        if name in found:
            return found[name], None
    return None, None


def recheck_warm_ref(url: str, ref: str, commit: str, mirror: Path, offline: bool) -> str | None:
    """A warm mirror answers from its own old copy of the tag: ask upstream again, so that a tag moved since the
    mirror was made is refused as it is on a cold clone. Returns a note when it could not be re-checked."""
    if offline:
        return (f"{url} {ref}: offline, so the tag was not re-checked upstream "
                "(the cached mirror's copy matches the pin)")
    upstream, problem = remote_ref(url, ref, mirror)
    if problem:
        return f"{url} {ref}: the tag could not be re-checked upstream ({problem}); the cached mirror's copy matches"
    if upstream is not None and upstream != commit:
        raise SourceError(
            f"{url}: {ref} now resolves to {upstream} upstream, but the recipe pins {commit}; refusing to use it",
            hint="a moved tag is an attack or a mistake: check upstream, then update the recipe's pin deliberately",
        )
    return None


def object_store_with(url: str, ref: str, commit: str, local: Path | None, offline: bool,
                      notes: list[str] | None = None) -> Path:
    """A local git object store that holds `commit` (the pin of `ref` of `url`), fetching into the mirror if needed."""
    if local is not None and Git(local).rev(commit):
        verify_pin(Git(local), ref, commit, str(local))
        return local
    warm = mirrors.has_commit(url, commit)
    # the tag first: a mirror should know the ref the recipe names, so verify_pin can check it against the pin
    mirror = mirrors.mirror_holding(url, commit, offline, f"{url} {ref}", [f"+refs/tags/{ref}:refs/tags/{ref}"])
    verify_pin(Git(mirror), ref, commit, url)
    note = recheck_warm_ref(url, ref, commit, mirror, offline) if warm else None
    if note and notes is not None:
        notes.append(note)
    return mirror


def prepare_git(recipe: Recipe, dest: Path, source_override: Path | None, offline: bool,
                submodules: bool | None) -> Prepared:
    src = recipe.source
    assert isinstance(src, GitSource)
    notes: list[str] = []
    if source_override is not None:
        store = source_override.resolve()
        if not (store / "HEAD").exists() and not (store / ".git").exists():
            raise SourceError(f"--source {source_override}: not a git repository or mirror")
        note = verify_pin(Git(store), src.ref, src.commit, f"--source {source_override}")
        if note:
            notes.append(note)
    else:
        store = object_store_with(src.url, src.ref, src.commit, None, offline, notes)
    with progress.bar("creating work tree", unit="items"):
        Git(dest.parent).run("clone", "--quiet", "--local", "--no-checkout", str(store), str(dest))
        tree = Git(dest)
        if tree.rev(src.commit) is None:  # an unreachable pin in a --source clone: fetch it explicitly
            tree.run("fetch", "--quiet", str(store), src.commit)
        tree.run("checkout", "--quiet", "-B", "lgpatch", src.commit)
    wanted: bool | list[str] = list(src.submodules) if isinstance(src.submodules, tuple) else src.submodules
    if submodules is not None:  # --submodules means the recipe's list, or all when it has none
        wanted = (wanted if isinstance(wanted, list) else True) if submodules else False
    if wanted:
        done = sub_mirrors.update(dest, wanted, src.url, offline)
        if done:
            notes.append(f"{len(done)} submodules checked out from the mirror cache")
    return Prepared(src.commit, store, tuple(notes), f"git {src.url} {src.ref} @ {src.commit}")


# ------------------------------------------------------------------------------------------------ sdist


def index_page(index: str, name: str) -> str:
    """A project's page on a package index (the name normalised as PEP 503 says)."""
    return f"{index.rstrip('/')}/{re.sub(r'[-_.]+', '-', name).lower()}/"


def index_files(page: str, hint: str | None = None) -> list[dict[str, Any]]:
    """The files a project page lists, through the index's JSON simple API (PEP 691)."""
    request = urllib.request.Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json",
                                                    "User-Agent": "lgpatch"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            data = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SourceError(f"cannot query {page}: {getattr(exc, 'reason', exc)}", hint=hint) from None
    return list(data.get("files", []))


def _index_url(src: SdistSource) -> str:
    """Find the sdist's URL through the package index, matched by sha256."""
    page = index_page(src.index, src.name or "")
    hint = f"offline? put {src.name}-{src.version}.tar.gz in the cache with `lgpatch cache add FILE`"
    for entry in index_files(page, hint):
        if entry.get("hashes", {}).get("sha256") == src.sha256:
            return urllib.parse.urljoin(page, entry["url"])
    raise SourceError(
        f"{page} lists no file with sha256 {src.sha256} for {src.name}=={src.version}",
        hint="the pin does not match what the index serves; check the recipe",
    )


def _members_tar(archive: tarfile.TarFile) -> list[tuple[str, tarfile.TarInfo]]:
    out = []
    for member in archive.getmembers():
        if member.isdev() or member.isfifo():
            continue
        name = member.name
        if member.issym() or member.islnk():
            link = member.linkname
            if link.startswith("/") or ".." in link.replace("\\", "/").split("/"):
                raise UnsafePathError(f"sdist member {name!r} links to {link!r}, outside the tree")
        out.append((name, member))
    return out


def _unpack(archive_path: Path, dest: Path) -> None:
    """Unpack safely, dropping the single top-level folder (name-version/) sdists have."""
    dest.mkdir(parents=True)
    if zipfile.is_zipfile(archive_path):
        with zipfile.ZipFile(archive_path) as zf:
            names = [n for n in zf.namelist() if not n.endswith("/")]
            top = _common_top(names)
            for name in names:
                out = resolve_inside(dest, name[len(top):], f"sdist member {name!r}")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(zf.read(name))
        return
    with tarfile.open(archive_path) as tf:
        members = _members_tar(tf)
        top = _common_top([n for n, m in members if not m.isdir()])
        for name, member in members:
            if member.isdir():
                continue
            # Through every link unpacked so far: a member `gitlink -> .git` must not carry `gitlink/hooks/…` into
            # the .git that `git init` makes next.
            out = resolve_inside(dest, name[len(top):], f"sdist member {name!r}")
            out.parent.mkdir(parents=True, exist_ok=True)
            if member.issym():
                os.symlink(member.linkname, out)
                continue
            if member.islnk():
                target = check_relpath(member.linkname[len(top):], f"sdist link {name!r}")
                shutil.copyfile(dest / target, out)
                continue
            extracted = tf.extractfile(member)
            if extracted is None:
                continue
            with open(out, "wb") as f:
                shutil.copyfileobj(extracted, f)
            if member.mode & 0o111:
                os.chmod(out, 0o755)


def _common_top(names: list[str]) -> str:
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) == 1 and all("/" in n for n in names):
        return next(iter(tops)) + "/"
    return ""


def sdist_file(recipe: Recipe, offline: bool) -> Path:
    src = recipe.source
    assert isinstance(src, SdistSource)
    hit = cache.cached_download(src.sha256)
    if hit is not None:
        return hit
    if offline:
        raise SourceError(
            f"the sdist (sha256 {src.sha256}) is not in the cache and --offline was given",
            hint="`lgpatch cache add FILE` puts a downloaded sdist into the cache",
        )
    url = src.url or _index_url(src)
    with progress.bar(f"downloading {url.rsplit('/', 1)[-1]}") as bar:
        return cache.fetch_url(url, src.sha256, f"sdist of {recipe.name}", progress=bar.update)


def prepare_sdist(recipe: Recipe, dest: Path, offline: bool) -> Prepared:
    archive = sdist_file(recipe, offline)
    with progress.bar("unpacking", unit="items"):
        try:
            _unpack(archive, dest)
        except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
            raise SourceError(f"cannot unpack {archive}: {exc}") from None
    tree = Git(dest)
    tree.run("init", "--quiet", "-b", "lgpatch")
    src = recipe.source
    assert isinstance(src, SdistSource)
    label = src.label
    baseline = tree.commit_all(
        f"lgpatch: pristine {label}\n\nLgpatch-Baseline: sdist sha256:{src.sha256}\n"
    )
    return Prepared(baseline, None, (), f"sdist {label} sha256:{src.sha256}")
