"""ccache / sccache for the build, when one is installed, and its statistics for the report.

ccache goes in through a masquerade folder (cc, gcc, c++, g++ → ccache) put first on PATH: that reaches setuptools
builds, which know no compiler launcher, as well as CMake ones. sccache cannot masquerade; it goes in as the CMake
compiler launcher (`lgpatch build --launcher`), which also wraps nvcc — and with a dist config naming a scheduler it
is sccache-dist (docs/ci.md). Statistics are zeroed before the build, so the report shows this build's alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODES = ("auto", "ccache", "sccache", "none")
_MASQUERADE = ("cc", "gcc", "c++", "g++")


@dataclass(frozen=True)
class CompilerCache:
    kind: str  # ccache | sccache | none
    path: str | None
    masquerade: Path | None = None  # ccache's folder of compiler links
    reason: str = ""

    @property
    def launcher(self) -> str | None:
        """What `--launcher` the build gets (sccache only; ccache works through PATH)."""
        return "sccache" if self.kind == "sccache" else None

    def env(self, base: dict[str, str]) -> dict[str, str]:
        out = dict(base)
        if self.masquerade is not None:
            out["PATH"] = str(self.masquerade) + os.pathsep + out.get("PATH", "")
        return out


def choose(mode: str, scratch: Path, path: str | None = None) -> CompilerCache:
    if mode == "none":
        return CompilerCache("none", None, reason="--compiler-cache none")
    order = ("sccache", "ccache") if mode == "auto" else (mode,)
    for kind in order:
        found = shutil.which(kind, path=path)
        if found is None:
            continue
        if kind == "ccache":
            folder = scratch / "ccache-bin"
            folder.mkdir(parents=True, exist_ok=True)
            for name in _MASQUERADE:
                link = folder / name
                if not link.is_symlink():
                    link.symlink_to(found)
            return CompilerCache("ccache", found, folder)
        return CompilerCache("sccache", found)
    if mode != "auto":
        from legacy_gpu_patch.errors import ToolError

        raise ToolError(f"--compiler-cache {mode}: {mode} is not on PATH", hint=f"install {mode}, or use auto/none")
    return CompilerCache("none", None, reason="neither sccache nor ccache is on PATH")


def zero(cache: CompilerCache) -> None:
    if cache.path is None:
        return
    flag = "--zero-stats" if cache.kind == "sccache" else "-z"
    subprocess.run([cache.path, flag], capture_output=True, text=True)


def stats(cache: CompilerCache) -> dict[str, Any]:
    """{kind, hits, misses, raw…}; numbers are None where the tool did not say."""
    out: dict[str, Any] = {"kind": cache.kind, "path": cache.path, "reason": cache.reason}
    if cache.path is None:
        return out
    if cache.kind == "sccache":
        proc = subprocess.run([cache.path, "--show-stats", "--stats-format", "json"], capture_output=True, text=True)
        try:
            data = json.loads(proc.stdout)
            s = data.get("stats", data)
            out["hits"] = sum((s.get("cache_hits") or {}).get("counts", {}).values())
            out["misses"] = sum((s.get("cache_misses") or {}).get("counts", {}).values())
            out["raw"] = s
        except (ValueError, AttributeError):
            out["raw"] = proc.stdout[-2000:]
        return out
    proc = subprocess.run([cache.path, "--print-stats"], capture_output=True, text=True)
    values: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("\t")
        if value:
            values[key] = value
    def number(*keys: str) -> int | None:
        found = [int(values[k]) for k in keys if values.get(k, "").isdigit()]
        return sum(found) if found else None
    out["hits"] = number("direct_cache_hit", "preprocessed_cache_hit")
    out["misses"] = number("cache_miss")
    out["raw"] = values or proc.stdout[-2000:]
    return out
