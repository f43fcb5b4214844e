"""The disk side of the JIT cache: how much a folder holds, whether it can be written, which filesystem it is on,
and sizes as the driver reads them and as people read them (stdlib only, like jit_cache.py)."""

from __future__ import annotations

import os
from pathlib import Path


def dir_usage(path: Path) -> tuple[int, int]:
    """(bytes, files) under `path`; (0, 0) when it does not exist."""
    total = files = 0
    if not path.is_dir():
        return 0, 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
                files += 1
            except OSError:
                pass
    return total, files


def can_write(path: Path) -> bool:
    """Writable if it exists and we may write it, or if its nearest existing parent lets us create it."""
    p = path
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK)


def filesystem_type(path: Path, mounts_file: str = "/proc/mounts") -> str | None:
    """The filesystem type holding `path` (longest mount-point prefix in /proc/mounts), e.g. 'tmpfs'."""
    try:
        lines = Path(mounts_file).read_text().splitlines()
    except OSError:
        return None
    target = str(path.resolve() if path.exists() else path)
    best, best_type = "", None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        if (target == mnt or target.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
            best, best_type = mnt, parts[2]
    return best_type


def parse_size(text: str) -> int | None:
    """'4294967296' → 4294967296; None when not an integer (the driver reads plain bytes)."""
    try:
        return int(str(text).strip())
    except ValueError:
        return None


def human(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
