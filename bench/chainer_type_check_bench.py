#!/usr/bin/env python3
"""What chainer-type-check-cache saves per inference: Chainer 1.24's forward type checks on the CPU, as processes.

    python bench/chainer_type_check_bench.py                         # applies chainer-1.24 into a temp folder
    python bench/chainer_type_check_bench.py --tree DIR --rounds 7   # DIR: a tree `lgpatch apply chainer-1.24` made

The workload is the inspection-style CNN of bench/gpu/_speed_workloads.py (three conv/ReLU/max-pool stages, a
global average pool, a linear layer: 11 Functions) with 8 channels on a 1x3x8x8 input, inference (volatile) at
batch 1, NumPy arrays: each Function's arithmetic is a few microseconds, so the time is Chainer's Python per call,
as it is on a fast GPU. Chainer runs from the work tree itself (its Python code; CuPy is neither built nor needed).

Per round two fresh processes, their order flipped every round: the tree WITHOUT the step (the same ledger
with the chainer-type-check-cache commit reverted by git: Chainer as it was; the later steps that edit its lines,
chainer-call-overhead's and chainer-call-lean's, are reverted with it and named on stderr: bench/_ledger_revert.py)
and the tree WITH it (the whole recipe). Each process alternates its modes in blocks of --block inferences (a busy
moment of the shared machine hits all modes alike) and reports each mode's median block:
  without step   check (as it was), no_check (Function.type_check_enable off, what CHAINER_TYPE_CHECK=0 does)
  with step      cache_on (the default), cache_off (Function.type_check_cache_enable off, what
                 CHAINER_TYPE_CHECK_CACHE=0 does: checks on every call), no_check
Also how many checks ran per inference in each mode (type_check.get_types calls, counted after the timing), and
how many Python functions were called per inference (sys.setprofile "call" events; bench/chainer_call_bench.py).
Prints per (process, mode) the median and range over the rounds, and medians of per-round ratios: with step /
without step, cache on / cache off (one process: the cleanest measure), the two processes' no_check floors (a
control: 1.00 when the host was alike for both), and the type-check time per inference (mode minus its floor).

Needs: this checkout's legacy_gpu_patch (for `lgpatch apply` when --tree is not given; the sdist from its cache
or PyPI), git, NumPy, and six/filelock (this interpreter's, --deps DIR, or installed by pip into the temp folder).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import _ledger_revert

STEP = "chainer-type-check-cache/forward-check-cache"

WORKER = r"""
import json, sys, time
import numpy
import chainer
import chainer.functions as F
import chainer.links as L
from chainer.utils import type_check


class Inspection(chainer.Chain):
    def __init__(self, width):
        super(Inspection, self).__init__(
            c1=L.Convolution2D(3, width, 3, pad=1), c2=L.Convolution2D(width, width, 3, pad=1),
            c3=L.Convolution2D(width, width, 3, pad=1), fc=L.Linear(width, 2))

    def __call__(self, x):
        for conv in (self.c1, self.c2, self.c3):
            x = F.max_pooling_2d(F.relu(conv(x)), 2)
        x = F.average_pooling_2d(x, x.shape[2])
        return self.fc(x)


block, blocks, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
modes = sys.argv[4].split(',')
Function = chainer.Function
SETTINGS = {'check': {}, 'cache_on': {'type_check_cache_enable': True},
            'cache_off': {'type_check_cache_enable': False}, 'no_check': {'type_check_enable': False}}
defaults = dict((name, getattr(Function, name, None)) for name in ('type_check_enable', 'type_check_cache_enable'))
numpy.random.seed(0)
model = Inspection(8)
x = numpy.random.rand(1, 3, 8, 8).astype('f')


def use(mode):
    for name, value in defaults.items():
        setattr(Function, name, value)
    for name, value in SETTINGS[mode].items():
        setattr(Function, name, value)


def infer(n):
    for _ in range(n):
        model(chainer.Variable(x, volatile='on'))


for mode in modes:
    use(mode)
    infer(warmup)
times = dict((mode, []) for mode in modes)
for i in range(blocks):
    for mode in modes[i % len(modes):] + modes[:i % len(modes)]:
        use(mode)
        start = time.perf_counter()
        infer(block)
        times[mode].append((time.perf_counter() - start) / block * 1e3)
calls = [0]
real = type_check.get_types


def counting(*args):
    calls[0] += 1
    return real(*args)


type_check.get_types = counting
checks = {}
for mode in modes:
    use(mode)
    calls[0] = 0
    infer(10)
    checks[mode] = calls[0] / 10.0
python_calls = {}


def count_call(frame, event, arg):
    if event == 'call':
        calls[0] += 1


for mode in modes:
    use(mode)
    calls[0] = 0
    sys.setprofile(count_call)
    infer(10)
    sys.setprofile(None)
    python_calls[mode] = calls[0] / 10.0
print(json.dumps({"ms": dict((m, sorted(t)[len(t) // 2]) for m, t in times.items()), "checks": checks,
                  "python_calls": python_calls}))
"""


def _run(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd)


def _fail(what: str, proc: subprocess.CompletedProcess[str]) -> None:
    sys.exit(f"chainer_type_check_bench: {what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def prepare_trees(tree: Path | None, work: Path, step: str = STEP) -> tuple[Path, Path]:
    """(with step, without step): `tree` or a fresh `lgpatch apply`, and a clone with `step`'s commit reverted."""
    if tree is None:
        tree = work / "tree"
        proc = _run([sys.executable, "-m", "legacy_gpu_patch", "apply", "chainer-1.24", "--strict", "-C", str(tree)])
        if proc.returncode != 0:
            _fail("lgpatch apply chainer-1.24", proc)
    found = _run(["git", "-C", str(tree), "log", "--format=%H", "--grep", f"lgpatch: {step}$"])
    commits = found.stdout.split()
    if found.returncode != 0 or len(commits) != 1:
        sys.exit(f"chainer_type_check_bench: {tree} has no ledger commit for {step} (apply chainer-1.24 with a "
                 "CUDA >= 9.0 parameter, the default)")
    without = work / "without-step"
    proc = _run(["git", "clone", "-q", str(tree), str(without)])
    if proc.returncode != 0:
        _fail("git clone", proc)
    try:
        reverted = _ledger_revert.revert_step(without, commits[0])
    except _ledger_revert.RevertError as error:
        sys.exit(f"chainer_type_check_bench: {error}")
    if len(reverted) > 1:  # what "without step" means in this run: said once, beside the progress lines
        print(f"without step: the tree without {', '.join(reverted)} (later steps edit {step}'s lines)",
              file=sys.stderr)
    return tree, without


def prepare_deps(deps: Path | None, work: Path) -> Path | None:
    if deps is not None or _run([sys.executable, "-c", "import six, filelock"]).returncode == 0:
        return deps
    target = work / "deps"
    proc = _run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target",
                 str(target), "six", "filelock"])
    if proc.returncode != 0:
        _fail("pip install six filelock", proc)
    return target


# Per process, the modes its blocks alternate between: the tree without the step as Chainer was, and its floor;
# the tree with it: the cache on, off (the patch's switch: checks as before) and the floor again, a control
# for how the host differed between the two processes.
PROCESSES = {"without step": ("without", "check,no_check"), "with step": ("with", "cache_on,cache_off,no_check")}


def measure(tree: Path, deps: Path | None, modes: str, args: argparse.Namespace) -> dict:
    child = {k: v for k, v in os.environ.items() if not k.startswith("CHAINER_") and k != "PYTHONPATH"}
    child.update(PYTHONPATH=os.pathsep.join([str(tree), *([str(deps)] if deps else [])]))
    argv = [sys.executable, "-c", WORKER, str(args.block), str(args.blocks), str(args.warmup), modes]
    proc = _run(argv, env=child, cwd=tree.parent)
    if proc.returncode != 0:
        _fail(f"the worker on {tree}", proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_rounds(trees: dict[str, Path], deps: Path | None, args: argparse.Namespace) -> dict[str, list[float]]:
    """ms per inference of every (process, mode), one value per round (the median of that process's blocks)."""
    samples: dict[str, list[float]] = {}
    checks: dict[str, float] = {}
    names = list(PROCESSES)
    for r in range(args.rounds):
        for name in names[r % 2:] + names[:r % 2]:
            tree_key, modes = PROCESSES[name]
            out = measure(trees[tree_key], deps, modes, args)
            for mode, ms in out["ms"].items():
                samples.setdefault(f"{name}: {mode}", []).append(ms)
                checks[f"{name}: {mode}"] = out["checks"][mode]
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in samples.items()),
              file=sys.stderr)
    samples["checks"] = [checks[k] for k in samples]  # per variant, in the same order
    return samples


def summarize(samples: dict[str, list[float]]) -> dict:
    checks = samples.pop("checks")
    rows = {name: {"median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v),
                   "checks_per_inference": c} for (name, v), c in zip(samples.items(), checks)}

    def ratio(num: str, den: str) -> float:
        return statistics.median(n / d for n, d in zip(samples[num], samples[den]))

    def diff(minuend: str, subtrahend: str) -> float:
        return statistics.median(m - s for m, s in zip(samples[minuend], samples[subtrahend]))

    return {
        "variants": rows,
        "with_over_without": ratio("with step: cache_on", "without step: check"),
        "cache_on_over_cache_off": ratio("with step: cache_on", "with step: cache_off"),
        "floor_control": ratio("with step: no_check", "without step: no_check"),
        "type_check_ms_without_step": diff("without step: check", "without step: no_check"),
        "type_check_ms_cache_off": diff("with step: cache_off", "with step: no_check"),
        "type_check_ms_cache_on": diff("with step: cache_on", "with step: no_check"),
    }


def machine() -> dict:
    import numpy

    return {"python": platform.python_version(), "numpy": numpy.__version__, "platform": platform.platform(),
            "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}


def print_table(summary: dict, args: argparse.Namespace, info: dict) -> None:
    print(f"# Chainer 1.24 type checks, inspection-style CNN b1 on NumPy: {args.rounds} rounds x {args.blocks} "
          f"blocks of {args.block} inferences per mode")
    print(f"# Python {info['python']}, NumPy {info['numpy']}, {info['platform']}, {info['cpus']} CPUs, "
          f"load {info['load_average']}")
    print(f"{'process: mode':<26} {'median ms':>10} {'min':>8} {'max':>8} {'checks/inference':>17}")
    for name, row in summary["variants"].items():
        print(f"{name:<26} {row['median_ms']:>10.4f} {row['min_ms']:>8.4f} {row['max_ms']:>8.4f} "
              f"{row['checks_per_inference']:>17.1f}")
    print(f"with step / without step: {summary['with_over_without']:.3f}x; cache on / cache off (one process): "
          f"{summary['cache_on_over_cache_off']:.3f}x; floor control (no check, with / without): "
          f"{summary['floor_control']:.3f}x")
    print(f"type checks per inference: {summary['type_check_ms_without_step']:.4f} ms without the step, "
          f"{summary['type_check_ms_cache_off']:.4f} ms cache off, {summary['type_check_ms_cache_on']:.4f} ms "
          "cache on")


def ab_main(argv: list[str] | None, doc: str, step: str, default_rounds: int, run: Callable[..., dict],
            summarize_samples: Callable[[dict], dict], table: Callable[[dict, argparse.Namespace, dict], None],
            other_steps: tuple[str, ...] = ()) -> int:
    """The A/B command line both Chainer CPU benches share: trees with and without `step` (or --step, one of
    `other_steps`), rounds, table or JSON."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if other_steps:
        parser.add_argument("--step", default=step, choices=(step, *other_steps),
                            help=f"the step the tree without it lacks (default {step})")
    parser.add_argument("--tree", type=Path, help="a work tree of `lgpatch apply chainer-1.24` (default: apply one)")
    parser.add_argument("--deps", type=Path, help="folder holding six and filelock (default: this Python's or pip)")
    parser.add_argument("--rounds", type=int, default=default_rounds,
                        help=f"processes per tree, alternating (default {default_rounds})")
    parser.add_argument("--blocks", type=int, default=30, help="timed blocks per mode in a process (default 30)")
    parser.add_argument("--block", type=int, default=100, help="inferences per block (default 100)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed inferences per mode first (default 200)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of the table")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="chainer-ab-bench-"))
    try:
        tree, without = prepare_trees(args.tree.resolve() if args.tree else None, work, getattr(args, "step", step))
        deps = prepare_deps(args.deps.resolve() if args.deps else None, work)
        summary = summarize_samples(run({"with": tree, "without": without}, deps, args))
        info = machine()
        if args.json:
            print(json.dumps({"machine": info, **summary}, indent=2))
        else:
            table(summary, args, info)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return ab_main(argv, __doc__ or "", STEP, 5, run_rounds, summarize, print_table)


if __name__ == "__main__":
    sys.exit(main())
