#!/usr/bin/env python3
"""Overhead of watching a build: a command printing 2M lines, run raw vs under `lgpatch build`'s runner.

    python bench/stream_bench.py                  # 2,000,000 lines, best of 3
    python bench/stream_bench.py --lines 500000 --flush-every 1

The command is a Python program printing realistic build lines (ninja progress, warnings, a few errors).
- raw:    its output goes to a file (what `cmd > build.log` costs).
- runner: legacy_gpu_patch.build.runner.Runner runs it: output read in chunks from a pipe, written to a log file,
          passed through to a plain (non-TTY) display writing to /dev/null, and fed to the classifier.
Overhead = (runner - raw) / raw, wall time, best of --repeat runs each. Goal: <= 3%.
Stands alone: stdlib plus the legacy_gpu_patch package of this checkout.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PRODUCER = r"""
import sys
n, flush_every = int(sys.argv[1]), int(sys.argv[2])
names = ["Activation", "BinaryOps", "Copy", "Indexing", "Loss", "Reduce", "Sorting", "UnaryOps", "ErrorHandling"]
w = sys.stdout.write
for i in range(n):
    name = names[i % 9]
    r = i % 20
    if r < 14:
        w(f"[{i}/{n}] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/{name}.cpp.o\n")
    elif r < 17:
        w(f"/src/aten/src/ATen/native/{name}.h:{i % 900}:7: warning: unused variable 'tmp{i}' [-Wunused-variable]\n")
    elif r < 19:
        w(f"  {i % 900} |     auto tmp{i} = at::empty({{n, m}}, options);\n")
    elif i % 100000 == 19:
        w(f"/src/aten/src/ATen/native/{name}.cu({i % 900}): error: identifier \"cusparseScsrmm2\" is undefined\n")
    else:
        w("      |          ^~~~\n")
    if flush_every and i % flush_every == 0:
        sys.stdout.flush()
"""


def raw_run(argv: list[str], out: Path) -> float:
    t0 = time.perf_counter()
    with open(out, "wb") as fh:
        subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - t0


def runner_run(argv: list[str], log: Path) -> tuple[float, int, int, float]:
    from legacy_gpu_patch.build.runner import PlainDisplay, Runner
    from legacy_gpu_patch.classify.classifier import Classifier, load_rules

    load_rules()
    c = Classifier()
    with open(os.devnull, "wb") as screen, open(log, "wb") as fh:
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        result = Runner(c, fh, PlainDisplay(screen)).run(argv, name="producer")
        c.close()
        elapsed = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    assert result.returncode == 0, result.reason
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return elapsed, c.lines, len(c.findings()), cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--flush-every", type=int, default=0,
                    help="flush the producer's stdout every N lines (0: block-buffered, as a pipe gets it)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lgpatch-stream-") as tmp:
        work = Path(tmp)
        prog = work / "producer.py"
        prog.write_text(PRODUCER, encoding="utf-8")
        cmd = [sys.executable, str(prog), str(args.lines), str(args.flush_every)]
        raws, runs = [], []
        for _ in range(args.repeat):  # interleaved, so that a load change on the machine hits both
            raws.append(raw_run(cmd, work / "raw.log"))
            runs.append(runner_run(cmd, work / "runner.log"))
        size = (work / "raw.log").stat().st_size
        raw = min(raws)
        best = min(r[0] for r in runs)
        lines, findings = runs[0][1], runs[0][2]
        print(f"command: {args.lines} lines, {size / 1e6:.1f} MB, flush every {args.flush_every or 'buffer'}")
        print(f"raw (stdout to a file):            {raw:.3f} s  (runs: {', '.join(f'{t:.3f}' for t in raws)})")
        print(f"under the runner (log+screen+classifier): {best:.3f} s  (runs: "
              f"{', '.join(f'{r[0]:.3f}' for r in runs)}); {lines} lines, {findings} finding(s)")
        cpu = min(r[3] for r in runs)
        print(f"runner CPU (lgpatch's own process): {cpu:.2f} s = {size / 1e6 / cpu:.0f} MB/s of output handled; "
              f"it runs beside the command, on another core when there is one")
        print(f"overhead: {100 * (best - raw) / raw:+.1f}%  (wall time; {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
