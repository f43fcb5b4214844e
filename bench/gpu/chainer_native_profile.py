#!/usr/bin/env python3
"""Where a batch-1 Chainer 1.24 step spends its host time, Cython and C frames included, on the GPU machine.

    PYTHONPATH=DIR python bench/gpu/chainer_native_profile.py --py-spy PATH [--cases ...] [--seconds 4] [--out D]

DIR is a `pip install --target` folder of the patched Chainer wheel. cProfile (chainer_host_profile.py) sees
Python functions only: CuPy 1.24's kernel launch path (`ElementwiseKernel.__call__`, `_launch`, the memory pool)
is Cython, and cuDNN's calls are C, so their time lands on whichever Python function called them. py-spy's
`--native` sampling unwinds through them (the wheel's extension modules keep their symbols). Per case a child
process loops the step for --seconds under `py-spy record --native --format raw`; this script then prints the
frames holding most samples, by own samples (the leaf) and by samples anywhere in the stack, and the step's time
per call as timed under py-spy (its stops slow the process: a shares tool, not a timer; chainer_speed.py times).
Cases:

- `inspection_infer_b1`: the seed-style CNN at batch 1 (bench/gpu/_speed_workloads.py);
- `max_pool_b1`: `F.max_pooling_2d(x, 2)` on 1x32x224x224 (chainer-max-pool-kernel's launch);
- `relu_cupy_b1`: `F.relu(x, use_cudnn=False)` on 1x32x224x224 (a CuPy elementwise kernel through Chainer);
- `cupy_add_small`: `a + b` on two 1x32x56x56 CuPy arrays (CuPy's launch path alone).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ("inspection_infer_b1", "max_pool_b1", "relu_cupy_b1", "cupy_add_small")


def _make_step(case: str):
    """(step, synchronize) of one case, inputs made on the device once."""
    import chainer
    import chainer.functions as F
    import numpy
    from chainer import cuda

    sys.path.insert(0, str(HERE))
    from _speed_workloads import chainer_cases

    sync = cuda.Stream.null.synchronize
    if case == "inspection_infer_b1":
        return chainer_cases(numpy.random.RandomState(0))[case](), sync  # the case builds the model, then steps
    rng = numpy.random.RandomState(0)
    x = chainer.Variable(cuda.to_gpu(rng.randn(1, 32, 224, 224).astype("f")), volatile="on")
    if case == "max_pool_b1":
        return (lambda: F.max_pooling_2d(x, 2)), sync
    if case == "relu_cupy_b1":
        return (lambda: F.relu(x, use_cudnn=False)), sync
    a, b = (cuda.to_gpu(rng.randn(1, 32, 56, 56).astype("f")) for _ in range(2))
    return (lambda: a + b), sync


def loop(case: str, seconds: float) -> None:
    """The child: warm up, print the µs per call (timed under py-spy, whose stops slow the process: not the
    step's own time), then loop until --seconds pass."""
    step, sync = _make_step(case)
    for _ in range(50):
        step()
    sync()
    start, calls = time.perf_counter(), 0  # timed under py-spy: an upper bound
    while time.perf_counter() - start < 0.5:
        step()
        calls += 1
    sync()
    print(json.dumps({"case": case, "us_per_call": round((time.perf_counter() - start) / calls * 1e6, 1)}),
          flush=True)
    _steady(step, sync, seconds)


def _steady(step, sync, seconds: float) -> None:
    """The profiled part: only stacks through this frame are counted (not start-up, warm-up or compiles)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(100):
            step()
        sync()


def summarize(raw: Path, top: int) -> dict:
    """Own and inclusive sample counts per frame from py-spy's raw (collapsed) stacks."""
    own: collections.Counter = collections.Counter()
    anywhere: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        steady = [i for i, frame in enumerate(frames) if frame.startswith("_steady (")]
        if not steady:
            continue  # start-up, imports, warm-up and first compiles
        frames = frames[steady[0]:]
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            anywhere[frame] += int(count)

    def share(counter: collections.Counter) -> list:
        return [(round(100 * n / max(total, 1), 1), frame) for frame, n in counter.most_common(top)]

    return {"samples": total, "own_pct": share(own), "inclusive_pct": share(anywhere)}


def profile(case: str, py_spy: str, seconds: float, out: Path, top: int) -> dict:
    raw = out / f"{case}.raw.txt"
    child = [sys.executable, __file__, "--loop", case, "--seconds", str(seconds)]
    done = subprocess.run([py_spy, "record", "--native", "--rate", "500", "--format", "raw", "-o", str(raw),
                           "--", *child], capture_output=True, text=True)
    report: dict = {"case": case, "returncode": done.returncode}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            report.update(json.loads(line))
    if done.returncode != 0 or not raw.exists():
        report["error"] = done.stderr[-2000:]
        return report
    report.update(summarize(raw, top))
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy executable")
    parser.add_argument("--out", type=Path, default=Path("native-profile"))
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--loop", choices=CASES, help=argparse.SUPPRESS)  # the child's mode
    args = parser.parse_args()
    if args.loop:
        loop(args.loop, args.seconds)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    reports = [profile(case, args.py_spy, args.seconds, args.out, args.top) for case in args.cases]
    for report in reports:
        print(f"== {report['case']}: {report.get('us_per_call')} us per call under py-spy, "
              f"{report.get('samples')} samples")
        for pct, frame in report.get("own_pct", []):
            print(f"  own {pct:5.1f} %  {frame}")
        for pct, frame in report.get("inclusive_pct", []):
            print(f"  all {pct:5.1f} %  {frame}")
        if "error" in report:
            print("  error:", report["error"])
    (args.out / "summary.json").write_text(json.dumps(reports, indent=1))
    return 0 if all("error" not in r for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
