"""The real PyTorch v1.5.0 tree configured twice by the recipe: the second configure writes the same build
commands, so nothing already built is rebuilt (on the H200 the second configure of an unfixed recipe made ninja
rebuild 1225 of 2096 edges; USE_ROCM's default ON, see the recipe's configure command): same ninja commands, and
FindCUDA's per-unit scripts (inputs of the CUDA edges, holding their include folders) are not rewritten.

Opt-in, slow (about a minute on 2 cores), the inputs pytorch_wheel.sh carries:
    LGPATCH_PYTORCH_CARRY   a folder with pt-shallow.tar, submodules.tar and pytorch_v1.5.0_large_model_support.patch
    LGPATCH_CUDA13_PYTHON   a Python 3.12 with numpy 2, PyYAML, typing_extensions and the CUDA 13 library wheels
                            (nvidia-cublas, -curand, -cusparse, -cufft, -cuda-nvrtc, -cudnn-cu13)
and nvcc 13, cmake and ninja on PATH.
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
from pathlib import Path

import pytest
from helpers import requires_nvcc
from helpers.pytorch_carry import carry_and_python

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.nvcc]

CARRY, PYTHON = carry_and_python("cmake", "ninja")

SMALL = ("c10", "mkdisp")  # one C++ library and one C tool: both in the directories the ROCm block used to reach


def _commands_digest(build: Path) -> str:
    out = subprocess.run(["ninja", "-C", str(build), "-t", "commands"], capture_output=True, text=True, check=True)
    return hashlib.sha256("\n".join(sorted(out.stdout.splitlines())).encode()).hexdigest()


def _nvcc_scripts(build: Path) -> dict[str, int]:
    """mtime of each CUDA unit's FindCUDA script (an input of its ninja edge, not part of the command line)."""
    return {str(p): p.stat().st_mtime_ns for p in build.rglob("*_generated_*.cu.o.*.cmake")}


def _dry_run(build: Path, *targets: str) -> str:
    return subprocess.run(["ninja", "-C", str(build), "-d", "explain", "-n", *targets], capture_output=True,
                          text=True, check=True).stdout


def _apply(tmp_path: Path, lgpatch) -> Path:
    carry = Path(CARRY)
    for name in ("pt-shallow.tar", "submodules.tar"):
        with tarfile.open(carry / name) as tar:
            tar.extractall(tmp_path, filter="tar")
    assert lgpatch("cache", "add", carry / "pytorch_v1.5.0_large_model_support.patch").code == 0
    for line in (tmp_path / "submirrors" / "urls.txt").read_text().splitlines():
        url, folder = line.split()
        res = lgpatch("cache", "add-mirror", url, tmp_path / "submirrors" / folder)
        assert res.code == 0, res.err
    wt = tmp_path / "wt"
    res = lgpatch("apply", "pytorch-lms", "--cuda", "13.0", "--arch", "sm_90", "--strict", "--offline",
                  "--source", tmp_path / "pt-shallow", "--workdir", wt)
    assert res.code == 0, res.err
    return wt


@requires_nvcc
def test_a_second_configure_leaves_built_targets_alone(tmp_path: Path, lgpatch, monkeypatch) -> None:
    monkeypatch.setenv("CMAKE_GENERATOR", "Ninja")  # as pytorch_wheel.sh builds
    wt = _apply(tmp_path, lgpatch)
    build = wt / "build"

    def configure(*targets: str) -> None:
        args = [arg for t in targets for arg in ("--target", t)]
        res = lgpatch("build", "--workdir", wt, "--arch", "sm_90", "--jobs", "4", "--python", PYTHON, *args,
                      "--report-dir", tmp_path / "report", "-q")
        assert res.code == 0, res.err

    configure("ATEN_CUDA_FILES_GEN_TARGET")  # the script's configure phase
    first = _commands_digest(build)
    configure(*SMALL)  # built, as the script's build phase builds everything
    assert "no work to do" in _dry_run(build, *SMALL)
    scripts = _nvcc_scripts(build)  # FindCUDA's per-unit scripts hold the include folders of the CUDA units
    assert len(scripts) > 100
    configure("ATEN_CUDA_FILES_GEN_TARGET")  # the configure the wheel phase runs again
    assert _commands_digest(build) == first
    assert _nvcc_scripts(build) == scripts  # not rewritten: no CUDA object is older than its script
    explain = _dry_run(build, *SMALL)
    assert "no work to do" in explain, explain[:2000]
    assert "/opt/rocm" not in (build / "build.ninja").read_text()
