#!/usr/bin/env python3
"""Chainer 1.24's own softmax_cross_entropy on the GPU (the path chainer-softmax-ce-fused falls back to) against
NumPy, with what its forward keeps for the mean: the coefficient `_coeff` (dtype, shape, value) that its
`crossent_fwd` ReductionKernel reads as `raw T coeff`, and the per-element losses (reduce='no').

    PYTHONPATH=DIR python3 bench/gpu/chainer_sce_reference.py [--json FILE]

DIR is a `pip install --target` folder of a Chainer 1.24 wheel built by lgpatch, with or without the fused step
(its module flag is turned off when present). Session 9's check (chainer_sce_check.py) found the fused path equal
to NumPy everywhere and Chainer 1.24's own mean wrong in float64 for some shapes; this says where, on any build.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chainer_sce_check import reference  # Chainer 1.24's definition in float64 NumPy

CASES = [((500, 33), True), ((500, 33), False), ((8, 5, 16, 16), True), ((8, 5, 16, 16), False),
         ((64, 1), True), ((7, 3), False), ((4096, 1000), False)]


def one(chainer, cupy, shape: tuple, normalize: bool, dtype: str, rng) -> dict:
    F = chainer.functions
    x = rng.randn(*shape).astype(dtype)
    t = rng.randint(0, shape[1], size=(shape[0], *shape[2:])).astype(numpy.int32)  # no ignore_label rows
    want, _ = reference(x, t, normalize, "mean", numpy.ones((), "d"))
    losses, _ = reference(x, t, normalize, "no", numpy.ones(t.shape, "d"))
    y = F.softmax_cross_entropy(chainer.Variable(cupy.asarray(x)), chainer.Variable(cupy.asarray(t)),
                                normalize=normalize)
    coeff = y.creator._coeff
    per = F.softmax_cross_entropy(chainer.Variable(cupy.asarray(x)), chainer.Variable(cupy.asarray(t)),
                                  reduce="no")
    coeff_array = coeff if isinstance(coeff, cupy.ndarray) else None
    return {"shape": list(shape), "dtype": dtype, "normalize": normalize,
            "loss": float(y.data.get()), "numpy_loss": float(want),
            "loss_ok": bool(numpy.isclose(float(y.data.get()), want, rtol=1e-4)),
            "per_element_ok": bool(numpy.allclose(per.data.get(), losses, rtol=1e-4, atol=1e-5)),
            "coeff_type": type(coeff).__name__,
            "coeff_dtype": str(coeff_array.dtype) if coeff_array is not None else None,
            "coeff_shape": list(coeff_array.shape) if coeff_array is not None else None,
            "coeff_value": float(coeff_array.get()) if coeff_array is not None else float(coeff),
            "coeff_want": 1.0 / (t.size if normalize else shape[0])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    import chainer
    import chainer.functions
    import cupy
    try:
        from chainer.functions.loss import _lg_sce_fused
        _lg_sce_fused.enabled = False
    except ImportError:
        pass
    rng, rows = numpy.random.RandomState(0), []
    for dtype in ("f", "d"):
        for shape, normalize in CASES:
            rows.append(one(chainer, cupy, shape, normalize, dtype, rng))
            print(json.dumps(rows[-1]), flush=True)
    bad = [r for r in rows if not r["loss_ok"]]
    print(f"Chainer 1.24's mean: {len(rows) - len(bad)}/{len(rows)} equal to NumPy", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
