"""How many compile jobs this machine can run at once: min(cores, floor(available memory / memory per job)).

    python -m legacy_gpu_patch.tools.jobs            prints the number (stdout) and why (stderr)
    python -m legacy_gpu_patch.tools.jobs --explain  prints "MAX_JOBS=N (why)" on stdout

`lgpatch build` takes its default MAX_JOBS from `default_jobs` (build/vars.py); shell scripts that drive a build
themselves (bench/gpu/pytorch_wheel.sh runs ninja directly) call this module, so both size a build the same way.

Memory per job: 1.3 GiB, what one CUDA compile job of PyTorch 1.5 (nvcc: cicc + ptxas + the host cc1plus) was
measured to take at its peak (issue 18: ~1.3 GB). A job that runs out shows as an `oom-killed` finding
("Killed signal terminated program cc1plus"); `--jobs N` or `--per-job-gib` overrides the estimate.

Cores are the CPUs this process may run on (affinity), capped by a cgroup v2 CPU quota; available memory is
MemAvailable from /proc/meminfo, capped by a cgroup v2 memory limit (containers, CI runners).
Standard library only: build commands run it with the build's own interpreter.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

GIB = 1024**3
CUDA_JOB_BYTES = int(1.3 * GIB)  # peak of one CUDA compile job, measured (see the module's docstring)


def _cgroup_cpu_limit(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """CPUs allowed by a cgroup v2 quota (containers, CI runners), or None."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, int(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def cpu_count() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    limit = _cgroup_cpu_limit()
    return max(1, min(n, limit) if limit else n)


def mem_available(meminfo: Path = Path("/proc/meminfo"), cgroup_root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes available for new work: MemAvailable, capped by a cgroup v2 memory limit; None if unknown."""
    avail = None
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        avail = None
    try:
        limit = (cgroup_root / "memory.max").read_text().strip()
        if limit != "max":
            used = int((cgroup_root / "memory.current").read_text().strip())
            room = max(0, int(limit) - used)
            avail = room if avail is None else min(avail, room)
    except (OSError, ValueError):
        pass
    return avail


@dataclass(frozen=True)
class JobsChoice:
    jobs: int
    cores: int
    available_bytes: int | None
    reason: str  # printed: why this number

    def __str__(self) -> str:
        return f"MAX_JOBS={self.jobs} ({self.reason})"


def size_jobs(cores: int, available: int | None, per_job: int = CUDA_JOB_BYTES) -> JobsChoice:
    """min(cores, floor(available / per_job)), at least 1; all cores when the memory is unknown."""
    cores = max(1, cores)
    if available is None:
        return JobsChoice(cores, cores, None, f"{cores} cores; available memory unknown")
    by_mem = max(1, int(available // max(1, per_job)))
    jobs = min(cores, by_mem)
    limit = "memory" if by_mem < cores else "cores"
    return JobsChoice(
        jobs, cores, available,
        f"min of {cores} cores and {available / GIB:.1f} GiB available / {per_job / GIB:.1f} GiB per job "
        f"= {by_mem}; limited by {limit}",
    )


def default_jobs(cores: int | None = None, available: int | None = -1, per_job: int = CUDA_JOB_BYTES) -> JobsChoice:
    """size_jobs for this machine: `cores=None` counts them, `available=-1` reads /proc/meminfo and the cgroup."""
    return size_jobs(cpu_count() if cores is None else cores, mem_available() if available == -1 else available,
                     per_job)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m legacy_gpu_patch.tools.jobs", description=__doc__.split("\n")[0])
    parser.add_argument("--per-job-gib", type=float, default=CUDA_JOB_BYTES / GIB,
                        help="memory one compile job takes at its peak (default: %(default).1f, measured)")
    parser.add_argument("--explain", action="store_true", help='print "MAX_JOBS=N (why)" instead of N')
    args = parser.parse_args(argv)
    if not args.per_job_gib > 0:
        parser.error(f"--per-job-gib {args.per_job_gib}: must be more than 0")
    choice = default_jobs(per_job=int(args.per_job_gib * GIB))
    if args.explain:
        print(choice)
    else:
        print(choice.jobs)
        print(choice, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
