"""One build's process in the interleaved bench (chainer_speed.py --serve): the Chainer build on sys.path, torch
from the machine, the cases set up on request and timed one batch per request, so that the orchestrator can
alternate the builds round by round (bench/gpu/_speed_interleave.py).

Protocol: one JSON request per line on stdin, one JSON answer per request on stdout in a line starting with
MARK (anything else a library prints to stdout is ignored by the reader). Requests:
  {"op": "info"}                                  build, copy bandwidth, case names
  {"op": "time", "case": C, "side": S, "min_batch_ms": M}   seconds per iteration of one batch
  {"op": "count", "case": C, "side": S}           launches and calls of one iteration (_speed_launches)
  {"op": "quit"}
Only one case is set up at a time (switching frees the previous one's arrays), so the large inputs of two
processes fit beside each other.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from typing import Any, Callable

MARK = "@@ "


class Worker:
    def __init__(self, label: str) -> None:
        import _speed_diag
        import _speed_large
        import _speed_workloads as w
        import cupy
        import numpy
        self.label, self.cupy = label, cupy
        self.errors: dict[str, str] = {}
        self.factories: dict[str, dict[str, Callable]] = {"chainer": {}, "torch": {}}
        self.syncs: dict[str, Callable[[], None]] = {"chainer": cupy.cuda.Device().synchronize}
        self.factories["chainer"].update(w.chainer_cases(numpy.random.RandomState(0)))
        self.factories["chainer"].update(_speed_large.chainer_cases())
        self.factories["chainer"].update(_speed_diag.chainer_cases(numpy.random.RandomState(1)))
        try:  # without torch the Chainer side still comes
            import torch
            self.torch_version = torch.__version__
            self.syncs["torch"] = torch.cuda.synchronize
            self.factories["torch"].update(w.torch_cases(numpy.random.RandomState(0)))
            self.factories["torch"].update(_speed_large.torch_cases())
        except Exception as exc:
            self.torch_version = None
            self.errors["torch"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        self.current: str | None = None
        self.steps: dict[str, tuple[Callable[[], Any], int]] = {}

    def info(self) -> dict[str, Any]:
        import chainer_speed
        return {"label": self.label, "cupy_file": self.cupy.__file__, "torch": self.torch_version,
                "split_patch": hasattr(self.cupy.core.core, "_lg_reduction_split"),
                "copy_bandwidth_GBps": round(chainer_speed.copy_bandwidth(self.cupy) / 1e9, 1),
                "cases": list(self.factories["chainer"]), "torch_cases": list(self.factories["torch"]),
                "errors": self.errors}

    def _switch(self, case: str) -> None:
        if case == self.current:
            return
        self.steps.clear()
        gc.collect()
        try:
            import chainer.cuda
            pool = getattr(chainer.cuda, "memory_pool", None)
            if pool is not None:
                pool.free_all_blocks()
            if "torch" in self.syncs:
                import torch
                torch.cuda.empty_cache()
        except Exception:  # freeing is an optimisation, never a failure
            pass
        self.current = case

    def _step(self, case: str, side: str, min_batch_ms: float) -> tuple[Callable[[], Any], int]:
        """The case's step, warmed up, and the iterations per batch that make a batch >= min_batch_ms."""
        self._switch(case)
        if side not in self.steps:
            factory = self.factories[side].get(case)
            if factory is None:
                raise LookupError(f"no {side} version of {case}")
            step, sync = factory(), self.syncs[side]
            for _ in range(3):
                step()
            sync()
            start = time.perf_counter()
            step()
            sync()
            once = max(time.perf_counter() - start, 1e-6)
            self.steps[side] = (step, max(1, min(200, int(min_batch_ms / 1000 / once))))
        return self.steps[side]

    def time(self, case: str, side: str, min_batch_ms: float) -> dict[str, Any]:
        step, n = self._step(case, side, min_batch_ms)
        sync = self.syncs[side]
        sync()
        start = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        return {"s": (time.perf_counter() - start) / n, "n": n}

    def count(self, case: str, side: str) -> dict[str, Any]:
        import _speed_launches
        step, _ = self._step(case, side, 1.0)
        return _speed_launches.count_all(step, self.syncs[side], chainer_side=side == "chainer")

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "info":
            return self.info()
        if op == "time":
            return self.time(request["case"], request["side"], float(request.get("min_batch_ms", 20)))
        if op == "count":
            return self.count(request["case"], request["side"])
        raise ValueError(f"unknown request {request!r}")


def serve(label: str) -> int:
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever a library prints must not mix with the answers
    try:
        worker: Worker | None = Worker(label)
        start_error = None
    except Exception as exc:
        worker, start_error = None, f"{type(exc).__name__}: {str(exc)[:500]}"
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "quit":
            break
        try:
            if worker is None:
                raise RuntimeError(f"worker did not start: {start_error}")
            answer = worker.handle(request)
        except Exception as exc:  # one broken case must not end the bench
            answer = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        out.write(MARK + json.dumps(answer) + "\n")
        out.flush()
    return 0
