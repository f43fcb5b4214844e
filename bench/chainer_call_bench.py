#!/usr/bin/env python3
"""What chainer-call-overhead saves per inference: Chainer 1.24's per-call Python on the CPU, as processes.

    python bench/chainer_call_bench.py                         # applies chainer-1.24 into a temp folder
    python bench/chainer_call_bench.py --tree DIR --rounds 9   # DIR: a tree `lgpatch apply chainer-1.24` made
    python bench/chainer_call_bench.py --step chainer-call-lean/call-lean   # what chainer-call-lean saves on top

The workload and worker are bench/chainer_type_check_bench.py's (the inspection-style CNN, 11 Functions, 1x3x8x8
input, inference at batch 1 on NumPy: Chainer's Python per call is the time, as on a fast GPU). Per round two fresh
processes, their order flipped every round: the tree WITHOUT the step (the same ledger with the
chainer-call-overhead commit reverted by git, and chainer-call-lean's call-lean, which edits its lines, with it:
the type-check cache on, the call path as it was; bench/_ledger_revert.py, named on stderr) and the tree WITH it
(the whole recipe). Each alternates two modes in blocks: cache_on (the recipe's default) and no_check
(Function.type_check_enable off). Prints per (process, mode) the median and range of ms per inference over the
rounds and the Python calls per inference (sys.setprofile "call" events, counted after the timing), and per mode
the medians of the per-round ratio with / without and of the difference in ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import chainer_type_check_bench as base

STEP = "chainer-call-overhead/call-fast-paths"
OTHER_STEPS = ("chainer-call-lean/call-lean",)  # its tree without the step has call-fast-paths: what it adds
MODES = ("cache_on", "no_check")
PROCESSES = {"without step": "without", "with step": "with"}


def run_rounds(trees: dict[str, Path], deps: Path | None, args: argparse.Namespace) -> dict:
    """Per (process: mode): ms per inference, one value per round; and its Python calls per inference."""
    ms: dict[str, list[float]] = {}
    calls: dict[str, float] = {}
    names = list(PROCESSES)
    for r in range(args.rounds):
        for name in names[r % 2:] + names[:r % 2]:
            out = base.measure(trees[PROCESSES[name]], deps, ",".join(MODES), args)
            for mode in MODES:
                ms.setdefault(f"{name}: {mode}", []).append(out["ms"][mode])
                calls[f"{name}: {mode}"] = out["python_calls"][mode]
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in ms.items()),
              file=sys.stderr)
    return {"ms": ms, "python_calls": calls}


def summarize(samples: dict) -> dict:
    ms, calls = samples["ms"], samples["python_calls"]
    rows = {name: {"median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v),
                   "python_calls_per_inference": calls[name]} for name, v in ms.items()}
    per_mode = {}
    for mode in MODES:
        with_, without = ms[f"with step: {mode}"], ms[f"without step: {mode}"]
        per_mode[mode] = {
            "with_over_without": statistics.median(w / o for w, o in zip(with_, without)),
            "saved_ms": statistics.median(o - w for w, o in zip(with_, without)),
            "python_calls_saved": calls[f"without step: {mode}"] - calls[f"with step: {mode}"],
        }
    return {"variants": rows, "modes": per_mode}


def print_table(summary: dict, args: argparse.Namespace, info: dict) -> None:
    print(f"# Chainer 1.24 call overhead, inspection-style CNN b1 on NumPy: {args.rounds} rounds x {args.blocks} "
          f"blocks of {args.block} inferences per mode")
    print(f"# Python {info['python']}, NumPy {info['numpy']}, {info['platform']}, {info['cpus']} CPUs, "
          f"load {info['load_average']}")
    print(f"{'process: mode':<24} {'median ms':>10} {'min':>8} {'max':>8} {'Python calls/inference':>23}")
    for name, row in summary["variants"].items():
        print(f"{name:<24} {row['median_ms']:>10.4f} {row['min_ms']:>8.4f} {row['max_ms']:>8.4f} "
              f"{row['python_calls_per_inference']:>23.1f}")
    for mode, row in summary["modes"].items():
        print(f"{mode}: with step / without step {row['with_over_without']:.3f}x, saved {row['saved_ms']:.4f} ms "
              f"and {row['python_calls_saved']:.1f} Python calls per inference")


def main(argv: list[str] | None = None) -> int:
    return base.ab_main(argv, __doc__ or "", STEP, 7, run_rounds, summarize, print_table, OTHER_STEPS)


if __name__ == "__main__":
    sys.exit(main())
