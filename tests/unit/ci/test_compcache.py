"""The compiler cache of `lgpatch ci`: ccache through a masquerade folder on PATH (a real compile, twice), the
statistics as a difference (never zeroed), and what is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from legacy_gpu_patch.ci import compcache
from legacy_gpu_patch.errors import ToolError


def test_none_and_a_missing_tool(tmp_path: Path) -> None:
    assert compcache.choose("none", tmp_path).kind == "none"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert compcache.choose("auto", tmp_path, path=str(empty)).reason == "neither sccache nor ccache is on PATH"
    with pytest.raises(ToolError) as err:
        compcache.choose("sccache", tmp_path, path=str(empty))
    assert err.value.exit_code == 14


@pytest.mark.skipif(shutil.which("ccache") is None or shutil.which("gcc") is None, reason="needs ccache and gcc")
def test_ccache_masquerade_caches_a_real_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    cache = compcache.choose("ccache", tmp_path / "tools")
    assert cache.kind == "ccache" and cache.launcher is None
    assert os.path.realpath(cache.masquerade / "gcc") == os.path.realpath(cache.path)
    env = cache.env(dict(os.environ))
    src = tmp_path / "a.c"
    src.write_text("int f(void) { return 42; }\n")
    before = compcache.snapshot(cache)
    for _ in range(2):
        subprocess.run(["gcc", "-c", str(src), "-o", str(tmp_path / "a.o")], env=env, check=True, cwd=tmp_path)
    stats = compcache.stats(cache, before)
    assert stats["misses"] == 1 and stats["hits"] == 1, stats
    again = compcache.stats(cache, compcache.snapshot(cache))
    assert again["hits"] == again["misses"] == 0  # a difference, not the totals
