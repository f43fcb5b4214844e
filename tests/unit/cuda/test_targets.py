"""Planning: native cubin, compatible cubin, PTX for an older virtual arch, or impossible — plus the driver."""

from __future__ import annotations

import pytest

from legacy_gpu_patch.cuda import targets as planner
from legacy_gpu_patch.cuda.nvcc_probe import NvccInfo
from legacy_gpu_patch.cuda.targets import plan


def test_cuda8_turing_gets_ptx_compute_61() -> None:
    # seed 2: Chainer 1.24 + CUDA 8 on a Quadro RTX 6000
    p = plan("8.0", "sm_75")
    assert p.status == planner.PTX
    assert p.ptx == "compute_61"  # not compute_62: Tegra-only (Jetson TX2)
    assert p.sass is None
    assert p.needs_jit
    assert p.flags.nvcc_gencode == ("-gencode=arch=compute_61,code=compute_61",)
    assert any("compute_62" in r and "Tegra" in r for r in p.reasons)


def test_cuda11_0_ampere_gets_compute_80() -> None:
    p = plan("11.0", "sm_86")
    assert p.ptx == "compute_80"
    # and the sm_80 cubin runs natively on 8.6 (binary compatibility), so no JIT is needed
    assert p.status == planner.SASS_COMPATIBLE
    assert p.sass == "sm_80"
    assert not p.needs_jit
    assert p.flags.torch_cuda_arch_list == "8.0+PTX"
    assert p.flags.cmake_cuda_architectures == "80"


def test_cuda11_1_ampere_is_native() -> None:
    p = plan("11.1", "sm_86")
    assert p.status == planner.NATIVE
    assert p.targets == ("sm_86",)
    assert p.flags.nvcc_gencode == ("-gencode=arch=compute_86,code=sm_86",)
    assert p.flags.cmake_cuda_architectures == "86-real"


def test_cuda13_pascal_is_impossible_with_reason() -> None:
    p = plan("13.0", "sm_61")
    assert p.status == planner.IMPOSSIBLE
    assert not p.buildable and not p.runnable
    assert p.flags is None
    text = p.explain()
    assert "compute_75" in text  # its oldest target
    assert "CUDA 13.0 removed sm_61" in text
    assert "CUDA 12.9" in text  # the newest toolkit that still emits sm_61
    assert "R580" in text  # and the driver branch that still runs Pascal


def test_driver_450_refuses_cuda12() -> None:
    p = plan("12.0", "sm_86", driver="450.80.02")
    assert p.status == planner.NATIVE
    assert p.driver.status == planner.DRIVER_REFUSE
    assert not p.runnable
    assert "525.60.13" in p.driver.message


def test_minor_version_compatibility_runs_cubins_but_not_newer_ptx() -> None:
    sass = plan("11.8", "sm_86", driver="470.182.03")
    assert sass.driver.status == planner.DRIVER_MINOR_COMPAT
    assert sass.runnable
    ptx = plan("11.8", 130, driver="470.182.03")  # a GPU newer than CUDA 11.8 knows: PTX only
    assert ptx.status == planner.PTX
    assert ptx.driver.status == planner.DRIVER_REFUSE
    assert "UNSUPPORTED_PTX_VERSION" in ptx.driver.message


def test_old_toolkit_on_new_driver_is_fine() -> None:
    p = plan("8.0", "sm_75", driver="580.95.05")
    assert p.driver.status == planner.DRIVER_OK
    assert p.runnable


def test_driver_past_the_family_branch_refuses() -> None:
    p = plan("12.9", "sm_61", driver="590.44.01")
    assert p.status == planner.NATIVE
    assert p.driver.status == planner.DRIVER_REFUSE
    assert "Pascal" in p.driver.message


def test_driver_cuda_version_from_nvml_wins_over_the_table() -> None:
    p = plan("12.4", "sm_90", driver="999.1", driver_cuda="12.2")
    assert p.driver.status == planner.DRIVER_MINOR_COMPAT


@pytest.mark.parametrize(
    ("toolkit", "gpu", "status", "targets"),
    [
        ("9.0", "sm_75", planner.SASS_COMPATIBLE, ("sm_70+ptx",)),  # Volta cubins run on Turing; 7.2 is Tegra
        ("10.0", "sm_86", planner.PTX, ("compute_75",)),
        ("11.8", "sm_90", planner.NATIVE, ("sm_90",)),
        ("12.6", "sm_120", planner.PTX, ("compute_90",)),  # Blackwell on a pre-Blackwell toolkit
        ("13.0", "sm_90", planner.NATIVE, ("sm_90",)),
        ("13.0", 107, planner.SASS_COMPATIBLE, ("sm_103+ptx",)),
        ("11.4", "8.7", planner.NATIVE, ("sm_87",)),  # Orin is its own target
        ("11.0", "sm_87", planner.SASS_COMPATIBLE, ("sm_80+ptx",)),
    ],
)
def test_plan_table(toolkit: str, gpu: str | int, status: str, targets: tuple[str, ...]) -> None:
    p = plan(toolkit, gpu)
    assert (p.status, p.targets) == (status, targets)
    assert p.source == "table"


def test_undocumented_8_8_is_no_fallback() -> None:
    # a GPU 8.9 on a toolkit that knew 8.8 but not 8.9 would get compute_87? no: 8.7 is Tegra, 8.8 undocumented
    p = planner.plan("13.0", 89)
    assert p.status == planner.NATIVE
    nvcc = NvccInfo("/x/nvcc", "/x/nvcc", (), version="13.0", gpu_archs=("compute_80", "compute_87", "compute_88"),
                    gpu_codes=("sm_75",), lists_supported=True)
    p = planner.plan("13.0", 89, nvcc=nvcc)
    assert p.status == planner.PTX
    assert p.ptx == "compute_80"
    assert p.source == "nvcc"


def test_nvcc_answer_is_preferred_over_the_table() -> None:
    # an nvcc that (unlike the table) does not list sm_86: its answer decides
    nvcc = NvccInfo("/x/nvcc", "/x/nvcc", (), version="11.1", gpu_archs=("compute_75", "compute_80"),
                    gpu_codes=("sm_75", "sm_80"), lists_supported=True)
    p = plan("11.1", "sm_86", nvcc=nvcc)
    assert p.source == "nvcc"
    assert p.status == planner.SASS_COMPATIBLE
    other = NvccInfo("/y/nvcc", "/y/nvcc", (), version="12.0", gpu_archs=("compute_75",), gpu_codes=("sm_75",),
                     lists_supported=True)
    assert plan("11.1", "sm_86", nvcc=other).source == "table"  # a different version is not asked


def test_toolkit_newer_than_tables_is_noted() -> None:
    p = plan("14.2", "sm_90")
    assert p.status == planner.NATIVE
    assert any("newer than lgpatch's tables" in n for n in p.notes)


def test_plan_json_round_trip() -> None:
    import json

    data = json.loads(json.dumps(plan("8.0", "sm_75", driver="580.95.05").to_json()))
    assert data["status"] == "ptx"
    assert data["flags"]["nvcc_gencode"] == ["-gencode=arch=compute_61,code=compute_61"]
    assert data["driver"]["status"] == "ok"


def test_native_range() -> None:
    assert planner.native_range("sm_75") == ("10.0", "13.5")
    assert planner.native_range("sm_61") == ("8.0", "12.9")
