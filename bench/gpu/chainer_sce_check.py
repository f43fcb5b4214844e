#!/usr/bin/env python3
"""chainer-softmax-ce-fused on the GPU: F.softmax_cross_entropy's fused path against Chainer 1.24's own path (the
same build, the module flag _lg_sce_fused.enabled = False) and against NumPy in float64 on the host, loss and gx,
for float16/32/64, normalize, cache_score, reduce 'mean'/'no', with and without ignore_label rows, shapes 1x1,
7x3, C=1, C=33, 4096x1000, 65536x1000 and (N, C, H, W); debug mode's error for a label out of range; the fused
mean bit-identical when run twice; then the time of both paths per forward+backward at 4096x1000 and
65536x1000 float32 (median of 50, synchronize + wall clock and CUDA events) with the device copy in the same run.

    PYTHONPATH=DIR python3 bench/gpu/chainer_sce_check.py [--json sce-check.json]

DIR is the folder the built Chainer 1.24 wheel was installed into (pip install --no-deps --target DIR). One JSON
line per case on stdout, then the timings, then "N/N passed"; exit status 1 when any case failed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time

import numpy

SMALL = [(1, 1), (7, 3), (64, 1), (500, 33), (8, 5, 16, 16), (4, 40, 7, 9)]
LARGE = [(4096, 1000), (65536, 1000)]
# (normalize, cache_score, reduce) for the large shapes: each option both ways at least once
LARGE_COMBOS = [(True, True, "mean"), (False, False, "mean"), (True, False, "no"), (False, True, "no")]
TOL = {"e": 2e-2, "f": 2e-5, "d": 1e-10}
IGNORE = -1


def reference(x: numpy.ndarray, t: numpy.ndarray, normalize: bool, reduce: str, gloss: numpy.ndarray):
    """Chainer 1.24's definition in float64 NumPy: loss and gx."""
    xd = x.astype("d")
    n, c = x.shape[:2]
    xr = numpy.moveaxis(xd, 1, -1).reshape(-1, c)
    tr = t.ravel()
    m = xr.max(1, keepdims=True)
    log_y = (xr - m) - numpy.log(numpy.exp(xr - m).sum(1, keepdims=True))
    valid = tr != IGNORE
    picked = numpy.where(valid, -log_y[numpy.arange(tr.size), numpy.where(valid, tr, 0)], 0.0)
    g = numpy.exp(log_y)
    g[numpy.arange(tr.size), numpy.where(valid, tr, 0)] -= valid.astype('d')
    g[~valid] = 0
    if reduce == "mean":
        coeff = 1.0 / max(1, int(valid.sum()) if normalize else n)
        loss = picked.sum() * coeff
        g *= float(gloss) * coeff
    else:
        loss = picked.reshape(t.shape)
        g *= gloss.ravel()[:, None]
    gx = numpy.moveaxis(g.reshape((n, *x.shape[2:], c)), -1, 1)
    return loss, gx


class Check:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def close(self, what: str, got, want, tol: float, scale: float = 1.0) -> None:
        got, want = numpy.asarray(got, "d"), numpy.asarray(want, "d")
        if got.shape != want.shape:
            self.failures.append(f"{what}: shape {got.shape} != {want.shape}")
            return
        bad = ~numpy.isclose(got, want, rtol=tol, atol=tol * scale, equal_nan=True)
        if bad.any():
            i = numpy.unravel_index(int(numpy.argmax(bad)), bad.shape)
            self.failures.append(f"{what}: {int(bad.sum())} of {bad.size} differ, e.g. at {i}: {got[i]} vs {want[i]}")

    def true(self, what: str, ok: bool) -> None:
        if not ok:
            self.failures.append(what)


def run_path(chainer, F, fused_module, x, t, gloss, fused: bool, **kw):
    """One forward+backward; returns loss, gx (host arrays), their dtypes and whether the fused path ran."""
    fused_module.enabled = fused
    try:
        xv = chainer.Variable(x)
        loss = F.softmax_cross_entropy(xv, t, **kw)
        loss.grad = gloss
        loss.backward()
        took = bool(getattr(loss.creator, "_lg_fused", False))
        return loss.data.get(), xv.grad.get(), (loss.data.dtype, xv.grad.dtype), took
    finally:
        fused_module.enabled = True


def inputs(cupy, rng, shape, dtype, ignored: bool):
    x = (rng.randn(*shape) * 3).astype(dtype)
    t_shape = (shape[0], *shape[2:])
    t = rng.randint(0, shape[1], size=t_shape).astype(numpy.int32)
    if ignored:
        t[rng.rand(*t_shape) < 0.2] = IGNORE
        t.ravel()[0] = IGNORE
    return x, t


def one_case(c: Check, mods, cupy, x, t, dtype, normalize, cache_score, reduce, rng) -> None:
    chainer, F, fused_module = mods
    gloss_host = numpy.ones((), dtype) if reduce == "mean" else rng.randn(*t.shape).astype(dtype)
    xg, tg, gg = cupy.asarray(x), cupy.asarray(t), cupy.asarray(gloss_host)
    kw = dict(normalize=normalize, cache_score=cache_score, reduce=reduce, ignore_label=IGNORE)
    loss, gx, dtypes, took = run_path(chainer, F, fused_module, xg, tg, gg, True, **kw)
    old_loss, old_gx, old_dtypes, old_took = run_path(chainer, F, fused_module, xg, tg, gg, False, **kw)
    c.true("fused path not taken", took)
    c.true("old path took the fused one", not old_took)
    c.true(f"dtypes {dtypes} != Chainer 1.24's {old_dtypes}", dtypes == old_dtypes)
    want_loss, want_gx = reference(x, t, normalize, reduce, gloss_host)
    tol = TOL[dtype]
    gscale = float(numpy.abs(gloss_host).max()) if reduce == "no" else 1.0
    c.close("loss vs numpy", loss, want_loss, tol, 1.0 + float(numpy.abs(want_loss).max()))
    c.close("gx vs numpy", gx, want_gx, tol, gscale)
    c.true("ignored rows' gx not all 0",
           bool((numpy.moveaxis(gx, 1, -1)[t == IGNORE] == 0).all()))
    # float16: Chainer 1.24 sums in float16 and takes 1/count in float16 (0 for count > 65504): compared where
    # its own accuracy allows.
    if dtype != "e" or t.size <= 4096:
        otol = 5e-2 if dtype == "e" else tol
        c.close("loss vs Chainer 1.24", loss, old_loss, otol, 1.0 + float(numpy.abs(want_loss).max()))
        c.close("gx vs Chainer 1.24", gx, old_gx, otol, gscale)


def cases(rng):
    for shape, dtype, ignored in itertools.product(SMALL, "efd", (False, True)):
        for normalize, cache_score, reduce in itertools.product((True, False), (True, False), ("mean", "no")):
            yield shape, dtype, ignored, normalize, cache_score, reduce
    for shape, dtype in itertools.product(LARGE, "efd"):
        for k, (normalize, cache_score, reduce) in enumerate(LARGE_COMBOS):
            yield shape, dtype, k % 2 == 0, normalize, cache_score, reduce


def check_all(mods, cupy) -> tuple[int, int]:
    rng = numpy.random.RandomState(0)
    passed = total = 0
    data: dict = {}
    for shape, dtype, ignored, normalize, cache_score, reduce in cases(rng):
        key = (shape, dtype, ignored)
        if key not in data:
            data = {key: inputs(cupy, rng, shape, dtype, ignored)}  # one input set alive at a time
        c = Check()
        try:
            x, t = data[key]
            one_case(c, mods, cupy, x, t, dtype, normalize, cache_score, reduce, rng)
        except Exception as exc:
            c.failures.append(f"crashed: {type(exc).__name__}: {str(exc)[:300]}")
        total += 1
        passed += not c.failures
        print(json.dumps({"shape": list(shape), "dtype": dtype, "ignore_rows": ignored, "normalize": normalize,
                          "cache_score": cache_score, "reduce": reduce, "ok": not c.failures,
                          "failures": c.failures[:5]}), flush=True)
    for name, fn in (("debug mode: label out of range", lambda c: check_debug(c, mods, cupy)),
                     ("label out of range without debug mode", lambda c: check_out_of_range(c, mods, cupy)),
                     ("mean bit-identical twice", lambda c: check_repeat(c, mods, cupy))):
        c = Check()
        try:
            fn(c)
        except Exception as exc:
            c.failures.append(f"crashed: {type(exc).__name__}: {str(exc)[:300]}")
        total += 1
        passed += not c.failures
        print(json.dumps({"case": name, "ok": not c.failures, "failures": c.failures[:5]}), flush=True)
    return passed, total


def check_debug(c: Check, mods, cupy) -> None:
    chainer, F, _ = mods
    x = cupy.asarray(numpy.random.RandomState(1).randn(6, 40).astype("f"))
    t = cupy.asarray(numpy.array([0, 1, 2, 3, 4, 40], numpy.int32))
    chainer.set_debug(True)
    try:
        F.softmax_cross_entropy(chainer.Variable(x), t)
        c.failures.append("no ValueError")
    except ValueError as exc:
        c.true(f"message: {exc}", "Each label `t` need to satisfy" in str(exc))
    finally:
        chainer.set_debug(False)


def check_out_of_range(c: Check, mods, cupy) -> None:
    """Without debug mode Chainer 1.24 read outside the row; the fused path gives NaN for that row only."""
    chainer, F, _ = mods
    x = numpy.random.RandomState(2).randn(6, 40).astype("f")
    t = numpy.array([0, 1, 2, 3, -1, 40], numpy.int32)
    loss = F.softmax_cross_entropy(chainer.Variable(cupy.asarray(x)), cupy.asarray(t), reduce="no").data.get()
    c.true(f"losses {loss}", bool(numpy.isfinite(loss[:5]).all() and numpy.isnan(loss[5])))


def check_repeat(c: Check, mods, cupy) -> None:
    chainer, F, _ = mods
    rng = numpy.random.RandomState(3)
    x = cupy.asarray(rng.randn(65536, 1000).astype("f"))
    t = cupy.asarray(rng.randint(0, 1000, 65536).astype(numpy.int32))
    a = F.softmax_cross_entropy(chainer.Variable(x), t).data.get()
    b = F.softmax_cross_entropy(chainer.Variable(x), t).data.get()
    c.true(f"{a!r} != {b!r}", a.tobytes() == b.tobytes())


def timed(cupy, fn, repeats: int = 50) -> dict:
    for _ in range(5):
        fn()
    device = cupy.cuda.Device()
    walls, gpus = [], []
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        device.synchronize()
        t0 = time.perf_counter()
        start.record()
        fn()
        end.record()
        end.synchronize()
        device.synchronize()
        walls.append((time.perf_counter() - t0) * 1e3)
        gpus.append(cupy.cuda.get_elapsed_time(start, end))
    return {"wall_ms": round(statistics.median(walls), 4), "event_ms": round(statistics.median(gpus), 4)}


def timings(mods, cupy) -> None:
    chainer, F, fused_module = mods
    for shape in LARGE:
        x = (numpy.random.RandomState(4).randn(*shape)).astype("f")
        xg = cupy.asarray(x)
        t = (cupy.arange(shape[0], dtype=numpy.int32) * 7919 % shape[1]).astype(numpy.int32)
        nbytes = 2 * x.nbytes  # read x, write gx

        def step(xg=xg, t=t):
            F.softmax_cross_entropy(chainer.Variable(xg), t).backward()

        copy = timed(cupy, xg.copy)
        fused = timed(cupy, step)
        fused_module.enabled = False
        try:
            old = timed(cupy, step)
        finally:
            fused_module.enabled = True
        copy_gbs = nbytes / copy["event_ms"] / 1e6
        row = {"timing": "softmax_cross_entropy fwd+bwd", "shape": list(shape), "dtype": "float32",
               "copy_GBps": round(copy_gbs, 1), "fused": fused, "chainer_1_24": old,
               "speedup_wall": round(old["wall_ms"] / fused["wall_ms"], 2),
               "fused_pct_of_copy": round(100 * nbytes / fused["event_ms"] / 1e6 / copy_gbs, 1),
               "chainer_1_24_pct_of_copy": round(100 * nbytes / old["event_ms"] / 1e6 / copy_gbs, 1)}
        print(json.dumps(row), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the summary here")
    parser.add_argument("--no-timing", action="store_true", help="checks only")
    args = parser.parse_args(argv)
    try:
        import chainer
        import chainer.functions as F
        import cupy
        from chainer.functions.loss import _lg_sce_fused
    except ImportError as exc:
        print(f"sce check: this build has no chainer-softmax-ce-fused or no CuPy: {exc}", file=sys.stderr)
        print("0/1 passed")
        return 1
    mods = (chainer, F, _lg_sce_fused)
    start = time.perf_counter()
    passed, total = check_all(mods, cupy)
    if not args.no_timing:
        timings(mods, cupy)
    print(f"{passed}/{total} passed")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"passed": passed, "total": total, "seconds": round(time.perf_counter() - start, 1)}, f)
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
