#!/usr/bin/env python3
"""CuPy 1.24's reductions (lgpatch's build) against NumPy on the GPU: dtypes, axes, keepdims, empty inputs, sizes
around the cupy-reduction-grid thresholds (one block per output vs several), NaN, ties for argmax/argmin, split
reductions alternating between streams; convolution_2d with cuDNN called repeatedly and with another
workspace limit (chainer-cudnn-algo-cache) against the im2col path; and cuDNN convolution, max-pool, ReLU and
softmax with descriptors made once per shape and thread (chainer-cudnn-host-cache) against the CPU path.

    PYTHONPATH=DIR python3 bench/gpu/chainer_reduction_check.py --label after --json check-after.json
    PYTHONPATH=DIR python3 bench/gpu/chainer_reduction_check.py --parts axes views --time   # a quick look

Values are small integers where the result must be exact (sums of float32 up to 2**24 are), random normals with a
tolerance for mean/var/std. Prints pass/fail counts; exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time

import numpy

# Reduced lengths on both sides of the split thresholds: 512 threads x 8 items per thread per block.
LENGTHS = [1, 2, 255, 256, 257, 511, 512, 513, 4095, 4096, 4097, 8191, 8192, 8193, 65537, 1 << 20, 6422528]
SHAPES_AXES = [  # (shape, axis): few outputs with a long reduced axis, and the opposite
    ((100003, 3), 0), ((3, 100003), -1), ((3, 100003), 1), ((64, 4097), 1), ((4097, 64), 0),
    ((8, 64, 112, 112), (0, 2, 3)), ((8, 64, 112, 112), None), ((8, 64, 112, 112), (1, 2, 3)),
    ((5, 7, 9), (0, 2)), ((5, 7, 9), -1), ((1, 1), None), ((2, 0), 1), ((0, 3), 1),
    # cupy-reduction-layout: 32 neighbouring outputs a block (with and without a split, a last group only partly
    # used), up to 4 contiguous rows a block, and shapes just outside both rules.
    ((6272, 1024), 0), ((300, 40), 0), ((4097, 33), 0), ((8, 64, 112, 112), (0, 1)), ((17, 31), 0),
    ((6272, 1024), 1), ((6272, 300), -1), ((1000, 7), 1), ((7, 1000), 0), ((33, 16), 0),
    # ... and its indexer division by multiply and shift (>= 8 elements a thread): 3-D and 4-D indexers.
    ((16, 8, 64, 64), (0, 2)), ((64, 3, 4096), (0, 2)), ((3, 5, 7, 11, 13), (1, 3)),
    # ... and its rows layout (session 9): rows of 8 to 8192 (fewer lanes than a warp, a warp a row, several
    # warps a row), few rows (a split with most of the group unused), two trailing reduced axes, odd lengths.
    ((1000, 8), 1), ((1000, 9), 1), ((777, 31), 1), ((5000, 64), 1), ((65, 1000), 1), ((8, 1024), 1),
    ((3, 2048), 1), ((64, 8192), 1), ((97, 16384), 1), ((64, 32, 32), (1, 2)), ((7, 3, 1023), (1, 2)),
    ((2, 50, 4097), 2),
]


class Checker:
    def __init__(self) -> None:
        self.passed = 0
        self.failures: list[str] = []

    def same(self, what: str, got, want, rtol: float = 0.0, atol: float = 0.0) -> None:
        try:
            got, want = numpy.asarray(got), numpy.asarray(want)
            if got.shape != want.shape:
                raise AssertionError(f"shape {got.shape} != {want.shape}")
            numpy.testing.assert_allclose(got.astype("d"), want.astype("d"), rtol=rtol, atol=atol, equal_nan=True)
            self.passed += 1
        except Exception as exc:
            self.failures.append(f"{what}: {str(exc).strip().splitlines()[-1][:200]}")

    def raises(self, what: str, function) -> None:
        try:
            function()
        except ValueError:
            self.passed += 1
            return
        self.failures.append(f"{what}: no ValueError")


def guard(c: Checker, what: str, function) -> None:
    """One crashing case (an op CuPy 1.24 lacks, a launch error) is a failure, not the end of the check."""
    try:
        function()
    except Exception as exc:
        c.failures.append(f"{what}: crashed: {type(exc).__name__}: {str(exc)[:200]}")


def ints(rng, shape, dtype):
    return rng.randint(-3, 4, size=shape).astype(dtype)


def check_lengths(c: Checker, cupy, rng) -> None:
    for n in LENGTHS:
        x = ints(rng, (n,), "f")
        g = cupy.asarray(x)
        c.same(f"sum f4 n={n}", g.sum().get(), x.sum(dtype="d"))
        c.same(f"max f4 n={n}", g.max().get(), x.max())
        c.same(f"min f4 n={n}", g.min().get(), x.min())
        c.same(f"argmax f4 n={n} (ties: first)", g.argmax().get(), x.argmax())
        c.same(f"argmin f4 n={n} (ties: first)", g.argmin().get(), x.argmin())
        c.same(f"mean f4 n={n}", g.mean().get(), x.mean(dtype="d"), rtol=1e-5, atol=1e-6)
        signs = numpy.where(x > 0, 1, -1).astype("f")
        c.same(f"prod +-1 n={n}", cupy.asarray(signs).prod().get(), signs.prod())
        r = rng.randn(n).astype("f")
        c.same(f"var f4 n={n}", cupy.asarray(r).var().get(), r.var(dtype="d"), rtol=1e-4, atol=1e-6)
        if n >= 2:
            x[n // 3] = numpy.nan
            c.same(f"max with NaN n={n}", cupy.asarray(x).max().get(), numpy.nan)
            c.same(f"argmax with NaN n={n}", cupy.asarray(x).argmax().get(), n // 3)


def check_dtypes(c: Checker, cupy, rng) -> None:
    for dtype in ("float16", "float32", "float64", "int32", "bool"):
        for n in (7, 513, 2048, 70000):
            guard(c, f"{dtype} n={n}", lambda dtype=dtype, n=n: one_dtype(c, cupy, rng, dtype, n))


def one_dtype(c: Checker, cupy, rng, dtype: str, n: int) -> None:
    x = ints(rng, (n,), dtype) if dtype != "bool" else rng.rand(n) > 0.5
    if dtype == "float16" and n > 2048:
        return  # float16 sums are exact only while |sum| <= 2048
    g = cupy.asarray(x)
    c.same(f"sum {dtype} n={n}", g.sum().get(), x.sum(dtype="d"))
    c.same(f"max {dtype} n={n}", g.max().get(), x.max())
    c.same(f"argmax {dtype} n={n}", g.argmax().get(), x.argmax())
    x2 = x.reshape(n, 1) * numpy.ones((1, 3), x.dtype) if dtype != "bool" else numpy.stack([x] * 3, 1)
    c.same(f"sum axis0 {dtype} ({n},3)", cupy.asarray(x2).sum(axis=0).get(), x2.sum(axis=0, dtype="d"))


def check_axes(c: Checker, cupy, rng) -> None:
    for shape, axis in SHAPES_AXES:
        guard(c, f"{shape} axis={axis}", lambda shape=shape, axis=axis: one_axis(c, cupy, rng, shape, axis))


def one_axis(c: Checker, cupy, rng, shape, axis) -> None:
    x = ints(rng, shape, "f")
    g = cupy.asarray(x)
    for keep in (False, True):
        tag = f"{shape} axis={axis} keepdims={keep}"
        c.same("sum " + tag, g.sum(axis=axis, keepdims=keep).get(), x.sum(axis=axis, keepdims=keep, dtype="d"))
        if x.size and all(shape[a] for a in ((axis,) if isinstance(axis, int) else axis or range(x.ndim))):
            c.same("max " + tag, g.max(axis=axis, keepdims=keep).get(), x.max(axis=axis, keepdims=keep))
            c.same("mean " + tag, g.mean(axis=axis, keepdims=keep).get(),
                   x.mean(axis=axis, keepdims=keep, dtype="d"), rtol=1e-5, atol=1e-6)
            c.same("std " + tag, g.std(axis=axis, keepdims=keep).get(),
                   x.std(axis=axis, keepdims=keep, dtype="d"), rtol=1e-4, atol=1e-5)
    if isinstance(axis, int) and x.size:
        c.same(f"argmax {shape} axis={axis}", g.argmax(axis=axis).get(), x.argmax(axis=axis))


def check_views(c: Checker, cupy, rng) -> None:
    """Reductions of non-contiguous views (a transpose, a column stride): the layout rule reads the view's own
    strides, and a view it does not recognise keeps CuPy 1.24's launch."""
    x = ints(rng, (1024, 6272), "f")
    g = cupy.asarray(x)
    f = cupy.asfortranarray(g)  # its reduced axis 0 is the contiguous one: the rows layout
    for what, gv, xv in (("T", g.T, x.T), ("[:, ::2]", g[:, ::2], x[:, ::2]), ("[::3]", g[::3], x[::3]),
                         ("Fortran order", f, x)):
        for axis in (0, 1, None):
            c.same(f"sum view {what} axis={axis}", gv.sum(axis=axis).get(), xv.sum(axis=axis, dtype="d"))
        c.same(f"argmax view {what} axis=0", gv.argmax(axis=0).get(), xv.argmax(axis=0))


def check_empty_and_kernels(c: Checker, cupy) -> None:
    e = cupy.zeros((0,), "f")
    c.same("sum of empty", e.sum().get(), 0.0)
    c.same("prod of empty", e.prod().get(), 1.0)
    c.raises("max of empty", lambda: e.max())
    c.raises("argmax of empty", lambda: e.argmax())
    # ReductionKernel (user-defined, Chainer's cuda.reduce path) with a post-map using the sizes: mean of squares.
    k = cupy.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a / (_in_ind.size() / _out_ind.size())", "0",
                             "lg_check_meansq")
    for shape, axis in (((6422528,), None), ((3, 100003), 1), ((100003, 3), 0), ((5, 7), 0), ((6272, 1024), 0),
                        ((6272, 1024), 1)):
        x = numpy.arange(numpy.prod(shape), dtype="d").reshape(shape) % 5
        c.same(f"ReductionKernel meansq {shape} axis={axis}", k(cupy.asarray(x), axis=axis).get(),
               (x * x).mean(axis=axis), rtol=1e-12)
    # A map expression that reads _J (the reduced index), as argmax's does: four elements a step must each see
    # their own _J, also in split blocks.
    kj = cupy.ReductionKernel("T x", "T y", "x * (_J % 3)", "a + b", "y = a", "0", "lg_check_jweight")
    for shape, axis in (((6272, 1024), 0), ((6272, 1024), 1), ((300, 40), 0), ((100003, 3), 0), ((6422528,), None)):
        x = numpy.arange(numpy.prod(shape), dtype="d").reshape(shape) % 7
        n = x.shape[0] if axis == 0 or axis is None else x.shape[1]
        weights = numpy.arange(n) % 3
        want = (x * weights[:, None]).sum(axis=0) if axis == 0 else (
            (x * weights).sum(axis=-1) if axis == 1 else (x * weights).sum())
        c.same(f"ReductionKernel _J weights {shape} axis={axis}", kj(cupy.asarray(x), axis=axis).get(), want)
    # Results on a non-default stream (each stream has its own partials and counters, which the kernel resets),
    # alternating with the null stream: a counter left non-zero would spoil the next split reduction there.
    s = cupy.cuda.Stream()
    x = numpy.ones((3, 100003), "d")
    gx = cupy.asarray(x)
    for i in range(4):
        c.same(f"ReductionKernel on a stream #{i}", k(gx, axis=1, stream=s).get(), numpy.ones(3))
        s.synchronize()
        c.same(f"ReductionKernel on the null stream #{i}", k(gx, axis=1).get(), numpy.ones(3))
    # Repeated launches reuse the memory pool: stale partials or counters would show here.
    g = cupy.asarray(numpy.ones(1 << 20, "f"))
    c.same("sum x20 repeated", sum(float(g.sum().get()) for _ in range(20)), 20.0 * (1 << 20))


def check_conv_workspace(c: Checker, cupy, rng) -> None:
    """chainer-cudnn-workspace's legacy call, with chainer-cudnn-graph-conv's path (where the build has it) off:
    that call stays its fallback; the graph path's own workspace is checked by chainer_graph_conv_check.py."""
    try:
        from chainer import _cudnn_graph
    except ImportError:
        _cudnn_graph = None
    saved = getattr(_cudnn_graph, "enabled", None)
    if _cudnn_graph is not None:
        _cudnn_graph.enabled = False
    try:
        _conv_workspace_legacy(c, cupy, rng)
    finally:
        if _cudnn_graph is not None:
            _cudnn_graph.enabled = saved


def _conv_workspace_legacy(c: Checker, cupy, rng) -> None:
    """chainer-cudnn-workspace before any set_max_workspace_size call: the 512 MiB default limit with a workspace
    of the chosen algorithm's size, against im2col; then the same problem with almost all of the GPU's memory
    taken, which must fall back to the algorithm for 8 MiB (and give the same result)."""
    import chainer
    import chainer.functions as F
    from chainer import cuda
    from chainer.functions.connection import convolution_2d as conv2d
    if not hasattr(conv2d, "_lg_algorithm_and_workspace"):
        return
    c.same("workspace limit not set by the program", cuda._lg_workspace_size_set, False)
    x, w = rng.randn(32, 32, 112, 112).astype("f"), (0.1 * rng.randn(64, 32, 3, 3)).astype("f")

    def forward(use_cudnn: bool):
        y = F.convolution_2d(chainer.Variable(cupy.asarray(x)), chainer.Variable(cupy.asarray(w)), pad=1,
                             use_cudnn=use_cudnn)
        return y.data.get()
    want = forward(False)
    tol = 1e-2 * float(abs(want).max())
    c.same("conv b32 default limit vs im2col", forward(True), want, atol=tol)
    needs = [size for key, size in conv2d._lg_workspace_sizes.items() if key[1] == "fwd" and key[2] == x.shape]
    c.same("conv b32 default limit: workspace sized to the algorithm", bool(needs) and max(needs) <= 512 << 20, True)
    pool = cuda.memory_pool  # Chainer's: CuPy 1.24 has no get_default_memory_pool
    pool.free_all_blocks()
    free = cupy.cuda.runtime.memGetInfo()[0]
    y_bytes = 32 * 64 * 112 * 112 * 4
    headroom = 2 * (x.nbytes + w.nbytes) + y_bytes + (8 << 20) + max(needs) // 4
    if max(needs) <= 16 << 20 or free <= headroom:
        c.same("conv b32: the default limit's algorithm needs more than 16 MiB (fallback testable)", False, True)
        return
    hog = cupy.empty((free - headroom,), dtype="b")
    try:
        c.same("conv b32 with the GPU almost full (fallback to 8 MiB) vs im2col", forward(True), want, atol=tol)
        fallback = [k for k in conv2d._lg_algorithms if k[1] == "fwd" and k[2] == x.shape and k[-1] == 8 << 20]
        c.same("conv b32 with the GPU almost full: the 8 MiB algorithm was asked", bool(fallback), True)
    finally:
        del hog
        pool.free_all_blocks()


def check_conv_algo_cache(c: Checker, cupy, rng) -> None:
    """convolution_2d with cuDNN, called repeatedly (chainer-cudnn-algo-cache answers from the second call on) and
    with another workspace limit in between, against the im2col path: forward and all three gradients. cuDNN may
    use TF32 for FP32 (as torch's default), hence a tolerance relative to each result's largest value."""
    import chainer
    import chainer.functions as F
    from chainer import cuda
    default = cuda.get_max_workspace_size()
    def one(xs: tuple, ws: tuple, stride: int, pad: int) -> None:
        x, w = rng.randn(*xs).astype("f"), (0.1 * rng.randn(*ws)).astype("f")
        b = rng.randn(ws[0]).astype("f")
        results = {}
        for run, (use_cudnn, workspace) in enumerate(((False, default), (True, default), (True, default),
                                                      (True, 0), (True, default))):
            cuda.set_max_workspace_size(workspace)
            try:
                vx, vw, vb = (chainer.Variable(cupy.asarray(a)) for a in (x, w, b))
                y = F.convolution_2d(vx, vw, vb, stride=stride, pad=pad, use_cudnn=use_cudnn)
                y.grad = cupy.asarray(numpy.cos(numpy.arange(y.data.size, dtype="f")).reshape(y.shape))
                y.backward()
                results[run] = [a.get() for a in (y.data, vx.grad, vw.grad, vb.grad)]
            finally:
                cuda.set_max_workspace_size(default)
        for run in range(1, 5):
            for name, got, want in zip(("y", "gx", "gW", "gb"), results[run], results[0]):
                c.same(f"conv {xs}*{ws} s{stride} cudnn call {run} {name}", got, want, rtol=0,
                       atol=1e-2 * float(abs(want).max()))

    for xs, ws, stride, pad in (((1, 3, 224, 224), (32, 3, 3, 3), 1, 1), ((8, 3, 64, 64), (16, 3, 7, 7), 2, 3),
                                ((4, 64, 28, 28), (64, 64, 3, 3), 1, 1)):
        guard(c, f"conv {xs}*{ws}", functools.partial(one, xs, ws, stride, pad))


def check_cudnn_host_cache(c: Checker, cupy, rng) -> None:
    """chainer-cudnn-host-cache: convolution (forward and gradients), max-pool, ReLU and softmax through cuDNN with
    descriptors made once per shape, for shapes that come back after others, against Chainer's CPU path; the same
    from a second thread (its own table); ReLU over more shapes than the table holds (it stays bounded)."""
    import threading

    import chainer
    import chainer.functions as F
    from cupy import cudnn
    if not hasattr(cudnn, "_lg_descriptor_cache"):
        return

    def layers(x, w, b, xp):
        vx, vw, vb = (chainer.Variable(xp.asarray(a)) for a in (x, w, b))
        h = F.relu(F.convolution_2d(vx, vw, vb, pad=1))
        y = F.softmax(F.reshape(F.max_pooling_2d(h, 2), (x.shape[0], -1)))
        y.grad = xp.asarray(numpy.cos(numpy.arange(y.data.size, dtype="f")).reshape(y.shape))
        y.backward()
        return [cupy.asnumpy(a) for a in (y.data, vx.grad, vw.grad, vb.grad)]

    def one(shape: tuple, label: str) -> None:
        x, w = rng.randn(*shape).astype("f"), (0.1 * rng.randn(8, shape[1], 3, 3)).astype("f")
        b = rng.randn(8).astype("f")
        want = layers(x, w, b, numpy)
        for name, got, ref in zip(("y", "gx", "gW", "gb"), layers(x, w, b, cupy), want):
            c.same(f"cudnn host cache {label} {shape} {name}", got, ref, atol=1e-2 * float(abs(ref).max()))

    for shape in ((1, 3, 16, 16), (2, 3, 17, 19), (1, 3, 16, 16), (4, 5, 8, 8), (2, 3, 17, 19)):
        guard(c, f"cudnn host cache {shape}", functools.partial(one, shape, "main thread"))
    thread = threading.Thread(target=guard, args=(c, "cudnn host cache thread",
                                                  functools.partial(one, (1, 3, 16, 16), "second thread")))
    thread.start()
    thread.join()
    limit = cudnn._LG_DESCRIPTOR_LIMIT
    for n in range(1, limit + 40):
        x = rng.randn(1, 1, 1, n).astype("f")
        if n % 97 == 1:
            c.same(f"cudnn relu 1x1x1x{n} with the table filling", F.relu(chainer.Variable(cupy.asarray(x))).data.get(),
                   numpy.maximum(x, 0))
        else:
            F.relu(chainer.Variable(cupy.asarray(x)))
    c.same("cudnn descriptor table bounded", len(cudnn._lg_descriptor_cache()) <= limit, True)


PARTS = {
    "lengths": check_lengths, "dtypes": check_dtypes, "axes": check_axes, "views": check_views,
    "empty": lambda c, cupy, rng: check_empty_and_kernels(c, cupy), "conv_workspace": check_conv_workspace,
    "conv_algo_cache": check_conv_algo_cache, "cudnn_host_cache": check_cudnn_host_cache,
}


def time_reductions(cupy) -> dict:
    """Median event-timed milliseconds of two reductions the speed bench reports (a full argmax, a last-axis
    sum), for a quick look at one build without the whole bench."""
    big = cupy.arange(1 << 26, dtype=numpy.float32) % 7
    rows = big.reshape(65536, 1024)
    out = {}
    for name, step in (("argmax_full_64M", lambda: big.argmax()), ("sum_axis-1_65536x1024", lambda: rows.sum(-1))):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        for _ in range(3):
            step()
        times = []
        for _ in range(30):
            start.record()
            step()
            stop.record()
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop))
        out[name] = round(sorted(times)[len(times) // 2], 4)
        print(f"{name}: {out[name]} ms", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--label", default="chainer")
    parser.add_argument("--json", help="write the summary here")
    parser.add_argument("--parts", nargs="+", choices=list(PARTS), default=list(PARTS),
                        help="which checks to run (default: all)")
    parser.add_argument("--time", action="store_true",
                        help="also time full argmax of 64 M floats and the last-axis sum of 65536x1024 (events)")
    args = parser.parse_args(argv)
    try:
        import cupy
    except Exception as exc:  # the table must say why there are no results
        summary = {"label": args.label, "checks_passed": 0, "checks_failed": 1,
                   "failures": [f"import cupy: {type(exc).__name__}: {str(exc)[-300:]}"]}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=1)
        print(f"reduction check {args.label}: import cupy failed: {exc}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    c, rng = Checker(), numpy.random.RandomState(0)
    for name in args.parts:
        try:
            PARTS[name](c, cupy, rng)
        except Exception as exc:
            c.failures.append(f"{name} crashed: {type(exc).__name__}: {str(exc)[:300]}")
    timings = time_reductions(cupy) if args.time else {}
    summary = {"label": args.label, "cupy_file": cupy.__file__, "timings_ms": timings,
               "split_patch": hasattr(cupy.core.core, "_lg_reduction_split"),
               "checks_passed": c.passed, "checks_failed": len(c.failures), "failures": c.failures[:50],
               "seconds": round(time.perf_counter() - start, 1)}
    print(f"reduction check {args.label}: {c.passed} passed, {len(c.failures)} failed", file=sys.stderr)
    for failure in c.failures[:20]:
        print("  FAIL " + failure, file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
