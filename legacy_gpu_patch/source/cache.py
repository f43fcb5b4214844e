"""The on-disk cache: bare mirrors of git sources and a content-addressed store of downloads.

Layout under the cache root (platformdirs' user cache dir, or $LGPATCH_CACHE):
    mirrors/<host>/<path>.git     bare mirrors; work trees are cloned from these, so a second apply is offline
    downloads/sha256/<hex>        files by content hash (sdists, url-patches); written atomically, verified on read
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from legacy_gpu_patch.errors import SourceError

CACHE_ENV = "LGPATCH_CACHE"
_CHUNK = 1 << 20


def cache_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("lgpatch", appauthor=False))


def mirror_path(url: str) -> Path:
    """A stable, readable folder name for a repository URL (or local path)."""
    cleaned = re.sub(r"^[a-z+]+://", "", url.strip()).rstrip("/")
    cleaned = re.sub(r"\.git$", "", cleaned)
    cleaned = re.sub(r"[^A-Za-z0-9._/-]", "_", cleaned).replace("..", "_")
    return cache_root() / "mirrors" / f"{cleaned.strip('/')}.git"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_path(sha256: str) -> Path:
    return cache_root() / "downloads" / "sha256" / sha256


def cached_download(sha256: str) -> Path | None:
    """The cached file with this hash, re-verified (a corrupted entry is removed, not trusted)."""
    path = download_path(sha256)
    if not path.is_file():
        return None
    if sha256_file(path) != sha256:
        path.unlink()
        return None
    return path


def add_file(src: Path, expected: str | None = None) -> tuple[str, Path]:
    """Put a local file into the download store; with `expected`, refuse a file whose hash differs."""
    actual = sha256_file(src)
    if expected is not None and actual != expected:
        raise SourceError(f"{src}: sha256 is {actual}, expected {expected}; the file was not added")
    dest = download_path(actual)
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
        os.close(fd)
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)  # atomic: a killed copy never leaves a truncated entry under its hash
    return actual, dest


ProgressFn = Callable[[int, int | None], None]


def fetch_url(url: str, sha256: str, what: str, progress: ProgressFn | None = None) -> Path:
    """Return the cached file for `sha256`, downloading `url` into the store if needed (hash-checked)."""
    hit = cached_download(sha256)
    if hit is not None:
        return hit
    dest = download_path(sha256)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=".dl-")
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "lgpatch"})
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=60) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            done = 0
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        tmp.unlink(missing_ok=True)
        reason = getattr(exc, "reason", None) or exc
        raise SourceError(
            f"cannot download {what} from {url}: {reason}",
            hint=f"offline? put the file in the cache with `lgpatch cache add FILE` (expected sha256 {sha256})",
        ) from None
    actual = digest.hexdigest()
    if actual != sha256:
        tmp.unlink(missing_ok=True)
        raise SourceError(
            f"{what} from {url} has sha256 {actual}, but the recipe pins {sha256}; nothing was changed",
            hint="the upstream file changed or the download was tampered with; do not override the pin blindly",
        )
    os.replace(tmp, dest)
    return dest
