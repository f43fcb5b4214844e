#!/usr/bin/env python3
"""chainer-max-pool-kernel on the GPU (lgpatch's Chainer 1.24 build): F.max_pooling_2d with ksize == stride, pad 0,
through the new kernels against Chainer's own non-cuDNN GPU kernels (use_cudnn=False with the new path off by its
module flag), Chainer's CPU path (NumPy) and cuDNN; then forward + backward timed for the new kernels and cuDNN.

    PYTHONPATH=DIR python3 bench/gpu/chainer_pool_check.py [--json pool-check.json] [--skip-timing]

Cases: float16/32/64; ksize 2, 3 and (2, 3); cover_all True/False; sizes not divisible by the window; integer
data (ties), data with NaN and infinities, distinct values; shapes 1x1x2x2 to 32x64x128x256. Checks that fail:
y and gx equal to Chainer's GPU kernels (same rule: first of equal values, a NaN kept only where it comes first);
y and gx equal to the CPU path in windows without NaN, and NaN there where the window has one (NumPy propagates);
y equal to cuDNN's in windows without NaN and full; gx equal to cuDNN's on distinct values; the new kernels were
the ones run (the Function kept its int8 offsets). Reported, not failed: cuDNN's y on NaN windows and partial
(cover_all) windows, cuDNN's y on windows of nothing but -inf, and cuDNN's gx on ties (Chainer pins neither
down). One JSON line per case, then "N/N passed"; exit status 1 when a check failed. Timing (unless --skip-timing):
fwd + bwd of the large shapes for both paths, then the speed bench's CNN inferences with the new path on and off
in alternating rounds of one process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy

DTYPES = ("float16", "float32", "float64")
KSIZES = (2, 3, (2, 3))
SMALL = ((1, 1, 2, 2), (2, 3, 7, 9), (2, 3, 13, 17), (4, 8, 33, 31), (8, 16, 64, 64))
LARGE = ((32, 64, 112, 112), (32, 64, 128, 256))


def pair(k) -> tuple[int, int]:
    return (k, k) if isinstance(k, int) else tuple(k)


def data(rng, shape, dtype: str, kind: str) -> numpy.ndarray | None:
    size = int(numpy.prod(shape))
    if kind == "ties":
        return rng.randint(-3, 4, size=shape).astype(dtype)
    if kind == "nan":
        x = rng.randint(-3, 4, size=shape).astype(dtype)
        x[rng.rand(*shape) < 0.15] = numpy.nan
        x[..., 0, 0] = numpy.nan  # first in its window: kept by Chainer's GPU rule
        x[rng.rand(*shape) < 0.05] = -numpy.inf
        return x
    limit = 2048 if dtype == "float16" else 1 << 24  # integers exact in the dtype
    if size > limit:
        return None
    return (rng.permutation(size) - size // 2).reshape(shape).astype(dtype)


def window_mask(x: numpy.ndarray, kh: int, kw: int, out_hw: tuple[int, int]) -> tuple[numpy.ndarray, numpy.ndarray]:
    """(windows holding a NaN, partial windows), each of the output's shape."""
    n, c, h, w = x.shape
    oh, ow = out_hw
    pad = numpy.zeros((n, c, max(h, oh * kh), max(w, ow * kw)))
    pad[:, :, :h, :w] = numpy.isnan(x)
    has_nan = pad[:, :, :oh * kh, :ow * kw].reshape(n, c, oh, kh, ow, kw).max(axis=(3, 5)) > 0
    partial = numpy.zeros((oh, ow), bool)
    partial[h // kh:, :] = True
    partial[:, w // kw:] = True
    return has_nan, numpy.broadcast_to(partial, has_nan.shape)


class Run:
    """Chainer's F.max_pooling_2d forward + backward through one path."""

    def __init__(self, chainer, cupy, mp) -> None:
        self.chainer, self.cupy, self.mp = chainer, cupy, mp

    def __call__(self, x, gy, k, cover_all: bool, path: str):
        F = self.chainer.functions
        gpu = path != "cpu"
        self.mp._lg_fast_max_pool = path == "fast"
        try:
            xv = self.chainer.Variable(self.cupy.asarray(x) if gpu else x)
            y = F.max_pooling_2d(xv, k, cover_all=cover_all, use_cudnn=path in ("fast", "cudnn"))
            fast_taken = getattr(y.creator, "_lg_argmax", None) is not None
            y.grad = self.cupy.asarray(gy) if gpu else gy
            y.backward()
            out = (self.cupy.asnumpy(y.data), self.cupy.asnumpy(xv.grad)) if gpu else (y.data, xv.grad)
        finally:
            self.mp._lg_fast_max_pool = True
        return out[0], out[1], fast_taken


def same(a, b, where=None) -> bool:
    a, b = numpy.asarray(a, "d"), numpy.asarray(b, "d")
    if a.shape != b.shape:
        return False
    if where is not None:
        a, b = a[where], b[where]
    return bool(numpy.array_equal(a, b, equal_nan=True))


def check_case(run: Run, rng, shape, dtype: str, k, cover_all: bool, kind: str, cpu: bool) -> dict | None:
    x = data(rng, shape, dtype, kind)
    if x is None:
        return None
    kh, kw = pair(k)
    oh = -(-shape[2] // kh) if cover_all else shape[2] // kh
    ow = -(-shape[3] // kw) if cover_all else shape[3] // kw
    if oh <= 0 or ow <= 0:
        return None
    gy = rng.randint(1, 9, size=(shape[0], shape[1], oh, ow)).astype(dtype)
    case = {"shape": list(shape), "dtype": dtype, "ksize": [kh, kw], "cover_all": cover_all, "data": kind}
    checks: dict[str, bool] = {}
    info: dict[str, object] = {}
    y, gx, taken = run(x, gy, k, cover_all, "fast")
    checks["fast_path_taken"] = taken
    cy, cgx, c_taken = run(x, gy, k, cover_all, "chainer-gpu")
    checks["chainer_gpu_path_without_offsets"] = not c_taken
    checks["y_eq_chainer_gpu"], checks["gx_eq_chainer_gpu"] = same(y, cy), same(gx, cgx)
    has_nan, partial = window_mask(x.astype("d"), kh, kw, (oh, ow))
    if cpu:
        py, pgx, _ = run(x, gy, k, cover_all, "cpu")
        checks["y_eq_cpu_without_nan"] = same(y, py, ~has_nan)
        checks["cpu_nan_where_window_has_nan"] = bool(numpy.isnan(numpy.asarray(py, "d")[has_nan]).all())
        if not has_nan.any():
            checks["gx_eq_cpu"] = same(gx, pgx)
    dy, dgx, _ = run(x, gy, k, cover_all, "cudnn")
    # A window of nothing but -inf: Chainer's paths and NumPy give -inf; what cuDNN gives is recorded, not checked.
    all_minus_inf = ~has_nan & numpy.isneginf(numpy.asarray(y, "d"))
    checks["y_eq_cudnn_full_windows_without_nan"] = same(y, dy, ~has_nan & ~partial & ~all_minus_inf)
    if all_minus_inf.any():
        info["cudnn_y_in_all_minus_inf_windows"] = sorted({float(v) for v in numpy.asarray(dy, "d")[all_minus_inf]})
    if partial.any():
        info["y_eq_cudnn_partial_windows"] = same(y, dy, partial & ~has_nan)
    if has_nan.any():
        info["y_eq_cudnn_nan_windows"] = same(y, dy, has_nan)
    if kind == "distinct" and not partial.any():
        checks["gx_eq_cudnn"] = same(gx, dgx)
    elif not has_nan.any():
        info["gx_eq_cudnn"] = same(gx, dgx)
    case.update(checks=checks, info=info, ok=all(checks.values()))
    return case


def all_cases():
    for dtype in DTYPES:
        for k in KSIZES:
            for cover_all in (True, False):
                for shape in SMALL:
                    for kind in ("ties", "nan", "distinct"):
                        yield shape, dtype, k, cover_all, kind, True
    for shape in LARGE:
        for dtype in DTYPES:
            for kind in ("ties", "nan"):
                yield shape, dtype, 2, True, kind, dtype == "float32"


def time_step(step, sync, repeats: int = 50, batch: int = 10) -> float:
    """Median seconds per iteration over `repeats` batches of `batch` iterations between synchronizes."""
    for _ in range(5):
        step()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batch):
            step()
        sync()
        samples.append((time.perf_counter() - start) / batch)
    return statistics.median(samples)


def timings(chainer, cupy, mp) -> list[dict]:
    F, sync = chainer.functions, cupy.cuda.Device().synchronize
    src = cupy.arange(1 << 26, dtype=numpy.float32)
    dst = cupy.empty_like(src)
    # cudaMemcpyAsync device to device (kind 3): the copy bandwidth chainer_speed.py measures (CuPy 1.24's copyto
    # is an elementwise kernel, slower than the copy engine's path).
    t_copy = time_step(lambda: cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, 3, 0), sync)
    copy_gbs = 2 * src.nbytes / t_copy / 1e9
    rows = []
    for shape in LARGE:
        x = cupy.sin(cupy.arange(int(numpy.prod(shape)), dtype=numpy.float32)).reshape(shape)
        gy = cupy.ones((shape[0], shape[1], shape[2] // 2, shape[3] // 2), numpy.float32)

        def step(x=x, gy=gy):
            y = F.max_pooling_2d(chainer.Variable(x), 2)
            y.grad = gy
            y.backward()
        row = {"timing": "max_pooling_2d(x, 2) fwd+bwd", "shape": list(shape), "copy_GBps": round(copy_gbs, 1)}
        for path in ("fast", "cudnn"):
            mp._lg_fast_max_pool = path == "fast"
            try:
                seconds = time_step(step, sync)
            finally:
                mp._lg_fast_max_pool = True
            gbs = (2 + 2 * 0.25) * x.size * 4 / seconds / 1e9  # the speed bench's byte count
            row[f"{path}_ms"] = round(seconds * 1e3, 4)
            row[f"{path}_pct_of_copy"] = round(100 * gbs / copy_gbs, 1)
        row["cudnn_over_fast"] = round(row["cudnn_ms"] / row["fast_ms"], 2)
        rows.append(row)
    return rows


def workload_ab(chainer, cupy, mp, rounds: int = 8) -> list[dict]:
    """The speed bench's CNN inferences (bench/gpu/_speed_workloads.py) with the fast path on and off in
    alternating rounds of one process, so that host and memory-pool noise land on both: the pooling's share of a
    whole network, which the interleaved bench measures only across builds."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _speed_workloads import chainer_cases

    sync = cupy.cuda.Device().synchronize
    rows = []
    for name in ("inspection_infer_b32", "vgg_infer_b32", "inspection_infer_b1"):
        step = chainer_cases(numpy.random.RandomState(0))[name]()
        samples: dict[str, list[float]] = {"fast": [], "cudnn": []}
        for _ in range(rounds):
            for path in ("fast", "cudnn"):
                mp._lg_fast_max_pool = path == "fast"
                try:
                    samples[path].append(time_step(step, sync, repeats=5, batch=10))
                finally:
                    mp._lg_fast_max_pool = True
        row = {"workload": name, "rounds": rounds}
        for path, values in samples.items():
            row[f"{path}_ms_median"] = round(statistics.median(values) * 1e3, 4)
            row[f"{path}_ms_range"] = [round(min(values) * 1e3, 4), round(max(values) * 1e3, 4)]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", help="write all cases and timings here")
    parser.add_argument("--skip-timing", action="store_true")
    args = parser.parse_args(argv)
    import chainer
    import chainer.functions
    import cupy
    from chainer.functions.pooling import max_pooling_2d as mp

    if not hasattr(mp, "_lg_fast_max_pool"):
        print("this Chainer has no chainer-max-pool-kernel step (no _lg_fast_max_pool)", file=sys.stderr)
        return 1
    if hasattr(mp, "_LG_CUDNN_BELOW"):  # max-pool-small-cudnn sends small inputs to cuDNN: the kernels are checked
        mp._LG_CUDNN_BELOW = 0  # at every size here; the rule itself is the CPU test's and the bench's
    run, rng = Run(chainer, cupy, mp), numpy.random.RandomState(0)
    results, passed, total = [], 0, 0
    for shape, dtype, k, cover_all, kind, cpu in all_cases():
        try:
            case = check_case(run, rng, shape, dtype, k, cover_all, kind, cpu)
        except Exception as exc:  # one crashing case is a failure, not the end of the check
            case = {"shape": list(shape), "dtype": dtype, "ksize": list(pair(k)), "cover_all": cover_all,
                    "data": kind, "ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        if case is None:
            continue
        total += 1
        passed += bool(case["ok"])
        results.append(case)
        print(json.dumps(case), flush=True)
    rows = [] if args.skip_timing else timings(chainer, cupy, mp) + workload_ab(chainer, cupy, mp)
    for row in rows:
        print(json.dumps(row), flush=True)
    print(f"{passed}/{total} passed")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cases": results, "timings": rows, "passed": passed, "total": total}, f, indent=1)
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
