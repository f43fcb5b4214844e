"""The real nvcc on this machine: target lists parsed and checked against the tables, planned PTX and cubin
compiles with archflags' -gencode flags, and the GPU proof script's CPU half (generation + both compiles)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from legacy_gpu_patch.cuda import knowledge as ck
from legacy_gpu_patch.cuda import nvcc_probe
from legacy_gpu_patch.cuda import targets as planner
from legacy_gpu_patch.cuda.archflags import flags_for

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
REPO = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.nvcc,
    pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)"),
]

KERNEL = 'extern "C" __global__ void scale(float* x, float a, int n) { int i = threadIdx.x; if (i < n) x[i] *= a; }\n'


@pytest.fixture(scope="module")
def info() -> nvcc_probe.NvccInfo:
    assert NVCC is not None
    return nvcc_probe.probe(NVCC)


def embedded(tmp_path: Path, gencode: tuple[str, ...]) -> set[tuple[str, str]]:
    """What nvcc would put in the fat binary for these flags: {("elf", "86"), ("ptx", "86")}, read from the
    fatbinary command of `nvcc --dryrun` (no cuobjdump needed)."""
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    proc = subprocess.run([NVCC, "--dryrun", "-c", *gencode, "-o", str(tmp_path / "k.o"), str(src)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(re.findall(r"image3=kind=(elf|ptx),sm=(\d+[a-z]?)", proc.stdout + proc.stderr))


def test_version_and_lists(info: nvcc_probe.NvccInfo) -> None:
    assert info.error is None
    assert info.version and ck.vtuple(info.version) >= (8, 0)
    raw = subprocess.run([NVCC, "--version"], capture_output=True, text=True, check=True).stdout
    assert f"release {info.version}" in raw
    if not info.lists_supported:
        pytest.skip(f"nvcc {info.version} has no --list-gpu-arch")
    assert all(a.startswith("compute_") for a in info.gpu_archs)
    assert all(c.startswith("sm_") for c in info.gpu_codes)
    assert {a.split("_")[1] for a in info.gpu_archs} == {c.split("_")[1] for c in info.gpu_codes}


def test_tables_agree_with_this_nvcc(info: nvcc_probe.NvccInfo) -> None:
    if not info.lists_supported or not ck.is_tabulated(info.version or "0"):
        pytest.skip("nvcc without lists, or a toolkit outside the tables")
    row = ck.toolkit(info.version or "")
    plain = {t for t in row.ptx if t.split("_")[1].isdigit()}
    assert set(info.gpu_archs) == plain
    assert set(info.gpu_codes) == {t for t in row.sass if t.split("_")[1].isdigit()}


def test_find_all_merges_aliases(info: nvcc_probe.NvccInfo) -> None:
    found = nvcc_probe.find_all()
    same = [n for n in found if n.version_text == info.version_text]
    assert len(same) == 1  # /usr/local/cuda, /usr/local/cuda-X.Y and wrappers are one toolkit
    entry = same[0]
    assert (entry.cuda_home / "bin" / "nvcc").exists()
    assert entry.include_dirs


def test_host_config_limits_of_this_toolkit(info: nvcc_probe.NvccInfo) -> None:
    limits = nvcc_probe.host_config_limits(nvcc_probe.find_all()[0].include_dirs)
    assert "gcc_max" in limits
    if ck.is_tabulated(info.version or "0") and ck.toolkit(info.version or "").gcc_max:
        assert int(limits["gcc_max"]) == ck.toolkit(info.version or "").gcc_max


def _compile(tmp_path: Path, args: list[str], out_name: str) -> Path:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    out = tmp_path / out_name
    proc = subprocess.run([NVCC, *args, "-o", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


def test_ptx_compile_for_the_planned_arch(info: nvcc_probe.NvccInfo, tmp_path: Path) -> None:
    # A GPU newer than anything this nvcc knows (seed 2's situation, shifted in time): PTX for its newest arch.
    p = planner.plan(info.version or "", 199, nvcc=info)
    assert p.status == planner.PTX
    ptx = _compile(tmp_path, ["-ptx", f"-arch={p.ptx}"], "k.ptx")
    text = ptx.read_text()
    assert f".target {p.ptx.replace('compute_', 'sm_')}" in text
    assert ".entry scale" in text
    # and the same plan's -gencode flags embed exactly that PTX, and no cubin
    _compile(tmp_path, ["-c", *p.flags.nvcc_gencode], "k.o")
    assert embedded(tmp_path, p.flags.nvcc_gencode) == {("ptx", p.ptx.split("_")[1])}


def test_cubin_compile(info: nvcc_probe.NvccInfo, tmp_path: Path) -> None:
    gpu = info.gpu_codes[-1] if info.gpu_codes else "sm_75"
    p = planner.plan(info.version or "", gpu, nvcc=info)
    assert p.status == planner.NATIVE
    cubin = _compile(tmp_path, ["-cubin", *p.flags.nvcc_gencode], "k.cubin")
    assert cubin.read_bytes()[:4] == b"\x7fELF"


def test_gencode_flags_for_sass_plus_ptx(info: nvcc_probe.NvccInfo, tmp_path: Path) -> None:
    arch = (info.gpu_codes[0] if info.gpu_codes else "sm_75").split("_")[1]
    flags = flags_for([f"sm_{arch}+ptx"])
    _compile(tmp_path, ["-c", *flags.nvcc_gencode], "k.o")
    assert embedded(tmp_path, flags.nvcc_gencode) == {("elf", arch), ("ptx", arch)}
    assert embedded(tmp_path, flags_for([f"sm_{arch}"]).nvcc_gencode) == {("elf", arch)}


def test_unknown_target_is_refused_like_seed_2(info: nvcc_probe.NvccInfo, tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    proc = subprocess.run([NVCC, "--cubin", "-arch", "sm_199", "-o", str(tmp_path / "x.cubin"), str(src)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "sm_199" in proc.stderr  # "Value 'sm_199' is not defined for option 'gpu-architecture'"


@pytest.mark.slow
def test_ptx_start_compile_only(tmp_path: Path) -> None:
    out = tmp_path / "ptx_start.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu" / "ptx_start.py"), "--compile-only", "--scale", "0.005",
         "--nvcc", NVCC or "", "--workdir", str(tmp_path / "work"), "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    data = json.loads(out.read_text())
    assert data["compile"]["cubin"]["returncode"] == 0 and data["compile"]["ptx"]["returncode"] == 0
    assert data["compile"]["ptx"]["bytes"] > data["source_bytes"]  # PTX is bulkier than the source
    ptx = (tmp_path / "work" / "module.ptx").read_text()
    assert ".target sm_80" in ptx and ".entry k0" in ptx
    assert (tmp_path / "work" / "module.cubin").read_bytes()[:4] == b"\x7fELF"
    assert "runs" not in data  # compile-only: nothing was loaded


def test_ptx_start_generator_scales() -> None:
    sys.path.insert(0, str(REPO / "bench" / "gpu"))
    try:
        import ptx_start
    finally:
        sys.path.pop(0)
    small, larger = ptx_start.generate_source(0.005), ptx_start.generate_source(0.02)
    assert small.count("__global__") < larger.count("__global__")
    assert small == ptx_start.generate_source(0.005)  # deterministic: the same module every run
    summary = ptx_start.summarize({"native": [{"start_s": 0.2}, {"start_s": 0.25}],
                                   "lgpatch": [{"start_s": 0.21}, {"start_s": 0.23}],
                                   "ptx_small": [{"start_s": 30.0}]})
    assert summary["goal"]["met"] is True and summary["goal"]["met_every_start"] is True
    assert summary["ratio_to_native"]["ptx_small"] > 100
