#!/usr/bin/env python3
"""chainer-linear-cublas on the GPU: the direct cuBLAS + cuDNN path against CuPy's dot and += (the path it replaces).

    PYTHONPATH=DIR python3 bench/gpu/chainer_linear_check.py [--json FILE]

DIR is a `pip install --target` folder of a Chainer 1.24 wheel built by lgpatch with the step. For each case (batch
1 to 64, in 2 to 4096, out 1 to 1000, float32, float64, float16, with and without bias, an input that is not
C-contiguous, 4-d inputs as a conv stack hands them on), `F.linear` forward with the step on and off
(`chainer.functions.connection.linear._lg_enabled`) must give *identical* outputs (the same cuBLAS call, one rounded
addition of the bias either way), and the gradients of x, W, b (backward is unchanged) identical too; each output
is also compared with NumPy in float64 (relative 1e-5 for float32, 1e-3 for float16). Whether the direct path ran
is read from a counter wrapped around it, so the cases it must decline (float16, one output, a non-contiguous
input) are checked to decline. Host time of the batch-1 layer, path on and off alternating, at the end.
Prints one line a case and `N of N passed`; exits 1 on a failure. About 10 s.
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

# (batch, in, out, dtype, bias, contiguous input, 4-d input); expected: the direct path runs
CASES = [(1, 128, 2, "f", True, True, True), (1, 128, 2, "f", False, True, False),
         (32, 128, 10, "f", True, True, False), (64, 4096, 1000, "f", True, True, False),
         (3, 2, 5, "f", True, True, False), (1, 512 * 7 * 7, 1024, "f", True, True, True),
         (8, 300, 7, "d", True, True, False), (1, 64, 3, "d", False, True, False),
         (4, 128, 16, "e", True, True, False), (1, 128, 1, "f", True, True, False),
         (16, 128, 8, "f", True, False, False), (5, 1, 4, "f", True, True, False)]


def _runs(n: int, k: int, out: int, dtype: str, contiguous: bool) -> bool:
    return dtype in "fd" and contiguous and n >= 1 and k >= 2 and out >= 2


def check_case(case: tuple, rng: Any) -> dict:
    import chainer
    import chainer.functions as F
    import cupy
    from chainer.functions.connection import linear

    n, k, out, dtype, bias, contiguous, four_d = case
    shape = (n, k // 4, 2, 2) if four_d and k % 4 == 0 else (n, k)
    x0 = rng.randn(*shape).astype(dtype)
    if not contiguous:
        x0 = numpy.asfortranarray(x0)
    W0 = (rng.randn(out, k) / numpy.sqrt(k)).astype(dtype)
    b0 = rng.randn(out).astype(dtype) if bias else None
    gy0 = rng.randn(n, out).astype(dtype)
    calls = {"direct": 0}
    original = linear._lg_linear_gpu

    def counted(x: Any, W: Any, b: Any) -> Any:
        y = original(x, W, b)
        calls["direct"] += y is not None
        return y

    linear._lg_linear_gpu = counted
    results = {}
    try:
        for mode in (True, False):
            linear._lg_enabled = mode
            x = chainer.Variable(cupy.asarray(x0) if contiguous else cupy.asfortranarray(cupy.asarray(x0)))
            W = chainer.Variable(cupy.asarray(W0))
            args = (x, W) if b0 is None else (x, W, chainer.Variable(cupy.asarray(b0)))
            y = F.linear(*args)
            y.grad = cupy.asarray(gy0)
            y.backward()
            results[mode] = [cupy.asnumpy(a) for a in [y.data] + [v.grad for v in args]]
    finally:
        linear._lg_linear_gpu = original
        linear._lg_enabled = True
    identical = all(numpy.array_equal(a, b) for a, b in zip(results[True], results[False]))
    ref = x0.reshape(n, -1).astype("d") @ W0.T.astype("d") + (b0.astype("d") if bias else 0)
    rel = float(numpy.abs(results[True][0] - ref).max() / max(numpy.abs(ref).max(), 1e-30))
    tol = {"f": 1e-5, "d": 1e-12, "e": 1e-2}[dtype]
    ran = calls["direct"] == 1
    ok = identical and rel <= tol and ran == _runs(n, k, out, dtype, contiguous)
    return {"case": list(case), "identical_on_off": identical, "relative_vs_numpy": rel, "direct_path_ran": ran,
            "expected_to_run": _runs(n, k, out, dtype, contiguous), "ok": ok}


def host_time(rounds: int) -> dict:
    import chainer
    import chainer.links as L
    import cupy
    from chainer.functions.connection import linear

    fc = L.Linear(128, 2)
    fc.to_gpu()
    x = chainer.Variable(cupy.asarray(numpy.random.RandomState(0).randn(1, 128, 1, 1).astype("f")), volatile="on")
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for mode in (True, False):
            linear._lg_enabled = mode
            for _ in range(50):
                fc(x)
            cupy.cuda.Stream.null.synchronize()
            start = time.perf_counter()
            for _ in range(500):
                fc(x)
            cupy.cuda.Stream.null.synchronize()
            times[mode].append((time.perf_counter() - start) / 500 * 1e6)
    linear._lg_enabled = True
    return {"linear_b1_us_on": round(statistics.median(times[True]), 2),
            "linear_b1_us_off": round(statistics.median(times[False]), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = numpy.random.RandomState(0)
    rows = []
    for case in CASES:
        try:
            rows.append(check_case(case, rng))
        except Exception as exc:  # a failing case is reported, the rest still run
            rows.append({"case": list(case), "ok": False, "error": repr(exc)[:300]})
        print(json.dumps(rows[-1]), flush=True)
    timing = host_time(args.rounds)
    print(json.dumps(timing), flush=True)
    passed = sum(r["ok"] for r in rows)
    print(f"{passed} of {len(rows)} passed", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cases": rows, "host_time": timing}, indent=1))
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
