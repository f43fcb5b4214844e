"""The knowledge tables: every entry sourced, facts from the release notes, and the compatibility rules."""

from __future__ import annotations

import pytest

from legacy_gpu_patch.cuda import changes
from legacy_gpu_patch.cuda import knowledge as ck

# `nvcc --list-gpu-arch` of CUDA 13.0.88 (recorded on the project's build machine; the integration test compares
# the live output too).
NVCC_13_0_LIST_GPU_ARCH = ["compute_75", "compute_80", "compute_86", "compute_87", "compute_88", "compute_89",
                           "compute_90", "compute_100", "compute_110", "compute_103", "compute_120", "compute_121"]


def plain(names: frozenset[str], prefix: str) -> set[str]:
    return {n for n in names if n.startswith(prefix) and n[len(prefix):].isdigit()}


def test_every_toolkit_8_to_13_is_tabulated_with_sources() -> None:
    versions = [t.version for t in ck.TOOLKITS]
    for v in ("8.0", "9.0", "9.1", "9.2", "10.0", "10.1", "10.2", *(f"11.{i}" for i in range(9)),
              *(f"12.{i}" for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)), "13.0", "13.1", "13.2"):
        assert v in versions
    assert versions == sorted(versions, key=ck.vtuple)
    for t in ck.TOOLKITS:
        assert t.sources and all(t.sources)
        assert t.sass and t.ptx
        if t.certain:
            assert t.driver and t.gcc_max and t.clang_max, t.version
        else:
            assert t.note  # an uncertain row says why


def test_every_arch_and_target_has_a_source() -> None:
    assert all(a.source for a in ck.ARCHES)
    assert all(t.source for t in ck.TARGETS)
    assert all(t.note for t in ck.TARGETS if not t.certain and t.target == "107")


@pytest.mark.parametrize(
    ("version", "has", "lacks"),
    [
        ("8.0", ["sm_20", "sm_61", "compute_61", "sm_62"], ["sm_70", "compute_70"]),
        ("9.0", ["sm_70", "compute_30"], ["sm_20", "sm_72", "sm_75"]),
        ("9.1", ["sm_72"], ["sm_75"]),
        ("10.0", ["sm_75", "compute_75"], ["sm_80"]),
        ("10.2", ["sm_30"], ["sm_80"]),
        ("11.0", ["sm_80", "compute_80", "sm_35"], ["sm_30", "sm_86", "compute_86"]),
        ("11.1", ["sm_86", "compute_86"], ["sm_87"]),
        ("11.4", ["sm_87"], ["sm_89"]),
        ("11.8", ["sm_89", "sm_90", "sm_35"], ["sm_90a"]),
        ("12.0", ["sm_90a", "compute_90a", "sm_50"], ["sm_35", "sm_37", "sm_100"]),
        ("12.8", ["sm_100", "sm_100a", "sm_101", "sm_120"], ["sm_103", "sm_100f"]),
        ("12.9", ["sm_103", "sm_121", "sm_100f", "sm_61", "sm_70"], ["sm_110"]),
        ("13.0", ["sm_75", "sm_88", "sm_110", "sm_121"], ["sm_72", "sm_70", "sm_61", "sm_50", "sm_101"]),
    ],
)
def test_targets_per_toolkit(version: str, has: list[str], lacks: list[str]) -> None:
    t = ck.toolkit(version)
    for name in has:
        assert name in t.sass or name in t.ptx, (version, name)
    for name in lacks:
        assert name not in t.sass and name not in t.ptx, (version, name)


def test_sm_21_has_no_virtual_arch() -> None:
    t = ck.toolkit("8.0")
    assert "sm_21" in t.sass
    assert "compute_21" not in t.ptx


def test_cuda_13_0_matches_the_recorded_nvcc() -> None:
    t = ck.toolkit("13.0")
    assert plain(t.ptx, "compute_") == set(NVCC_13_0_LIST_GPU_ARCH)
    assert plain(t.sass, "sm_") == {n.replace("compute_", "sm_") for n in NVCC_13_0_LIST_GPU_ARCH}


@pytest.mark.parametrize(
    ("version", "driver", "gcc", "clang"),
    [("8.0", "375.26", 5, "3.9"), ("9.2", "396.26", 7, "5.0"), ("10.2", "440.33", 8, "8"),
     ("11.0", "450.51.05", 9, "9"), ("11.1", "455.23", 10, "10"), ("11.8", "520.61.05", 11, "14"),
     ("12.0", "525.60.13", 12, "14"), ("12.4", "550.54.14", 13, "17"), ("12.9", "575.51.03", 14, "19"),
     ("13.0", "580.65.06", 15, "20")],
)
def test_driver_and_host_compiler(version: str, driver: str, gcc: int, clang: str) -> None:
    t = ck.toolkit(version)
    assert (t.driver, t.gcc_max, t.clang_max) == (driver, gcc, clang)


def test_minimum_driver_uses_minor_version_compatibility_from_11() -> None:
    assert ck.toolkit("10.2").min_driver == "440.33"  # before 11: the toolkit's own driver
    assert ck.toolkit("11.8").min_driver == "450.80.02"
    assert ck.toolkit("12.6").min_driver == "525.60.13"
    assert ck.toolkit("13.2").min_driver == "580"
    assert not ck.toolkit("10.2").allows_unsupported_compiler
    assert ck.toolkit("11.0").allows_unsupported_compiler


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [("450.51.06", "11.0"), ("450.80.02", "11.0"), ("470.182.03", "11.4"), ("525.60.13", "12.0"),
     ("535.104.05", "12.2"), ("580.95.05", "13.0"), ("375.26", "8.0"), ("300.1", None)],
)
def test_driver_cuda_version(driver: str, cuda: str | None) -> None:
    assert ck.driver_cuda_version(driver) == cuda


def test_sass_rule_same_major_equal_or_higher_minor() -> None:
    assert ck.sass_runs_on(80, 86)
    assert ck.sass_runs_on(86, 86)
    assert not ck.sass_runs_on(86, 80)
    assert not ck.sass_runs_on(75, 80)  # other major
    assert not ck.sass_runs_on(61, 75)
    assert not ck.sass_runs_on(90, 90 + 10)
    assert ck.sass_runs_on(90, 90, "a")
    assert not ck.sass_runs_on(100, 103, "a")  # arch-specific: exact only


def test_ptx_rule_any_equal_or_newer() -> None:
    assert ck.ptx_runs_on(61, 75)
    assert ck.ptx_runs_on(80, 120)
    assert not ck.ptx_runs_on(75, 61)
    assert not ck.ptx_runs_on(90, 100, "a")
    assert ck.ptx_runs_on(100, 103, "f")
    assert not ck.ptx_runs_on(100, 120, "f")


def test_tegra_and_families() -> None:
    assert {53, 62, 72, 87} <= ck.TEGRA_ONLY
    assert 86 not in ck.TEGRA_ONLY and 61 not in ck.TEGRA_ONLY
    assert ck.family_of(75) == "Turing"
    assert ck.family_of(89) == "Ada Lovelace"
    assert ck.family_of(120) == "Blackwell"
    assert ck.arch_info(61).last_driver_branch == 580
    assert ck.arch_info(35).last_driver_branch == 470
    assert ck.arch_info(90).last_driver_branch is None


def test_toolkit_lookup_edges() -> None:
    assert ck.toolkit("11.4.1").version == "11.4"
    assert ck.toolkit("12.7").version == "12.6"  # there is no 12.7: the older row applies
    assert ck.toolkit("14.1").version == ck.NEWEST_TOOLKIT
    assert not ck.is_tabulated("14.1")
    with pytest.raises(ck.UnknownToolkit):
        ck.toolkit("7.5")


def test_newest_and_oldest_toolkit_with() -> None:
    assert ck.newest_toolkit_with("sm_61").version == "12.9"
    assert ck.oldest_toolkit_with("sm_86").version == "11.1"
    assert ck.newest_toolkit_with("sm_35").version == "11.8"
    assert ck.newest_toolkit_with("sm_999") is None


def test_notable_changes() -> None:
    found = {(c.version, c.what.split(" ")[0]) for c in changes.changes_between("8.0", "13.0")}
    assert ("11.0", "cuSPARSE") in found
    assert ("12.0", "texture") in found
    assert ("12.0", "cudaProfilerInitialize") in found
    assert ("12.9", "NVTX") in found  # removed in 12.9, not 13.0
    assert ("13.0", "offline") in found
    assert all(c.source and c.fix and c.symptom for c in changes.CHANGES)
    assert [c.version for c in changes.changes_between("11.8", "12.0")] == ["12.0"] * 3
    assert changes.changes_between("13.0", "13.0") == []
    spmm = next(c for c in changes.CHANGES if "cusparseScsrmm2" in c.symptom)
    assert spmm.patchset == "cusparse-spmm"


def test_version_helpers() -> None:
    assert ck.vtuple("12.8.61-1") == (12, 8, 61)
    assert ck.major_minor("11") == "11.0"
    assert ck.version_at_most("3.9.1", "3.9")
    assert not ck.version_at_most("4.0", "3.9")
    assert ck.version_at_most("15.2.0", "15")
    assert ck.version_at_least("580.95.05", "580")
    assert not ck.version_at_least("450.51", "450.80.02")
    with pytest.raises(ValueError):
        ck.vtuple("abc")


def test_docs_toolkit_table_is_what_the_module_prints() -> None:
    from helpers import REPO

    page = (REPO / "docs" / "cuda.md").read_text(encoding="utf-8")
    table = ck.toolkit_table()
    assert table.count("\n") == len(ck.TOOLKITS) + 2 and "| 13.0 | 75 80 86" in table
    assert table in page, "docs/cuda.md's Toolkits table differs from `python -m legacy_gpu_patch.cuda.knowledge`"
