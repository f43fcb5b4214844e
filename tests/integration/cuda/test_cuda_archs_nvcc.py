"""tools/cuda_archs.py on real binaries: a tiny kernel compiled by the real nvcc into shared libraries for several
-gencode targets (SASS and PTX), read by the real cuobjdump; every architecture reported, the missing ones named."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from legacy_gpu_patch.tools.cuda_archs import ToolMissing, find_cuobjdump, parse_expected

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
KERNEL = """\
__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" void launch_scale(float* x) { scale<<<1, 32>>>(x); }
"""


def _cuobjdump() -> str | None:
    try:
        return find_cuobjdump()
    except ToolMissing:
        return None


needs_tools = pytest.mark.skipif(NVCC is None or _cuobjdump() is None,
                                 reason="needs nvcc and cuobjdump (pip install nvidia-cuda-cuobjdump)")


def _compile(folder: Path, name: str, *gencodes: str) -> Path:
    src = folder / "scale.cu"
    src.write_text(KERNEL)
    lib = folder / f"lib{name}.so"
    argv = [str(NVCC), "-shared", "-Xcompiler", "-fPIC", "-o", str(lib), str(src),
            *[f"-gencode=arch=compute_{g.split(':')[0]},code={g.split(':')[1]}" for g in gencodes]]
    subprocess.run(argv, check=True, capture_output=True, timeout=300)
    return lib


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("cuda_archs")
    return {
        # the multi-architecture wheel's shape, one arch short: sm_80, sm_86, sm_90 cubins + compute_90 PTX
        "multi": _compile(folder, "multi", "80:sm_80", "86:sm_86", "90:sm_90", "90:compute_90"),
        "sass_only": _compile(folder, "sassonly", "80:sm_80", "90:sm_90"),
        "ptx_only": _compile(folder, "ptxonly", "90:compute_90"),
    }


def _run(*args: str | Path, env: dict[str, str] | None = None,
         isolated: bool = False) -> subprocess.CompletedProcess[str]:
    # isolated: -S, so only the standard library and this checkout can be imported (and no site-packages wheels)
    flags = ["-S"] if isolated else []
    return subprocess.run([sys.executable, *flags, "-m", "legacy_gpu_patch.tools.cuda_archs", *map(str, args)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


@needs_tools
def test_every_sass_arch_and_the_ptx_are_reported_and_all_expected_present(libs: dict[str, Path]) -> None:
    proc = _run(libs["multi"], "--expect", "sm_80,sm_86,sm_90+ptx")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith(f"{libs['multi']}: SASS sm_80 (") and "sm_86 (" in line and "sm_90 (" in line
    assert line.endswith("PTX compute_90 (1)")
    assert "every expected architecture is present (sm_80, sm_86, sm_90, compute_90)" in proc.stderr
    # TORCH_CUDA_ARCH_LIST's spelling, and --expect-ptx with an sm_ name, mean the same
    assert _run(libs["multi"], "--expect", "8.0;8.6;9.0", "--expect-ptx", "sm_90").returncode == 0


@needs_tools
def test_a_missing_sass_arch_is_named_and_fails(libs: dict[str, Path]) -> None:
    proc = _run(libs["multi"], "--expect", "sm_80,sm_86,sm_89,sm_90", "--expect-ptx", "sm_90")
    assert proc.returncode == 9
    assert proc.stderr.strip() == f"cuda_archs: {libs['multi']}: missing SASS sm_89"
    assert "SASS sm_80" in proc.stdout  # what is there is still reported


@needs_tools
def test_missing_ptx_is_named_and_json_tells_it_all(libs: dict[str, Path]) -> None:
    proc = _run(libs["sass_only"], libs["ptx_only"], "--expect", "sm_90+ptx", "--json")
    assert proc.returncode == 9
    doc = json.loads(proc.stdout)
    assert doc["ok"] is False and doc["expected"] == {"sass": ["sm_90"], "ptx": ["compute_90"]}
    assert set(doc["files"][str(libs["sass_only"])]["sass"]) == {"sm_80", "sm_90"}
    assert doc["files"][str(libs["sass_only"])]["ptx"] == {}
    assert doc["files"][str(libs["ptx_only"])] == {"sass": {}, "ptx": {"compute_90": 1}}
    assert doc["missing"] == {str(libs["sass_only"]): ["PTX compute_90"], str(libs["ptx_only"]): ["SASS sm_90"]}


@needs_tools
def test_a_binary_without_device_code(tmp_path: Path) -> None:
    host_only = tmp_path / "true"
    shutil.copy("/bin/true", host_only)
    assert _run(host_only).stdout.strip() == f"{host_only}: no device code"
    proc = _run(host_only, "--expect", "sm_90")
    assert proc.returncode == 9 and "missing SASS sm_90" in proc.stderr
    garbage = tmp_path / "libbroken.so"
    garbage.write_text("\n")  # cuobjdump: "Invalid fatbin header" (a truncated ELF is only "no device code")
    broken = _run(garbage)
    assert broken.returncode == 9 and f"cuobjdump --list-elf {garbage}: rc " in broken.stderr


def test_cuobjdump_missing_is_a_clear_tool_error(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--cuobjdump", tmp_path / "nope")
    assert proc.returncode == 14 and proc.stderr.strip() == f"cuda_archs: cuobjdump not found at {tmp_path / 'nope'}"
    if Path("/usr/local/cuda/bin/cuobjdump").exists():
        pytest.skip("this machine's toolkit has cuobjdump: it cannot be made absent")
    env = {"PATH": "/usr/bin:/bin", "CUDA_HOME": str(tmp_path), "CUDA_PATH": str(tmp_path), "CUOBJDUMP": ""}
    proc = _run(tmp_path / "lib.so", env=env, isolated=True)
    assert proc.returncode == 14
    assert "cuobjdump not found (looked on PATH" in proc.stderr and "pip install nvidia-cuda-cuobjdump" in proc.stderr


@needs_tools
def test_a_missing_file_and_a_bad_expectation(tmp_path: Path) -> None:
    proc = _run(tmp_path / "libnone.so")
    assert proc.returncode == 14 and proc.stderr.strip() == f"cuda_archs: {tmp_path / 'libnone.so'}: no such file"
    bad = _run(tmp_path / "libnone.so", "--expect", "sm_9x")
    assert bad.returncode == 2 and "'sm_9x' is not a GPU architecture" in bad.stderr


def test_expectations_in_every_spelling() -> None:
    assert parse_expected(["sm_80,sm_86", "sm_89 sm_90+ptx"]) == ({"sm_80", "sm_86", "sm_89", "sm_90"},
                                                                  {"compute_90"})
    assert parse_expected(["8.0;9.0+PTX", "compute_75", "sm_90a"]) == ({"sm_80", "sm_90", "sm_90a"},
                                                                       {"compute_75", "compute_90"})
    assert parse_expected(["sm_90", "compute_100f"], ptx_only=True) == (set(), {"compute_90", "compute_100f"})
    with pytest.raises(ValueError, match="is not a GPU architecture"):
        parse_expected(["86"])
