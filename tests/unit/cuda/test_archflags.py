"""Arch flag derivation: one spelling in, the three build-system spellings out."""

from __future__ import annotations

import pytest

from legacy_gpu_patch.cuda.archflags import Arch, ArchSyntaxError, flags_for, merge_archs, parse_arch
from legacy_gpu_patch.errors import ConfigError, ExitCode


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sm_86", Arch(86, "", sass=True, ptx=False)),
        ("sm_86+ptx", Arch(86, "", sass=True, ptx=True)),
        ("SM_86+PTX", Arch(86, "", sass=True, ptx=True)),
        ("compute_75", Arch(75, "", sass=False, ptx=True)),
        ("sm_90a", Arch(90, "a", sass=True, ptx=False)),
        ("sm_100f", Arch(100, "f", sass=True, ptx=False)),
        ("sm_120", Arch(120, "", sass=True, ptx=False)),
        ("8.6", Arch(86, "", sass=True, ptx=False)),
        ("9.0+PTX", Arch(90, "", sass=True, ptx=True)),
        ("10.0a", Arch(100, "a", sass=True, ptx=False)),
        ("86", Arch(86, "", sass=True, ptx=True)),  # CMake: no suffix = real + virtual
        ("86-real", Arch(86, "", sass=True, ptx=False)),
        ("75-virtual", Arch(75, "", sass=False, ptx=True)),
    ],
)
def test_parse_arch(text: str, expected: Arch) -> None:
    assert parse_arch(text) == expected


def test_arch_properties() -> None:
    a = parse_arch("sm_100a+ptx")
    assert (a.major, a.minor, a.cc) == (10, 0, "10.0")
    assert (a.sm, a.compute, a.name) == ("sm_100a", "compute_100a", "sm_100a+ptx")
    assert parse_arch("compute_61").name == "compute_61"


@pytest.mark.parametrize("bad", ["sm86", "sm_8", "compute_75+ptx", "ampere", "", "8.6.1", "sm_86+sass"])
def test_parse_arch_rejects(bad: str) -> None:
    with pytest.raises(ArchSyntaxError) as info:
        parse_arch(bad)
    # usable both as a user-facing config error (exit code 3) and as a ValueError for validators
    assert isinstance(info.value, ConfigError)
    assert isinstance(info.value, ValueError)
    assert info.value.exit_code == ExitCode.CONFIG


def test_flags_single_sass() -> None:
    f = flags_for(["sm_86"])
    assert f.torch_cuda_arch_list == "8.6"
    assert f.cmake_cuda_architectures == "86-real"
    assert f.nvcc_gencode == ("-gencode=arch=compute_86,code=sm_86",)


def test_flags_sass_plus_ptx() -> None:
    f = flags_for(["sm_86", "sm_90+ptx"])
    assert f.torch_cuda_arch_list == "8.6;9.0+PTX"
    assert f.cmake_cuda_architectures == "86-real;90"
    assert f.nvcc_gencode == (
        "-gencode=arch=compute_86,code=sm_86",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    )
    assert f.sass_archs == ("sm_86", "sm_90")
    assert f.ptx_archs == ("compute_90",)


def test_flags_ptx_only() -> None:
    f = flags_for(["compute_75"])
    assert f.nvcc_gencode == ("-gencode=arch=compute_75,code=compute_75",)
    assert f.cmake_cuda_architectures == "75-virtual"
    # PyTorch cannot say "PTX only"; +PTX is the nearest superset
    assert f.torch_cuda_arch_list == "7.5+PTX"


def test_flags_merge_sort_and_dedupe() -> None:
    f = flags_for(["sm_90", "compute_86", "sm_86", "sm_90"])
    assert f.names == ("sm_86+ptx", "sm_90")
    assert f.cmake_cuda_architectures == "86;90-real"
    assert merge_archs(["sm_100", "sm_90a", "sm_90"]) == (
        Arch(90, ""),
        Arch(90, "a"),
        Arch(100, ""),
    )


def test_flags_arch_specific() -> None:
    f = flags_for(["sm_90a"])
    assert f.nvcc_gencode == ("-gencode=arch=compute_90a,code=sm_90a",)
    assert f.torch_cuda_arch_list == "9.0a"
    assert f.cmake_cuda_architectures == "90a-real"


def test_flags_from_list_string() -> None:
    assert flags_for("sm_86,sm_90+ptx") == flags_for(["sm_86", "sm_90+ptx"])
    assert flags_for("8.6;9.0+PTX") == flags_for(["sm_86", "sm_90+ptx"])


def test_flags_empty_rejected() -> None:
    with pytest.raises(ArchSyntaxError):
        flags_for([])
