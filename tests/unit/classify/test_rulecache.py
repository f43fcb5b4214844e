"""The rule-set cache (rulecache.py): read back equal to what the files give, rebuilt on any change or damage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from legacy_gpu_patch.classify import normalize, rulecache, rules


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LGPATCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "classify"


def test_a_value_is_built_once_then_read_back(cache_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "a.yaml"
    src.write_text("x: 1\n")
    builds: list[int] = []

    def build() -> dict[str, int]:
        builds.append(1)
        return {"x": len(builds)}

    assert rulecache.cached("t", [src], build) == {"x": 1}
    assert rulecache.cached("t", [src], build) == {"x": 1}  # from the file: not built again
    assert len(builds) == 1 and len(list(cache_dir.glob("t-*.pickle"))) == 1


def test_an_edited_source_makes_a_new_cache_and_the_oldest_are_dropped(cache_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "a.yaml"
    src.write_text("x: 1\n")
    rulecache.cached("t", [src], lambda: "one")
    src.write_text("x: 2\n")  # same size, other bytes
    assert rulecache.cached("t", [src], lambda: "two") == "two"
    src.write_text("x: 1\n")  # back: the first one is still there, not built again
    assert rulecache.cached("t", [src], lambda: "rebuilt") == "one"
    for i in range(rulecache.KEEP + 3):
        src.write_text(f"x: {i + 10}\n")
        rulecache.cached("t", [src], lambda: "many")
    assert len(list(cache_dir.glob("t-*.pickle"))) == rulecache.KEEP


def test_a_damaged_cache_is_rebuilt(cache_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "a.yaml"
    src.write_text("x: 1\n")
    rulecache.cached("t", [src], lambda: "good")
    (path,) = cache_dir.glob("t-*.pickle")
    path.write_bytes(b"\x80\x05garbage")
    assert rulecache.cached("t", [src], lambda: "rebuilt") == "rebuilt"
    assert rulecache.cached("t", [src], lambda: "again") == "rebuilt"  # written anew


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_cache_folder_only_costs_the_build(cache_dir: Path, tmp_path: Path) -> None:
    cache_dir.mkdir(parents=True)
    cache_dir.chmod(0o500)
    src = tmp_path / "a.yaml"
    src.write_text("x: 1\n")
    try:
        assert rulecache.cached("t", [src], lambda: "built") == "built"
        assert not list(cache_dir.glob("*"))
    finally:
        cache_dir.chmod(0o700)


def test_a_cache_file_that_cannot_be_created_only_costs_the_build(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LGPATCH_CACHE", str(blocker))  # classify/ cannot be made under a file
    src = tmp_path / "a.yaml"
    src.write_text("x: 1\n")
    assert rulecache.cached("t", [src], lambda: "built") == "built"


def test_the_cached_rule_set_equals_the_one_read_from_the_files(cache_dir: Path) -> None:
    files = tuple(rules.rule_files())
    sources = [*files, *rulecache.code_files()]
    first = rulecache.cached("rules", sources, lambda: rules._load(files, shipped=True))
    again = rulecache.cached("rules", sources, lambda: pytest.fail("read back, not built"))
    plain = rules._load(files)
    assert again == first and first.shipped and not plain.shipped
    assert (again.rules, again.triggers, again.lead, again.literals, again.literal_rules, again.always) == (
        plain.rules, plain.triggers, plain.lead, plain.literals, plain.literal_rules, plain.always)
    assert [r.regex.pattern for r in again.rules] == [r.regex.pattern for r in plain.rules]
    assert [r.key_groups for r in again.rules] == [r.key_groups for r in plain.rules]
    table = rulecache.cached("localized", [normalize._LOCAL_FILE, *rulecache.code_files()],
                             normalize._read_local_table)
    assert table == normalize._read_local_table() == normalize._local_words()


def test_the_cache_lives_in_the_lgpatch_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LGPATCH_CACHE", str(tmp_path))
    assert rulecache.cache_folder() == tmp_path / "classify"


def test_what_is_read_of_the_patterns_is_cached_equal_to_a_fresh_reading(cache_dir: Path) -> None:
    from legacy_gpu_patch.classify import prepare

    shipped = rules.load_rules()
    prepare.prepared.cache_clear()
    try:
        cached, fresh = prepare.prepared(shipped), prepare.prepare(shipped)
        prepare.prepared.cache_clear()
        again = prepare.prepared(shipped)  # read back from the cache file
    finally:
        prepare.prepared.cache_clear()
    assert list(cache_dir.glob("prepared-*.pickle"))
    for p in (cached, again):
        assert (p.lead, p.raw_skip, p.factors, p.gates, p.aware, p.lowered, p.aware_runs, p.led) == (
            fresh.lead, fresh.raw_skip, fresh.factors, fresh.gates, fresh.aware, fresh.lowered, fresh.aware_runs,
            fresh.led)
        assert (p.index.source, p.index.always, p.index.implied) == (
            fresh.index.source, fresh.index.always, fresh.index.implied)
    assert fresh.aware and len(fresh.gates) == len(shipped.rules) == len(fresh.led)


def test_a_rule_set_cached_by_another_checkout_names_this_checkouts_files(cache_dir: Path) -> None:
    """The cache is shared by checkouts of the same rules and code (one digest): a copy written by a checkout since
    deleted must not hand its file names on, or every cache keyed on them (prepare, foldshape, the harmless digit
    strings) finds nothing to read and is built again at every start."""
    from dataclasses import replace

    files = tuple(rules.rule_files())
    sources = [*files, *rulecache.code_files()]
    gone = tuple(f"/gone/checkout/{f.name}" for f in files)
    rulecache.cached("rules", sources, lambda: replace(rules._load(files, shipped=True), files=gone))
    assert rulecache.cached("rules", sources, lambda: pytest.fail("read back")).files == gone  # as stored
    rules._default_rules.cache_clear()
    try:
        loaded = rules.load_rules()
    finally:
        rules._default_rules.cache_clear()
    assert loaded.files == tuple(str(f) for f in files) and loaded.shipped
    assert all(Path(f).is_file() for f in loaded.files)
