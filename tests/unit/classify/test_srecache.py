"""The compiled-pattern cache (srecache.py): every pattern it hands back is the one re.compile makes, read from a file
a real `lgpatch classify` wrote; damage, a full cache, the switch and an unwritable folder change nothing else."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from legacy_gpu_patch.classify import srecache

pytestmark = pytest.mark.skipif(srecache._INTERNALS is None, reason="no CPython sre internals here")

REPO = Path(__file__).resolve().parents[3]
LOG = """[1/3] Building CUDA object a.cu.o
nvcc fatal   : Unsupported gpu architecture 'compute_35'
/src/b.cpp:3:10: fatal error: THC/THC.h: No such file or directory
/usr/bin/ld: cannot find -lnvToolsExt
CMake Error at CMakeLists.txt:12 (find_package):
-- Could NOT find CUDA (missing: CUDA_NVCC_EXECUTABLE)
a.cu(7): error: namespace "cub" has no member "Max"
Killed
"""


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of its own, and the module as a new process finds it (nothing read, nothing made)."""
    monkeypatch.setenv("LGPATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LGPATCH_SRE_CACHE", raising=False)
    monkeypatch.setattr(srecache, "_entries", None)
    monkeypatch.setattr(srecache, "_path", None)
    monkeypatch.setattr(srecache, "_added", False)
    monkeypatch.setattr(srecache, "_used", set())
    return tmp_path / "cache" / "classify"


def _classify(log: Path, cache: Path, **env: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-m", "legacy_gpu_patch", "classify", str(log), "--json"], cwd=REPO,
                         env={**os.environ, "LGPATCH_CACHE": str(cache), **env}, capture_output=True, check=False)
    report = json.loads(out.stdout)
    for volatile in ("started", "duration_s"):
        report.pop(volatile)
    return report


def _same(pattern: str | bytes, flags: int = 0) -> bool:
    """compile_re's Pattern is re.compile's: CPython's equality (pattern, flags, code) and the groups besides."""
    ours, theirs = srecache.compile_re(pattern, flags), re.compile(pattern, flags)
    return ours == theirs and (ours.groups, ours.groupindex) == (theirs.groups, theirs.groupindex)


def _read(folder: Path) -> dict[tuple[object, int], srecache.Entry]:
    (path,) = folder.glob("sre-*.pickle")
    with open(path, "rb") as fh:
        entries: dict[tuple[object, int], srecache.Entry] = pickle.load(fh)
    return entries


def test_a_real_run_writes_entries_that_compile_to_re_compiles_patterns(fresh: Path, tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text(LOG)
    _classify(log, fresh.parent)
    entries = _read(fresh)
    assert len(entries) > 50  # the rules a run reaches, the lead patterns, normalisation and shapes
    kinds = set()
    for (pattern, flags), _ in entries.items():
        assert isinstance(pattern, (str, bytes))
        kinds.add(type(pattern))
        # Pattern equality is CPython's: the same pattern, flags and compiled code
        assert _same(pattern, flags), pattern
    assert kinds == {str, bytes}
    assert not srecache._added  # all read from the file: nothing new to write


def test_the_report_is_the_same_with_the_cache_off_cold_and_warm(fresh: Path, tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text(LOG * 40)
    off = _classify(log, tmp_path / "off", LGPATCH_SRE_CACHE="0")
    assert not list((tmp_path / "off" / "classify").glob("sre-*"))  # the switch: nothing written
    cold = _classify(log, fresh.parent)
    warm = _classify(log, fresh.parent)
    assert off == cold == warm
    assert off["summary"]["error_findings"] >= 6  # type: ignore[index]


def test_an_entry_is_what_re_compile_makes_of_group_names_flags_and_bytes(fresh: Path) -> None:
    cases: list[tuple[str | bytes, int]] = [
        (r"(?P<key>sm_\d+)\b(?i:x)", 0), (r"(?x) a  b # c", 0), (rb"\n([0-9]+):", 0), (r"Fehler|erreur", re.I),
        ("«[ \u00a0]*([^»]*)»", 0), (r"^(?:a|b)*?$", re.M | re.S),
    ]
    for pattern, flags in cases:
        assert _same(pattern, flags)
    assert srecache._added and len(srecache._used) == len(cases)
    srecache._save()
    assert set(_read(fresh)) == {(p, f) for p, f in cases}


def test_an_invalid_pattern_raises_re_error_and_is_not_kept(fresh: Path) -> None:
    with pytest.raises(re.error):
        srecache.compile_re(r"(unclosed")
    assert ("(unclosed", 0) not in (srecache._entries or {})


def test_a_damaged_file_means_compiling_and_is_written_anew(fresh: Path) -> None:
    fresh.mkdir(parents=True)
    srecache.cache_file().write_bytes(b"\x80\x05garbage")
    assert _same(r"error: (?P<key>\w+)")
    srecache._save()
    assert list(_read(fresh)) == [(r"error: (?P<key>\w+)", 0)]


def test_an_entry_that_does_not_fit_these_internals_falls_back_to_re_compile(fresh: Path) -> None:
    fresh.mkdir(parents=True)
    bad: srecache.Entry = (0, b"\xff\xff\xff\xff", 0, {}, (None,))  # code _sre.compile refuses
    with open(srecache.cache_file(), "wb") as fh:
        pickle.dump({("abc", 0): bad}, fh)
    assert _same("abc")
    assert ("abc", 0) not in (srecache._entries or {})


def test_past_the_cap_the_file_keeps_what_this_run_used(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh.mkdir(parents=True)
    old = {(f"old{i}", 0): srecache.entry_of(f"old{i}", 0) for i in range(8)}
    with open(srecache.cache_file(), "wb") as fh:
        pickle.dump(old, fh)
    monkeypatch.setattr(srecache, "MAX_ENTRIES", 4)
    srecache.compile_re("old3")  # read from the file
    srecache.compile_re("new")  # made: the file is written at exit
    srecache._save()
    assert set(_read(fresh)) == {("old3", 0), ("new", 0)}


def test_files_of_other_interpreters_are_bounded_and_this_ones_kept(fresh: Path) -> None:
    # Every Python upgrade names a new file; the newest rulecache.KEEP are kept (as the rule caches are).
    from legacy_gpu_patch.classify.rulecache import KEEP

    fresh.mkdir(parents=True)
    for i in range(KEEP + 3):
        old = fresh / f"sre-cpython-3{i:02d}-0-00000000.pickle"
        old.write_bytes(pickle.dumps({}))
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    srecache.compile_re("z+")
    srecache._save()
    files = {p.name for p in fresh.glob("sre-*.pickle")}
    assert len(files) == KEEP and srecache.cache_file().name in files
    assert f"sre-cpython-3{KEEP + 2:02d}-0-00000000.pickle" in files  # the newest old one stays
    assert not list(fresh.glob("*.tmp"))


def test_the_switch_compiles_with_re_alone(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LGPATCH_SRE_CACHE", "0")
    assert srecache.compile_re("x+") == re.compile("x+")
    assert srecache._entries is None and not srecache._added


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_cache_folder_only_costs_the_compile(fresh: Path) -> None:
    fresh.mkdir(parents=True)
    fresh.chmod(0o500)
    try:
        assert _same("y+")
        srecache._save()
        assert not list(fresh.iterdir())
    finally:
        fresh.chmod(0o700)
