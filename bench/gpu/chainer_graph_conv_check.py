#!/usr/bin/env python3
"""chainer-cudnn-graph-conv on the GPU: the graph path's convolutions against the legacy call's and im2col's, and
its effect on batch-1 host time.

    PYTHONPATH=DIR python3 bench/gpu/chainer_graph_conv_check.py [--rounds 7] [--json FILE]

DIR is a `pip install --target` folder of a Chainer 1.24 wheel built by lgpatch with the step. Parts:

1. Semantics: for each case (batch 1 and 32, 1x1 / 3x3 / 7x7 kernels, strides 1-3, pads 0-3, non-square inputs,
   float32, float64, float16), Convolution2D's forward and backward (x, W, b gradients of a weighted sum) with the
   graph path on (`chainer._cudnn_graph.enabled`), off (the legacy cudnnConvolutionForward) and without cuDNN
   (im2col + cuBLAS). The forward's output on against off must agree as two cuDNN algorithms do (cuDNN's default
   math lets float32 run on TF32 tensor cores either way: rtol 1e-2 against im2col, 2e-3 on against off); float64
   to 1e-10. Whether the graph path ran is read off its plan table (a plan, not None, for the case); where it
   declined (no engine for the problem), the legacy call ran both times: reported, not a failure.
2. Workspace: a batch-32 convolution (32x32x112x112, 64 filters) under the default limit (the plan's workspace
   within 512 MiB, read off the plan table), under `set_max_workspace_size(0)` (a plan without workspace), and
   with almost all of the GPU's memory taken (the graph path's workspace cannot be allocated: the legacy call,
   with chainer-cudnn-workspace's fallback to 8 MiB, runs); each against im2col.
3. Host time at batch 1 (the graph path on and off alternating in one process, medians of --rounds): one
   L.Convolution2D call per inspection-CNN layer and the inspection CNN's whole inference, as enqueue time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (batch, in channels, out channels, height, width, kernel, stride, pad)
CASES = [(1, 3, 32, 224, 224, 3, 1, 1), (1, 32, 64, 112, 112, 3, 1, 1), (1, 64, 128, 56, 56, 3, 1, 1),
         (32, 3, 32, 64, 64, 3, 1, 1), (8, 3, 64, 224, 224, 7, 2, 3), (4, 16, 16, 17, 9, 3, 2, 0),
         (2, 8, 24, 15, 31, 1, 1, 0), (3, 5, 7, 20, 20, 5, 3, 2), (1, 64, 64, 7, 7, 3, 1, 1),
         (16, 128, 256, 14, 14, 3, 1, 1)]
TOLERANCE = {"f": (2e-3, 1e-2), "d": (1e-10, 1e-10), "e": (1e-2, 5e-2)}  # (on vs off, vs im2col), relative


def relative(a: Any, b: Any) -> float:
    a, b = numpy.asarray(a, "d"), numpy.asarray(b, "d")
    return float(numpy.abs(a - b).max() / max(numpy.abs(b).max(), 1e-30))


def run_case(chainer: Any, cupy: Any, case: tuple, dtype: str, rng: Any) -> dict:
    import chainer.links as L
    from chainer import _cudnn_graph

    n, c, k, h, w, ks, s, p = case
    x0 = rng.randn(n, c, h, w).astype(dtype)
    link = L.Convolution2D(c, k, ks, stride=s, pad=p)
    link.W.data = (rng.randn(k, c, ks, ks) / numpy.sqrt(c * ks * ks)).astype(dtype)
    link.b.data = rng.randn(k).astype(dtype)
    link.to_gpu()
    out: dict[str, Any] = {}
    gy = None
    for mode in ("on", "off", "im2col"):
        _cudnn_graph.enabled = mode == "on"
        link.use_cudnn = mode != "im2col"
        link.cleargrads()
        x = chainer.Variable(cupy.asarray(x0))
        y = link(x)
        if gy is None:  # one weighting of the outputs for all three
            gy = cupy.asarray(rng.randn(*y.shape).astype(dtype))
        y.grad = gy
        y.backward()
        out[mode] = [cupy.asnumpy(a) for a in (y.data, x.grad, link.W.grad, link.b.grad)]
    _cudnn_graph.enabled = True
    tables = getattr(_cudnn_graph._local, "tables", None)
    ran = bool(tables and any(v is not None and key[2] == dtype and key[3] == (n, c, h, w)
                              for key, v in tables.plans.items()))
    on_off = [relative(a, b) for a, b in zip(out["on"], out["off"])]
    vs_im2col = [relative(a, b) for a, b in zip(out["on"], out["im2col"])]
    tol_off, tol_im2col = TOLERANCE[dtype]
    return {"case": list(case), "dtype": dtype, "graph_path_ran": ran,
            "y_on_vs_off": on_off[0], "grads_on_vs_off": on_off[1:], "y_on_vs_im2col": vs_im2col[0],
            "grads_on_vs_im2col": vs_im2col[1:],
            "ok": on_off[0] <= tol_off and max(on_off[1:]) <= tol_off and max(vs_im2col) <= tol_im2col}


def workspace_checks(chainer: Any, cupy: Any, rng: Any) -> list[dict]:
    import chainer.functions as F
    from chainer import _cudnn_graph, cuda

    x, w = rng.randn(32, 32, 112, 112).astype("f"), (0.1 * rng.randn(64, 32, 3, 3)).astype("f")

    def forward(use_cudnn: bool) -> Any:
        y = F.convolution_2d(chainer.Variable(cupy.asarray(x)), chainer.Variable(cupy.asarray(w)), pad=1,
                             use_cudnn=use_cudnn)
        return y.data.get()

    def plan_workspace(limit: int) -> Any:
        tables = getattr(_cudnn_graph._local, "tables", None)
        found = [v for key, v in (tables.plans.items() if tables else ()) if key[1] == limit and key[3] == x.shape]
        return found[-1][1] if found and found[-1] is not None else None

    want = forward(False)
    rows = []
    default = cuda.get_max_workspace_size()
    got = forward(True)
    size = plan_workspace(512 << 20)
    rows.append({"check": "default limit: a plan within 512 MiB", "plan_workspace": size,
                 "rel_diff": relative(got, want), "ok": size is not None and relative(got, want) <= 1e-2})
    cuda.set_max_workspace_size(0)
    try:
        got = forward(True)
        size = plan_workspace(0)
        rows.append({"check": "limit 0: a plan without workspace", "plan_workspace": size,
                     "rel_diff": relative(got, want), "ok": size == 0 and relative(got, want) <= 1e-2})
    finally:
        cuda.set_max_workspace_size(default)
        cuda._lg_workspace_size_set = False  # as before this check: the program set no limit
    pool = cuda.memory_pool
    pool.free_all_blocks()
    size = plan_workspace(512 << 20) or 0
    free = cupy.cuda.runtime.memGetInfo()[0]
    headroom = 2 * (x.nbytes + w.nbytes) + 32 * 64 * 112 * 112 * 4 + (16 << 20)
    if size > (16 << 20) and free > headroom:
        hog = cupy.empty((free - headroom,), dtype="b")
        try:
            got = forward(True)
            rows.append({"check": "GPU almost full: the legacy call runs (its 8 MiB fallback)", "plan_workspace": size,
                         "rel_diff": relative(got, want), "ok": relative(got, want) <= 1e-2})
        finally:
            del hog
            pool.free_all_blocks()
    else:
        rows.append({"check": "GPU almost full", "plan_workspace": size, "ok": True,
                     "skipped": "the plan's workspace is <= 16 MiB: it fits beside the rest, nothing to fall back"})
    return rows


def enqueue_us(fn: Any, calls: int) -> float:
    import cupy

    fn()
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t0
    cupy.cuda.Device().synchronize()
    return elapsed / calls * 1e6


def timing(chainer: Any, cupy: Any, rounds: int, rng: Any) -> list[dict]:
    import chainer.links as L
    from _speed_workloads import chainer_models
    from chainer import _cudnn_graph

    inspection = chainer_models()[0]()
    inspection.to_gpu()
    items: dict[str, Any] = {}
    x = cupy.asarray(rng.randn(1, 3, 224, 224).astype("f"))
    items["inspection inference b1"] = lambda: inspection(chainer.Variable(x, volatile="on"))
    for c, k, hw in ((3, 32, 224), (32, 64, 112), (64, 128, 56)):
        layer = L.Convolution2D(c, k, 3, pad=1)
        layer.to_gpu()
        xs = cupy.asarray(rng.randn(1, c, hw, hw).astype("f"))
        items[f"conv3x3 {c}->{k} {hw}x{hw} b1"] = (lambda lay, v: lambda: lay(chainer.Variable(v, volatile="on"))
                                                    )(layer, xs)
    rows = []
    for name, fn in items.items():
        samples: dict[str, list[float]] = {"on": [], "off": []}
        for r in range(rounds):
            for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                _cudnn_graph.enabled = mode == "on"
                samples[mode].append(enqueue_us(fn, 200))
        _cudnn_graph.enabled = True
        on, off = statistics.median(samples["on"]), statistics.median(samples["off"])
        rows.append({"item": name, "graph_us": on, "legacy_us": off, "graph_over_legacy": on / off,
                     "graph_range": [min(samples["on"]), max(samples["on"])],
                     "legacy_range": [min(samples["off"]), max(samples["off"])]})
        print(f"{name}: graph {on:.1f} us [{min(samples['on']):.1f}-{max(samples['on']):.1f}], legacy {off:.1f} us "
              f"[{min(samples['off']):.1f}-{max(samples['off']):.1f}]: {on / off:.2f}x", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    import chainer
    import cupy

    rng = numpy.random.RandomState(0)
    checks = []
    for case in CASES:
        for dtype in ("f", "d", "e"):
            row = run_case(chainer, cupy, case, dtype, rng)
            checks.append(row)
            print(f"{'ok ' if row['ok'] else 'BAD'} {row['case']} {dtype}: ran={row['graph_path_ran']} "
                  f"y on/off {row['y_on_vs_off']:.2e}, y on/im2col {row['y_on_vs_im2col']:.2e}, "
                  f"grads on/off {max(row['grads_on_vs_off']):.2e}", flush=True)
    passed = sum(r["ok"] for r in checks)
    ran = sum(r["graph_path_ran"] for r in checks)
    print(f"semantics: {passed} of {len(checks)} cases ok; the graph path ran in {ran} of them")
    workspace = workspace_checks(chainer, cupy, rng)
    for row in workspace:
        print(f"{'ok ' if row['ok'] else 'BAD'} workspace: {row['check']}: {json.dumps(row)}", flush=True)
    checks += workspace
    passed = sum(r["ok"] for r in checks)
    rows = timing(chainer, cupy, args.rounds, rng)
    if args.json:
        Path(args.json).write_text(json.dumps({"checks": checks, "timing": rows}, indent=1))
    return 0 if passed == len(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
