#!/usr/bin/env python3
"""Python and C calls of one batch-1 inference by function (checks on and off), and a cProfile of 300.

    PYTHONPATH=DIR python3 bench/gpu/chainer_b1_calls.py > calls.txt   # DIR: the wheel's --target

The inspection-style CNN of chainer_speed.py on a 1x3x224x224 input, volatile, after 20 warm-up inferences.
sys.setprofile counts "call" (Python) and "c_call" (builtins) events of one inference, per function; the cProfile
of 300 inferences (checks on) is sorted by each function's own time. Counts say where the host's calls go; the
profile's times are inflated by the profiler and only comparable within one run.
"""

from __future__ import annotations

import collections
import cProfile
import io
import os
import pstats
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def where(code: Any) -> str:
    """file:line name, the file relative to the sys.path entry it was imported from."""
    path = code.co_filename
    for entry in sorted((e for e in sys.path if e), key=len, reverse=True):
        if path.startswith(entry.rstrip(os.sep) + os.sep):
            path = path[len(entry.rstrip(os.sep)) + 1:]
            break
    return f"{path}:{code.co_firstlineno} {code.co_name}"


def count_calls(step: Callable[[], Any]) -> collections.Counter:
    calls: collections.Counter = collections.Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls["py " + where(frame.f_code)] += 1
        elif event == "c_call":
            calls["c " + str(getattr(arg, "__qualname__", arg))] += 1

    sys.setprofile(profile)
    step()
    sys.setprofile(None)
    return calls


def main() -> int:
    import _speed_workloads as w
    import chainer
    import cupy
    import numpy
    from chainer import cuda
    inspection, _ = w.chainer_models()
    model = inspection()
    model.to_gpu()
    x = cuda.to_gpu(numpy.random.RandomState(0).randn(1, 3, 224, 224).astype("f"))

    def step() -> Any:
        return model(chainer.Variable(x, volatile="on"))

    for _ in range(20):
        step()
    cupy.cuda.Device().synchronize()
    for checks in (True, False):
        chainer.function.Function.type_check_enable = checks
        calls = count_calls(step)
        python = sum(v for k, v in calls.items() if k.startswith("py "))
        print(f"== checks {checks}: {python} python, {sum(calls.values()) - python} c")
        for name, n in sorted(calls.items(), key=lambda item: (item[0][:2], -item[1], item[0])):
            print(f"{n:4d} {name}")
    chainer.function.Function.type_check_enable = True
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(300):
        step()
    profiler.disable()
    cupy.cuda.Device().synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(45)
    print(text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
