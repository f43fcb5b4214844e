#!/usr/bin/env python3
"""Where the host time of one Chainer 1.24 workload goes: cProfile over warm iterations, on the GPU machine.

    PYTHONPATH=DIR python bench/gpu/chainer_host_profile.py                 # inspection_infer_b1
    PYTHONPATH=DIR python bench/gpu/chainer_host_profile.py --case vgg_infer_b1 --iters 300 --top 40

DIR is a `pip install --target` folder of the patched Chainer wheel (bench/gpu/chainer_speed.sh makes two). Prints
the step's wall time per iteration without the profiler (synchronized every iteration, as chainer_speed.py times a
batch-1 step), then the --top functions by own time and by cumulative time under cProfile. The profiler's own
cost inflates every Python call alike, so the table ranks where a patch would save host time; the unprofiled
figure is the one to compare with chainer_speed.py's. Stands alone: the workloads are _speed_workloads.py's.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _speed_workloads import chainer_cases


def _timed(step, synchronize, iters: int) -> float:
    start = time.perf_counter()
    for _ in range(iters):
        step()
        synchronize()
    return (time.perf_counter() - start) / iters * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="inspection_infer_b1")
    parser.add_argument("--iters", type=int, default=500)
    parser.add_argument("--top", type=int, default=35)
    args = parser.parse_args()

    import numpy
    from chainer import cuda

    cases = chainer_cases(numpy.random.RandomState(0))
    if args.case not in cases:
        parser.error(f"no case {args.case!r}; known: {', '.join(sorted(cases))}")
    step = cases[args.case]()
    synchronize = cuda.Stream.null.synchronize
    _timed(step, synchronize, 50)  # kernels compiled, cuDNN algorithms chosen, pools warm
    print(f"{args.case}: {_timed(step, synchronize, args.iters):.4f} ms per iteration without the profiler")

    profiler = cProfile.Profile()
    profiler.enable()
    _timed(step, synchronize, args.iters)
    profiler.disable()
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats(order).print_stats(args.top)
        print(f"\n--- by {order} ({args.iters} iterations) ---")
        print(text.getvalue().split("\n\n", 1)[-1].replace(str(Path.home()), "~"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
