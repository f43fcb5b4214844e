#!/usr/bin/env python3
"""Is the batch-1 inference host-bound, and what do type checks and GC cost? Chainer 1.24 beside torch, one process.

    PYTHONPATH=DIR python3 bench/gpu/chainer_b1_host.py [--no-torch] [--rounds 9]   # DIR: the wheel's --target

The inspection-style CNN of chainer_speed.py (_speed_workloads), input 1x3x224x224, volatile. Per round, in turn:
  batch     40 inferences, then one synchronize: time per inference (what chainer_speed.py's bench times);
  host      8 inferences after an idle GPU, no synchronize: the host's time alone (the GPU queue never fills);
  latency   one inference and a synchronize, 40 times: median;
each with Function.type_check_enable on and off, with gc disabled, and after a batch of torch's; and torch's own
batch / host / latency of the same model. Prints per row the median and range over the rounds (microseconds).
Where batch ~ host ~ latency, the inference is host-bound; torch runs in the same process, so a slow host moves both.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

Step = Callable[[], Any]


def batch(step: Step, sync: Callable[[], None], n: int = 40) -> float:
    sync()
    start = time.perf_counter()
    for _ in range(n):
        step()
    sync()
    return (time.perf_counter() - start) / n * 1e6


def host(step: Step, sync: Callable[[], None], n: int = 8) -> float:
    sync()
    time.sleep(0.002)
    start = time.perf_counter()
    for _ in range(n):
        step()
    took = (time.perf_counter() - start) / n * 1e6
    sync()
    return took


def latency(step: Step, sync: Callable[[], None], n: int = 40) -> float:
    took = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        sync()
        took.append((time.perf_counter() - start) * 1e6)
    return statistics.median(took)


def chainer_step() -> tuple[Step, Callable[[], None], Any]:
    import _speed_workloads as w
    import chainer
    import cupy
    import numpy
    from chainer import cuda
    inspection, _ = w.chainer_models()
    model = inspection()
    model.to_gpu()
    x = cuda.to_gpu(numpy.random.RandomState(0).randn(1, 3, 224, 224).astype("f"))
    return (lambda: model(chainer.Variable(x, volatile="on")), cupy.cuda.Device().synchronize,
            chainer.function.Function)


def rounds(args: argparse.Namespace) -> dict[str, list[float]]:
    step, sync, function = chainer_step()
    torch_step = torch_sync = None
    if not args.no_torch:
        import _speed_workloads as w
        import numpy
        import torch
        torch_step = w.torch_cases(numpy.random.RandomState(0))["inspection_infer_b1"]()
        torch_sync = torch.cuda.synchronize
        for _ in range(5):
            torch_step()
    for _ in range(20):
        step()
    sync()
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for checks in (True, False):
            function.type_check_enable = checks
            label = "on" if checks else "off"
            for name, timer in (("batch", batch), ("host", host), ("latency", latency)):
                rows.setdefault(f"{name} checks {label}", []).append(timer(step, sync))
        function.type_check_enable = True
        gc.disable()
        rows.setdefault("batch checks on, gc off", []).append(batch(step, sync))
        gc.enable()
        if torch_step is not None and torch_sync is not None:
            batch(torch_step, torch_sync)
            rows.setdefault("batch checks on after a torch batch", []).append(batch(step, sync))
            for name, timer in (("batch", batch), ("host", host), ("latency", latency)):
                rows.setdefault(f"torch {name}", []).append(timer(torch_step, torch_sync))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-torch", action="store_true", help="do not import torch (Chainer alone in the process)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", help="also write the rows (microseconds per round) here")
    args = parser.parse_args(argv)
    rows = rounds(args)
    for name, values in rows.items():
        print(f"{name:40s} median {statistics.median(values):8.1f} us  range {min(values):.1f}-{max(values):.1f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
