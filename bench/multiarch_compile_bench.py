"""What a multi-architecture build costs per CUDA unit: one unit compiled for sm_90 (the baseline, this run) and for
sm_80,sm_86,sm_89,sm_90+ptx (the users' wheel), with the real nvcc; wall time ratio and peak memory of a job.

    python bench/multiarch_compile_bench.py [--unit FILE.cu] [--repeat 2] [--nvcc PATH] [-- EXTRA NVCC FLAGS]

Without --unit it compiles a generated unit in the shape of PyTorch's heavy ones (thrust/CUB sort, scan and reduce
templates for several element types), so the figure exists on a machine without the PyTorch tree; with --unit (and
the build's flags after --) it times a real one. Peak memory: the largest resident set of any process nvcc ran
(cicc, ptxas, cc1plus: one compile job's peak, what tools/jobs.py's 1.3 GiB per job is about), from getrusage of a
fresh child interpreter per compile. Prints one line per configuration (best of --repeat) and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from legacy_gpu_patch.cuda.archflags import flags_for

UNIT = """\
#include <thrust/device_vector.h>
#include <thrust/sort.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <cub/cub.cuh>
template <typename T> void heavy(thrust::device_vector<T>& v) {
  thrust::sort(v.begin(), v.end());
  thrust::inclusive_scan(v.begin(), v.end(), v.begin());
  T s = thrust::reduce(v.begin(), v.end());
  (void)s;
}
template void heavy<float>(thrust::device_vector<float>&);
template void heavy<double>(thrust::device_vector<double>&);
template void heavy<int>(thrust::device_vector<int>&);
template void heavy<long long>(thrust::device_vector<long long>&);
"""

# A fresh interpreter per compile, so RUSAGE_CHILDREN's ru_maxrss is this compile's largest process (KiB on Linux).
_MEASURE = """\
import resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
print(rc, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def compile_once(nvcc: str, unit: Path, out: Path, gencode: tuple[str, ...], extra: list[str]) -> tuple[float, int]:
    argv = [nvcc, "-c", str(unit), "-o", str(out), "-O3", "-std=c++17", *gencode, *extra]
    proc = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, check=True)
    rc, seconds, maxrss_kib = proc.stdout.split()
    if rc != "0":
        raise SystemExit(f"nvcc failed (rc {rc}): {' '.join(argv)}")
    return float(seconds), int(maxrss_kib) * 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unit", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("extra", nargs="*", help="extra nvcc flags (after --)")
    args = ap.parse_args()
    if not os.access(args.nvcc, os.X_OK):
        raise SystemExit(f"no nvcc at {args.nvcc}")
    configs = {"sm_90": flags_for("sm_90"), "sm_80,sm_86,sm_89,sm_90+ptx": flags_for("sm_80,sm_86,sm_89,sm_90+ptx")}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        unit = args.unit or Path(tmp) / "heavy.cu"
        if args.unit is None:
            unit.write_text(UNIT)
        for name, flags in configs.items():
            runs = [compile_once(args.nvcc, unit, Path(tmp) / "out.o", flags.nvcc_gencode, args.extra)
                    for _ in range(args.repeat)]
            best = min(s for s, _ in runs)
            peak = max(m for _, m in runs)
            results[name] = {"seconds": round(best, 2), "peak_job_bytes": peak}
            print(f"{name:30s} best of {args.repeat}: {best:7.2f} s   peak job memory {peak / 2**30:.2f} GiB")
    single, multi = results["sm_90"], results["sm_80,sm_86,sm_89,sm_90+ptx"]
    ratio = multi["seconds"] / single["seconds"]
    memory = multi["peak_job_bytes"] / single["peak_job_bytes"]
    print(f"ratio (4 SASS + PTX / sm_90): {ratio:.2f}x time, {memory:.2f}x peak job memory")
    if args.json:
        args.json.write_text(json.dumps({"unit": str(args.unit or "generated"), "nvcc": args.nvcc,
                                         "results": results, "ratio": round(ratio, 2)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
