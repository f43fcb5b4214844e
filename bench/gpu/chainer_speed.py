#!/usr/bin/env python3
"""Steady-state speed of Chainer 1.24 (lgpatch's build) against torch on the same GPU, in the same run (issue 17).

Run it in a process whose sys.path has the Chainer 1.24 wheel's --target folder first (PYTHONPATH=DIR); torch
comes from the machine. Per case (bench/gpu/_speed_workloads.py): the median over --repeats of the time per
iteration of a batch of iterations (synchronize, wall clock, synchronize; the batch sized to >= --min-batch-ms
after warm-up), for Chainer and for torch, their ratio and, for memory-bound ops, the achieved bandwidth against
the device-to-device copy bandwidth measured in the same run (cudaMemcpy through CuPy 1.24). Wall clock after a
synchronize includes the Python and launch overhead a user sees, for both frameworks alike.

Start-up: fresh processes with the kernel cache already warm, time from exec to the first inference result of the
inspection CNN at batch 1 (median of --starts), Chainer and torch.

    PYTHONPATH=DIR python3 bench/gpu/chainer_speed.py --label after --json after.json
    python3 bench/gpu/chainer_speed.py --interleave before=DIR1 after=DIR2 --json bench.json
    python3 bench/gpu/chainer_speed.py --table bench.json [check-*.json] > table.md

--interleave (what chainer_speed.sh runs) keeps one worker process per build alive and alternates them batch by
batch (bench/gpu/_speed_interleave.py): median and range over --rounds per build, torch timed in both as the
control, the large-input cases (_speed_large.py), launch and call counts per iteration (_speed_launches.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

STARTUP_CHAINER = r'''
import time, numpy
import chainer, chainer.links as L, chainer.functions as F
from chainer import cuda
import _speed_workloads as w
Inspection, _ = w.chainer_models()
m = Inspection(); m.to_gpu()
y = m(chainer.Variable(cuda.to_gpu(numpy.ones((1, 3, 224, 224), "f")), volatile="on"))
y.data.get()
print("FIRST-RESULT", time.time())
'''
STARTUP_TORCH = r'''
import time, numpy, torch, torch.nn.functional as tf
import torch.nn as nn
convs = nn.ModuleList([nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1),
                       nn.Conv2d(64, 128, 3, padding=1)]).cuda()
fc = nn.Linear(128, 2).cuda()
with torch.no_grad():
    x = torch.ones((1, 3, 224, 224), device="cuda")
    for c in convs:
        x = tf.max_pool2d(tf.relu(c(x)), 2)
    y = fc(tf.avg_pool2d(x, x.shape[2]).flatten(1)).cpu()
print("FIRST-RESULT", time.time())
'''


def time_step(step: Callable[[], Any], sync: Callable[[], None], repeats: int, min_batch_ms: float) -> float:
    """Median seconds per iteration: warm-up, then `repeats` batches of n iterations between synchronizes."""
    for _ in range(3):
        step()
    sync()
    n, start = 1, time.perf_counter()
    step()
    sync()
    once = max(time.perf_counter() - start, 1e-6)
    n = max(1, min(200, int(min_batch_ms / 1000 / once)))
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        samples.append((time.perf_counter() - start) / n)
    return statistics.median(samples)


def copy_bandwidth(cupy: Any, nbytes: int = 256 * 2**20) -> float:
    """Bytes/s of a device-to-device cudaMemcpy (read + write counted), through CuPy 1.24."""
    src, dst = cupy.ones(nbytes // 4, "f"), cupy.empty(nbytes // 4, "f")
    sync = cupy.cuda.Device().synchronize
    t = time_step(lambda: dst.data.copy_from_device(src.data, nbytes), sync, 5, 50)
    return 2 * nbytes / t


def startup(code: str, env: dict[str, str], starts: int) -> float | None:
    times = []
    for _ in range(starts):
        t0 = time.time()
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("FIRST-RESULT")]
        if proc.returncode != 0 or not lines:
            sys.stderr.write(proc.stderr[-3000:])
            return None
        times.append(float(lines[0].split()[1]) - t0)
    return round(statistics.median(times), 3)


def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    import _speed_workloads as w
    import cupy
    import numpy
    here = os.path.dirname(os.path.abspath(__file__))
    report: dict[str, Any] = {"label": args.label, "cupy_file": cupy.__file__, "cases": {}, "errors": {}}
    report["split_patch"] = hasattr(cupy.core.core, "_lg_reduction_split")
    report["copy_bandwidth_GBps"] = round(copy_bandwidth(cupy) / 1e9, 1)
    c_sync = cupy.cuda.Device().synchronize
    c_cases = w.chainer_cases(numpy.random.RandomState(0))
    t_sync: Callable[[], None] | None = None
    t_cases: dict = {}
    try:  # without torch the Chainer column still comes
        import torch
        report["torch"] = torch.__version__
        t_sync, t_cases = torch.cuda.synchronize, w.torch_cases(numpy.random.RandomState(0))
    except Exception as exc:
        report["errors"]["torch"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    deadline = time.perf_counter() + args.budget_s
    for name in c_cases:
        if args.only and not any(o in name for o in args.only):
            continue
        if time.perf_counter() > deadline:
            report["errors"][name] = "skipped: time budget"
            continue
        row: dict[str, Any] = {}
        for side, factory, sync in (("chainer", c_cases[name], c_sync), ("torch", t_cases.get(name), t_sync)):
            if factory is None or sync is None:
                continue
            try:
                row[side + "_ms"] = round(1000 * time_step(factory(), sync, args.repeats, args.min_batch_ms), 4)
            except Exception as exc:  # one broken case must not hide the others
                report["errors"][f"{name}/{side}"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        if "chainer_ms" in row and "torch_ms" in row:
            row["ratio"] = round(row["chainer_ms"] / row["torch_ms"], 2)
        if name in w.BYTES:
            for side in ("chainer", "torch"):
                if side + "_ms" in row:
                    gbps = w.BYTES[name] / (row[side + "_ms"] / 1000) / 1e9
                    row[side + "_GBps"] = round(gbps, 1)
                    row[side + "_pct_copy"] = round(100 * gbps / report["copy_bandwidth_GBps"], 1)
        report["cases"][name] = row
        print(f"{name:44s} {row}", file=sys.stderr, flush=True)
    save(args.json, report)  # a start-up phase cut short by a timeout still leaves the cases
    if args.starts:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([here, env.get("PYTHONPATH", "")])
        torch_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        report["startup_s"] = {"chainer": startup(STARTUP_CHAINER, env, args.starts),
                               "torch": startup(STARTUP_TORCH, torch_env, args.starts)}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", default="chainer")
    parser.add_argument("--json", help="write the report here (else stdout)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-batch-ms", type=float, default=30.0)
    parser.add_argument("--starts", type=int, default=3, help="fresh processes per framework for start-up")
    parser.add_argument("--budget-s", type=float, default=80.0, help="stop starting new cases after this")
    parser.add_argument("--only", nargs="*", help="substrings of the case names to run")
    parser.add_argument("--table", nargs="+", metavar="JSON", help="print the before/after table of these reports")
    parser.add_argument("--interleave", nargs="+", metavar="LABEL=DIR",
                        help="time these builds (each a --target folder) in alternating rounds, one worker each")
    parser.add_argument("--rounds", type=int, default=5, help="--interleave: rounds per case (median and range)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # a worker of --interleave
    args = parser.parse_args(argv)
    if args.serve:
        from _speed_worker import serve
        return serve(args.label)
    if args.table:
        from _speed_table import render
        reports = []
        for path in args.table:
            with open(path) as f:
                reports.append(json.load(f))
        print(render(reports))
        return 0
    if args.interleave:
        from _speed_interleave import run
        builds = dict(item.split("=", 1) for item in args.interleave)
        report = run(builds, args)
    else:
        report = run_bench(args)
    if args.json:
        save(args.json, report)
    else:
        print(json.dumps(report, indent=1))
    return 0


def save(path: str | None, report: dict[str, Any]) -> None:
    if path:
        with open(path + ".tmp", "w") as f:
            f.write(json.dumps(report, indent=1) + "\n")
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
