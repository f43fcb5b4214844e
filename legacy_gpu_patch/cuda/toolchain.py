"""Toolchain facts for `lgpatch doctor`: host compilers (and versioned g++-N, the usual -ccbin fix), cmake, cuDNN
headers, numpy, and the host-compiler limits each nvcc enforces.

cuDNN comes from cudnn_version.h, falling back to cudnn.h (the move PyTorch 1.5 trips over).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legacy_gpu_patch.cuda import knowledge as ck
from legacy_gpu_patch.cuda import nvcc_probe
from legacy_gpu_patch.cuda.machine import run_tool
from legacy_gpu_patch.cuda.nvcc_probe import NvccInfo


@dataclass(frozen=True)
class Compiler:
    name: str  # g++, gcc, clang++, g++-11
    path: str
    version: str | None
    kind: str  # gcc | clang
    error: str | None = None

    @property
    def major(self) -> int | None:
        return ck.vtuple(self.version)[0] if self.version else None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "version": self.version, "kind": self.kind, "error": self.error}


def probe_compiler(name: str, path: str) -> Compiler:
    kind = "clang" if "clang" in name else "gcc"
    if kind == "gcc":
        rc, out = run_tool([path, "-dumpfullversion", "-dumpversion"])
        m = re.match(r"\s*(\d+(?:\.\d+)*)", out) if rc == 0 else None
    else:
        rc, out = run_tool([path, "--version"])
        m = re.search(r"clang version (\d+(?:\.\d+)*)", out) if rc == 0 else None
    if not m:
        return Compiler(name, path, None, kind, error=out.strip()[:200] or f"exit status {rc}")
    return Compiler(name, path, m.group(1), kind)


def scan_compilers(env: Mapping[str, str] | None = None) -> list[Compiler]:
    """g++/gcc/clang++ as a build finds them, plus every versioned g++-N / clang++-N on PATH (the -ccbin fixes)."""
    env = os.environ if env is None else env
    path = env.get("PATH", "")
    names: dict[str, str] = {}
    for n in ("g++", "gcc", "clang++"):
        hit = shutil.which(n, path=path)
        if hit:
            names[n] = hit
    for d in path.split(os.pathsep):
        for p in sorted(glob.glob(os.path.join(d, "g++-[0-9]*")) + glob.glob(os.path.join(d, "clang++-[0-9]*"))):
            n = os.path.basename(p)
            if re.fullmatch(r"(g\+\+|clang\+\+)-\d+", n) and n not in names and os.access(p, os.X_OK):
                names[n] = p
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda kv: probe_compiler(*kv), names.items()))


def scan_cmake(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if env is None else env
    cmake = shutil.which("cmake", path=env.get("PATH"))
    if not cmake:
        return {"path": None, "version": None, "error": "cmake not found"}
    _rc, out = run_tool([cmake, "--version"])
    m = re.search(r"cmake version (\d+(?:\.\d+)*)", out)
    return {"path": cmake, "version": m.group(1) if m else None, "error": None if m else out.strip()[:200]}


_CUDNN_RE = {k: re.compile(rf"#define\s+CUDNN_{k}\s+(\d+)") for k in ("MAJOR", "MINOR", "PATCHLEVEL")}


def parse_cudnn_header(text: str) -> str | None:
    parts = [m.group(1) if (m := r.search(text)) else None for r in _CUDNN_RE.values()]
    if parts[0] is None:
        return None
    return ".".join(p if p is not None else "0" for p in parts)


def cudnn_search_dirs(nvccs: Sequence[NvccInfo], env: Mapping[str, str] | None = None) -> list[Path]:
    env = os.environ if env is None else env
    dirs: list[Path] = []
    for info in nvccs:
        dirs += info.include_dirs
    for var in ("CUDNN_INCLUDE_DIR", "CUDNN_INCLUDE_PATH"):
        if env.get(var):
            dirs.append(Path(env[var]))
    for var in ("CUDNN_HOME", "CUDNN_PATH", "CUDNN_ROOT", "CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            dirs.append(Path(env[var]) / "include")
    dirs += [Path("/usr/include"), Path("/usr/include/x86_64-linux-gnu"), Path("/usr/include/aarch64-linux-gnu"),
             Path("/usr/local/cuda/include")]
    dirs += [sp / "nvidia" / "cudnn" / "include" for sp in nvcc_probe.site_package_dirs()]
    out: list[Path] = []
    for d in dirs:
        if d.is_dir() and d not in out:
            out.append(d)
    return out


def scan_cudnn(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """Every cuDNN header set found: cudnn_version.h (cuDNN >= 8) first, cudnn.h (cuDNN <= 7) as the fallback."""
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for d in dirs:
        for pattern in ("cudnn_version.h", "cudnn_version_v*.h", "cudnn.h", "cudnn_v*.h"):
            for p in sorted(d.glob(pattern)):
                real = os.path.realpath(p)
                try:
                    text = p.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                version = parse_cudnn_header(text)
                if version is None:
                    continue
                key = f"{os.path.dirname(real)}:{version}"
                if key in seen:
                    continue
                seen.add(key)
                found.append({"version": version, "header": str(p), "from": os.path.basename(p).split("_v")[0]
                              .replace(".h", "") + ".h"})
    return found


def numpy_version() -> str | None:
    try:
        from importlib import metadata

        return metadata.version("numpy")
    except Exception:
        return None


def host_limits_for(info: NvccInfo) -> dict[str, str]:
    """Host compiler limits for one nvcc: its own host_config.h first (what it enforces), else the table."""
    limits = nvcc_probe.host_config_limits(info.include_dirs)
    if limits:
        return dict(limits, source="host_config.h")
    if info.version:
        try:
            row = ck.toolkit(info.version)
        except ck.UnknownToolkit:
            return {}
        out = {"source": "table"}
        if row.gcc_max is not None:
            out["gcc_max"] = str(row.gcc_max)
        if row.clang_max is not None:
            out["clang_max"] = row.clang_max
        return out
    return {}


def default_host_compiler(compilers: Sequence[Compiler], env: Mapping[str, str]) -> Compiler | None:
    """The compiler nvcc will call: NVCC_CCBIN / CUDAHOSTCXX when set, else g++ from PATH."""
    for var in ("NVCC_CCBIN", "CUDAHOSTCXX"):
        if env.get(var):
            want = os.path.realpath(shutil.which(env[var], path=env.get("PATH")) or env[var])
            for c in compilers:
                if os.path.realpath(c.path) == want:
                    return c
            return probe_compiler(os.path.basename(env[var]), env[var])
    return next((c for c in compilers if c.name == "g++"), None) or next((c for c in compilers if c.name == "gcc"),
                                                                        None)
