"""A multi-architecture build on each GPU: which cubin the driver loads, when it falls back to the PTX JIT, and when
nothing runs; and the doctor's recipe check for a work tree whose arch parameter is a list."""

from __future__ import annotations

import pytest

from legacy_gpu_patch.config.recipe import SearchPath, find_recipe
from legacy_gpu_patch.cuda import jit_cache, targets
from legacy_gpu_patch.cuda.archflags import flags_for
from legacy_gpu_patch.cuda.coverage import coverage
from legacy_gpu_patch.cuda.findings import DoctorReport
from legacy_gpu_patch.cuda.fit import check_recipe
from legacy_gpu_patch.cuda.machine import Gpu, GpuScan

WHEEL = flags_for("sm_80,sm_86,sm_89,sm_90+ptx")


@pytest.mark.parametrize("gpu, status, target", [
    ("sm_90", targets.NATIVE, "sm_90"),  # the H200 runs the wheel's sm_90 cubins
    ("sm_80", targets.NATIVE, "sm_80"),
    ("sm_87", targets.SASS_COMPATIBLE, "sm_86"),  # same major, higher minor: the newest cubin it can run
    ("sm_89", targets.NATIVE, "sm_89"),
    ("sm_100", targets.PTX, "compute_90"),  # newer than every cubin: the embedded PTX, JIT-compiled
    ("sm_120", targets.PTX, "compute_90"),
    ("sm_75", targets.IMPOSSIBLE, None),  # older than every target: PTX never runs on an older GPU
])
def test_the_wheel_on_each_gpu(gpu: str, status: str, target: str | None) -> None:
    runs = coverage(WHEEL, gpu)
    assert (runs.status, runs.target) == (status, target)
    assert runs.needs_jit is (status == targets.PTX)


def test_without_ptx_a_newer_gpu_gets_nothing_and_arch_specific_code_only_its_own_gpu() -> None:
    assert coverage(flags_for("sm_80,sm_86,sm_89,sm_90"), "sm_100").status == targets.IMPOSSIBLE
    assert coverage(flags_for("sm_90a"), "sm_90").target == "sm_90a"
    assert coverage(flags_for("sm_90a+ptx"), "sm_100").status == targets.IMPOSSIBLE
    assert coverage(flags_for("compute_75"), "sm_86").target == "compute_75"


def _report(*ccs: str) -> DoctorReport:
    gpus = tuple(Gpu(i, f"gpu{i}", cc, None, None) for i, cc in enumerate(ccs))
    return DoctorReport(gpus=GpuScan("test", gpus, driver="580.159.04", driver_cuda="13.0"), nvccs=[],
                        compilers=[], cmake={}, cudnn=[], python={}, numpy=None, jit=jit_cache.status({}))


def test_the_doctor_checks_a_list_against_every_gpu() -> None:
    recipe = find_recipe("pytorch-lms", SearchPath.from_options())
    params = {"cuda": "13.0", "arch": "sm_80,sm_86,sm_89,sm_90+ptx"}
    check = check_recipe(recipe, params, _report("9.0", "10.0", "7.5"), {})
    arch_problems = [p for p in check["problems"] if p.startswith("arch=")]
    assert arch_problems == ["arch=sm_80,sm_86,sm_89,sm_90+ptx builds code that does not run on GPU 2 gpu2 (sm_75); "
                             "with CUDA 13.0 pass --param arch=sm_75"]
    assert [w for w in check["warnings"] if "PTX JIT" in w] == [
        "arch=sm_80,sm_86,sm_89,sm_90+ptx runs on GPU 1 only through PTX JIT; set up the JIT cache "
        "(lgpatch jit-cache env)"]
    single = check_recipe(recipe, {"cuda": "13.0", "arch": "sm_90"}, _report("9.0"), {})
    assert not [p for p in single["problems"] if p.startswith("arch=")] and not single["warnings"]
