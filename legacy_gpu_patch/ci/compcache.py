"""ccache / sccache for the build, when one is installed, and its statistics for the report.

ccache goes in through a masquerade folder (cc, gcc, c++, g++ → ccache) put first on PATH: that reaches setuptools
builds, which know no compiler launcher, as well as CMake ones. sccache cannot masquerade; it goes in as the CMake
compiler launcher (`lgpatch build --launcher`), which also wraps nvcc — and with a dist config naming a scheduler it
is sccache-dist (docs/ci.md). The report shows the difference of the statistics before and after the build: the
counters are never zeroed, so a user's totals survive and another job sharing the cache cannot wipe this one's.
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


def _numbers(raw: dict[str, Any]) -> dict[str, int]:
    return {k: int(v) for k, v in raw.items() if isinstance(v, int) or (isinstance(v, str) and v.isdigit())}


def snapshot(cache: CompilerCache) -> dict[str, int]:
    """The tool's counters now (name → count): ccache's --print-stats, sccache's JSON stats flattened."""
    if cache.path is None:
        return {}
    if cache.kind == "sccache":
        proc = subprocess.run([cache.path, "--show-stats", "--stats-format", "json"], capture_output=True, text=True)
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            return {}
        s = data.get("stats", data) if isinstance(data, dict) else {}
        flat: dict[str, int] = {}
        for group in ("cache_hits", "cache_misses"):
            for lang, n in ((s.get(group) or {}).get("counts") or {}).items():
                flat[f"{group}.{lang}"] = int(n)
        flat.update(_numbers({k: v for k, v in s.items() if not isinstance(v, dict)}))
        return flat
    proc = subprocess.run([cache.path, "--print-stats"], capture_output=True, text=True)
    raw = dict(line.split("\t", 1) for line in proc.stdout.splitlines() if "\t" in line)
    return _numbers(raw)


_TIMESTAMPS = ("stats_updated_timestamp", "stats_zeroed_timestamp")
_SIZES = ("cache_size_kibibyte", "files_in_cache")


def stats(cache: CompilerCache, before: dict[str, int]) -> dict[str, Any]:
    """{kind, path, hits, misses, delta, reason}: what this build added to the counters."""
    out: dict[str, Any] = {"kind": cache.kind, "path": cache.path, "reason": cache.reason}
    if cache.path is None:
        return out
    after = snapshot(cache)
    delta = {k: v - before.get(k, 0) for k, v in after.items()
             if k not in _TIMESTAMPS + _SIZES and v - before.get(k, 0)}
    delta.update({k: after[k] for k in _SIZES if k in after})  # sizes: the state after the build
    if cache.kind == "sccache":
        out["hits"] = sum(v for k, v in delta.items() if k.startswith("cache_hits."))
        out["misses"] = sum(v for k, v in delta.items() if k.startswith("cache_misses."))
    else:
        out["hits"] = delta.get("direct_cache_hit", 0) + delta.get("preprocessed_cache_hit", 0)
        out["misses"] = delta.get("cache_miss", 0)
    out["delta"] = delta
    return out
