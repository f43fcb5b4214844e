"""Job count sized by memory (tools/jobs.py): min(cores, floor(available / 1.3 GiB)); the build and the GPU script
use the same function, the script through `python -m legacy_gpu_patch.tools.jobs`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from legacy_gpu_patch.build import vars as build_vars
from legacy_gpu_patch.tools import jobs
from legacy_gpu_patch.tools.jobs import CUDA_JOB_BYTES, GIB, _cgroup_cpu_limit, size_jobs

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("cores, available_gib, expected, limit", [
    (16, 128, 16, "cores"),  # the H200 machine: 16 cores, plenty of memory
    (64, 60, 46, "memory"),  # 60 / 1.3 = 46.2
    (128, 512, 128, "cores"),  # nvidia-h200-x8: 128 cores, 560 GiB
    (8, 1, 1, "memory"),  # never 0
])
def test_min_of_cores_and_floor_of_memory(cores: int, available_gib: float, expected: int, limit: str) -> None:
    choice = size_jobs(cores, int(available_gib * GIB))
    assert choice.jobs == expected and f"limited by {limit}" in choice.reason
    assert str(choice).startswith(f"MAX_JOBS={expected} (min of {cores} cores and {available_gib:.1f} GiB available "
                                  "/ 1.3 GiB per job")


def test_floor_at_the_boundary() -> None:
    assert size_jobs(64, 3 * CUDA_JOB_BYTES).jobs == 3
    assert size_jobs(64, 3 * CUDA_JOB_BYTES - 1).jobs == 2
    assert size_jobs(64, 10 * GIB, per_job=int(3.5 * GIB)).jobs == 2  # another figure per job
    unknown = size_jobs(4, None)
    assert unknown.jobs == 4 and unknown.reason == "4 cores; available memory unknown"


def test_the_build_uses_the_same_sizing() -> None:
    assert build_vars.default_jobs is jobs.default_jobs and build_vars.JOB_MEMORY_BYTES == CUDA_JOB_BYTES
    assert jobs.default_jobs(cores=16, available=int(20 * GIB)) == size_jobs(16, int(20 * GIB))


def test_a_cgroup_quota_caps_the_cores(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("400000 100000\n")
    assert _cgroup_cpu_limit(tmp_path) == 4
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert _cgroup_cpu_limit(tmp_path) is None
    assert _cgroup_cpu_limit(tmp_path / "none") is None


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    # -S: no site-packages, so only the standard library and this checkout can be imported (the tool's promise)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-S", "-m", "legacy_gpu_patch.tools.jobs", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def test_cli_prints_the_number_and_why() -> None:
    proc = _run()
    assert proc.returncode == 0, proc.stderr
    n = int(proc.stdout)
    assert 1 <= n <= jobs.cpu_count()
    assert proc.stderr.startswith(f"MAX_JOBS={n} (")
    explained = _run("--explain", "--per-job-gib", "1000000")  # a job bigger than any machine: one job
    assert explained.returncode == 0 and explained.stdout.startswith("MAX_JOBS=1 (") and "limited by memory" in \
        explained.stdout


def test_cli_refuses_a_job_without_memory() -> None:
    proc = _run("--per-job-gib", "0")
    assert proc.returncode == 2 and "--per-job-gib 0.0: must be more than 0" in proc.stderr
