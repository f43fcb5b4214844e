"""bench/gpu/pytorch_wheel.sh up to its apply phase, on this machine (the real script, bash and lgpatch; no carried
sources, so apply fails and the script stops there): ARCH becomes the stored targets, TORCH_CUDA_ARCH_LIST and the
wheel label, JOBS is sized by memory unless given, and a work folder is never reused for other targets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.integration

SCRIPT = REPO / "bench" / "gpu" / "pytorch_wheel.sh"


def _run(tmp_path: Path, work: Path, **env: str) -> subprocess.CompletedProcess[str]:
    carry = tmp_path / "carry"  # nothing carried: the apply phase fails right away
    carry.mkdir(exist_ok=True)
    full = {**os.environ, "PYTHON": sys.executable, "CARRY": str(carry), "PT_WORK": str(work), **env}
    for name in ("ARCH", "JOBS", "PTX_JIT"):  # the script's defaults unless the test sets them
        if name not in env:
            full.pop(name, None)
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=full, timeout=300)


def _summary(work: Path) -> str:
    return (work / "logs" / "summary.txt").read_text()


def test_a_list_of_targets_is_derived_once_and_the_work_folder_remembers_it(tmp_path: Path) -> None:
    work = tmp_path / "work"
    proc = _run(tmp_path, work, ARCH="sm_90+PTX,sm_86,sm_80,sm_89")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # apply: no sources carried
    summary = _summary(work)
    assert ("targets: sm_80,sm_86,sm_89,sm_90+ptx (TORCH_CUDA_ARCH_LIST=8.0;8.6;8.9;9.0+PTX, wheel label "
            "sm80.sm86.sm89.sm90ptx); jobs: ") in summary
    assert "min of" in summary and "/ 1.3 GiB per job" in summary  # sized by tools/jobs.py
    assert "apply: rc=" in summary
    assert (work / "arch.txt").read_text() == "sm_80,sm_86,sm_89,sm_90+ptx\n"
    again = _run(tmp_path, work)  # ARCH unset: sm_90, not what this folder was built for
    assert again.returncode == 2
    assert "ARCH=sm_90, but " + str(work) + " was built for sm_80,sm_86,sm_89,sm_90+ptx" in _summary(work)


def test_the_default_is_the_single_arch_wheel_and_jobs_can_be_given(tmp_path: Path) -> None:
    work = tmp_path / "single"
    _run(tmp_path, work, JOBS="3")
    assert "targets: sm_90 (TORCH_CUDA_ARCH_LIST=9.0, wheel label sm90); jobs: 3 (JOBS given)" in _summary(work)


def test_a_bad_arch_stops_before_anything_is_made(tmp_path: Path) -> None:
    work = tmp_path / "bad"
    proc = _run(tmp_path, work, ARCH="sm_80,sm_9x")
    assert proc.returncode == 2 and "ARCH=sm_80,sm_9x: 'sm_9x' is not a GPU architecture" in proc.stderr
    assert not work.exists()
