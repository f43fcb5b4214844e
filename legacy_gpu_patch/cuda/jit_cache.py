"""The CUDA driver's PTX JIT cache: what it is set to, what makes it work, and warming it.

When a program loads PTX (no cubin for the GPU, seed 2's fix), the driver JIT-compiles it and stores the result in
an on-disk cache, so the next process skips the compile. The cache is controlled by environment variables
(CUDA C++ Programming Guide, appendix "CUDA Environment Variables",
https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html):

    CUDA_CACHE_DISABLE=1     no cache: every process compiles all PTX again
    CUDA_CACHE_PATH=DIR      where it lives; default ~/.nv/ComputeCache on Linux
    CUDA_CACHE_MAXSIZE=N     its size in bytes; the guide gives a default of 1 GiB on desktop/server platforms
                             (256 MiB on embedded ones, and 256 MiB in the CUDA 8–10 era guides) and a maximum of
                             4 GiB (4294967296). "Binary codes whose size exceeds the cache size are not cached";
                             older entries are evicted to make room.
    CUDA_FORCE_PTX_JIT=1     ignore embedded cubins, JIT everything (a debugging switch)
    CUDA_DISABLE_PTX_JIT=1   never JIT (PTX-only code then fails to load)

Measured on an H200 (issue 4): a 13.9 MB PTX module costs ~33 s to load when the cache is disabled or too small
(CUDA_CACHE_MAXSIZE=1000000: 31–34 s on *every* start) and 0.11 s once the cache holds it. Seed 2's 30–60 s cuDNN
start is that: cuDNN for CUDA 8 has no Turing SASS, its PTX is large, and the cache was too small for the result
(or not persistent, e.g. a container's home directory). The cure is the settings `recommended_env` returns.

Stdlib only: the GPU proof script (bench/gpu/ptx_start.py) imports this module on a machine without lgpatch's
dependencies installed.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.cuda.jit_disk import can_write, dir_usage, filesystem_type, human, parse_size

# Re-exported: `jit_cache as jc` is the one import of callers (the disk helpers live in jit_disk.py).
__all__ = ["CacheStatus", "WarmResult", "apply_settings", "can_write", "default_path", "dir_usage", "filesystem_type",
           "human", "lgpatch_fallback_path", "parse_size", "recommended_env", "recommended_path", "render_env",
           "status", "warm"]

MAX_BYTES = 4 * 1024**3  # the driver's maximum CUDA_CACHE_MAXSIZE
DEFAULT_BYTES = 1024**3  # the guide's default on desktop/server platforms (driver-dependent; 256 MiB older/embedded)
OLD_DEFAULT_BYTES = 256 * 1024**2
SMALL_BYTES = 256 * 1024**2  # below this, large libraries' JIT output (cuDNN, cuBLAS PTX) does not fit
DEFAULT_SUBPATH = (".nv", "ComputeCache")
VARS = ("CUDA_CACHE_DISABLE", "CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE", "CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT")
_TRUE = {"1", "true", "yes", "on"}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def default_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home).joinpath(*DEFAULT_SUBPATH)


def lgpatch_fallback_path(env: Mapping[str, str] | None = None) -> Path:
    """A persistent per-user location when ~/.nv is not writable: $XDG_CACHE_HOME/lgpatch/cuda-jit-cache."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "lgpatch" / "cuda-jit-cache"


@dataclass(frozen=True)
class CacheStatus:
    path: str
    path_source: str  # "CUDA_CACHE_PATH" | "default"
    exists: bool
    writable: bool
    used_bytes: int
    files: int
    maxsize_bytes: int | None  # from CUDA_CACHE_MAXSIZE; None = the driver's default
    maxsize_source: str  # "CUDA_CACHE_MAXSIZE" | "driver default"
    disabled: bool
    force_ptx_jit: bool
    disable_ptx_jit: bool
    filesystem: str | None
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "path_source": self.path_source,
            "exists": self.exists,
            "writable": self.writable,
            "used_bytes": self.used_bytes,
            "files": self.files,
            "maxsize_bytes": self.maxsize_bytes,
            "maxsize_source": self.maxsize_source,
            "driver_default_bytes": DEFAULT_BYTES,
            "driver_max_bytes": MAX_BYTES,
            "disabled": self.disabled,
            "force_ptx_jit": self.force_ptx_jit,
            "disable_ptx_jit": self.disable_ptx_jit,
            "filesystem": self.filesystem,
            "problems": list(self.problems),
            "ok": self.ok,
        }


def status(env: Mapping[str, str] | None = None) -> CacheStatus:
    """The JIT cache as the driver would see it under `env` (default: this process's environment)."""
    env = os.environ if env is None else env
    if env.get("CUDA_CACHE_PATH"):
        path, path_source = Path(env["CUDA_CACHE_PATH"]).expanduser(), "CUDA_CACHE_PATH"
    else:
        path, path_source = default_path(env), "default"
    raw_max = env.get("CUDA_CACHE_MAXSIZE")
    maxsize = parse_size(raw_max) if raw_max else None
    used, files = dir_usage(path)
    writable = can_write(path)
    fs = filesystem_type(path)
    disabled = _truthy(env.get("CUDA_CACHE_DISABLE"))
    force = _truthy(env.get("CUDA_FORCE_PTX_JIT"))
    no_jit = _truthy(env.get("CUDA_DISABLE_PTX_JIT"))

    problems: list[str] = []
    if disabled:
        problems.append("CUDA_CACHE_DISABLE is set: every process JIT-compiles all of its PTX again")
    if raw_max and maxsize is None:
        problems.append(f"CUDA_CACHE_MAXSIZE={raw_max!r} is not a number of bytes; the driver ignores it")
    elif maxsize is not None and maxsize < SMALL_BYTES:
        problems.append(
            f"CUDA_CACHE_MAXSIZE={maxsize} ({human(maxsize)}) is too small: a module whose JIT output exceeds it "
            "is not cached and is compiled again on every start"
        )
    elif maxsize is not None and maxsize > MAX_BYTES:
        problems.append(f"CUDA_CACHE_MAXSIZE={maxsize} is above the driver's maximum of {MAX_BYTES} (4 GiB)")
    if not writable:
        problems.append(f"{path} cannot be written: nothing the JIT compiles is kept for the next start")
    if fs in ("tmpfs", "ramfs"):
        problems.append(f"{path} is on {fs}: the cache is lost at every reboot (or container restart)")
    if force:
        problems.append("CUDA_FORCE_PTX_JIT is set: embedded cubins are ignored and everything is JIT-compiled "
                        "(a debugging switch; unset it)")
    if no_jit:
        problems.append("CUDA_DISABLE_PTX_JIT is set: PTX-only code (lgpatch's PTX plans) cannot load")
    limit = maxsize if maxsize is not None else DEFAULT_BYTES
    if used and limit and used > 0.9 * limit:
        problems.append(f"the cache is {human(used)} of {human(limit)}: older entries are being evicted")
    return CacheStatus(str(path), path_source, path.exists(), writable, used, files, maxsize,
                       "CUDA_CACHE_MAXSIZE" if raw_max else "driver default", disabled, force, no_jit, fs,
                       tuple(problems))


def recommended_path(env: Mapping[str, str] | None = None) -> Path:
    """Keep the user's CUDA_CACHE_PATH or the driver default when usable and persistent; else a per-user dir."""
    env = os.environ if env is None else env
    candidates = []
    if env.get("CUDA_CACHE_PATH"):
        candidates.append(Path(env["CUDA_CACHE_PATH"]).expanduser())
    candidates += [default_path(env), lgpatch_fallback_path(env)]
    for c in candidates:
        if can_write(c) and filesystem_type(c) not in ("tmpfs", "ramfs"):
            return c
    for c in candidates:
        if can_write(c):
            return c
    return candidates[0]


def recommended_env(env: Mapping[str, str] | None = None, path: str | Path | None = None) -> dict[str, str | None]:
    """Settings that make the cache enabled, persistent and as large as the driver allows (None = unset it)."""
    env = os.environ if env is None else env
    settings: dict[str, str | None] = {
        "CUDA_CACHE_DISABLE": "0",
        "CUDA_CACHE_PATH": str(Path(path).expanduser() if path else recommended_path(env)),
        "CUDA_CACHE_MAXSIZE": str(MAX_BYTES),
    }
    for var in ("CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT"):
        if var in env:
            settings[var] = None
    return settings


def apply_settings(env: Mapping[str, str], settings: Mapping[str, str | None]) -> dict[str, str]:
    out = dict(env)
    for k, v in settings.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def _shell_quote(value: str) -> str:
    import shlex

    return shlex.quote(value)


def render_env(settings: Mapping[str, str | None], fmt: str = "shell") -> str:
    """`export K=V` lines (shell) or `K=V` lines (dotenv, for systemd EnvironmentFile / docker --env-file)."""
    lines = []
    if fmt == "shell":
        lines.append("# CUDA driver JIT cache: enabled, persistent, 4 GiB (lgpatch jit-cache env)")
        for k, v in settings.items():
            lines.append(f"unset {k}" if v is None else f"export {k}={_shell_quote(v)}")
    elif fmt == "dotenv":
        lines.append("# CUDA driver JIT cache: enabled, persistent, 4 GiB (lgpatch jit-cache env)")
        for k, v in settings.items():
            lines.append(f"# {k} must be unset (dotenv files cannot unset)" if v is None else f"{k}={v}")
    else:
        raise ValueError(f"unknown format {fmt!r} (shell or dotenv)")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class WarmResult:
    argv: tuple[str, ...]
    returncode: int
    elapsed_s: float
    path: str
    bytes_before: int
    bytes_after: int
    files_before: int
    files_after: int
    settings: dict[str, str | None]

    @property
    def filled_bytes(self) -> int:
        return self.bytes_after - self.bytes_before

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "returncode": self.returncode,
            "elapsed_s": round(self.elapsed_s, 3),
            "cache_path": self.path,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "filled_bytes": self.filled_bytes,
            "files_before": self.files_before,
            "files_after": self.files_after,
            "settings": self.settings,
        }


def warm(argv: Sequence[str], env: Mapping[str, str] | None = None, path: str | Path | None = None,
         timeout: float | None = None) -> WarmResult:
    """Run `argv` with the recommended settings, so its first (slow) JIT lands in the cache now, not at the first
    real start; report how long it took and how much it put in the cache."""
    if not argv:
        raise ValueError("no command given")
    env = dict(os.environ if env is None else env)
    settings = recommended_env(env, path)
    cache = Path(str(settings["CUDA_CACHE_PATH"]))
    cache.mkdir(parents=True, exist_ok=True)
    before, files_before = dir_usage(cache)
    t0 = time.perf_counter()
    try:
        rc = subprocess.run(list(argv), env=apply_settings(env, settings), timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    elapsed = time.perf_counter() - t0
    after, files_after = dir_usage(cache)
    return WarmResult(tuple(argv), rc, elapsed, str(cache), before, after, files_before, files_after, settings)
