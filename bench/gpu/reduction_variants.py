#!/usr/bin/env python3
"""Variants of CuPy 1.24's reduction kernel, timed on the GPU without rebuilding CuPy: what a template change
would buy before it becomes a patch.

    PYTHONPATH=DIR python bench/gpu/reduction_variants.py --pxi reduction.pxi [--parts] [--json FILE]

DIR is a `pip install --target` folder of lgpatch's Chainer wheel (its CuPy compiles and launches the kernels);
--pxi is the patched cupy/core/reduction.pxi of the same build (its kernel template is rendered here exactly as
_get_simple_reduction_kernel renders it). Variants: the template as it is, and with the input indexer's
per-element division by each dimension's size replaced by a multiply-and-shift with divisors computed once per
thread (Granlund-Montgomery), each checked against NumPy. Per shape it runs the launch shapes worth comparing
(block_stride: outputs per block; nsplit: blocks per group of outputs; for a template that has it, also the
rows layout: each output's lanes neighbouring threads) and prints median milliseconds and
the share of the device-to-device copy bandwidth measured in the same run (bytes = the input, read once). A
template that already divides by multiply and shift is timed as it is. Its first run (docs/gpu-proofs.md,
session 8, call 5) took the copy from CuPy's own copy kernel, a quarter of it.

--parts (instead of the cases above; bench/gpu/_reduction_runs.py): the sum over axes (0,2) of 32x64x32768, its
4-D form (0,2,3) of 32x64x128x256 and the in-L2 8x64x112x112, by the template as it is (its own indexer) and by
standalone kernels that split its per-element cost (the template's division against an odometer, 64- against
32-bit offsets) and walk whole contiguous runs (several loads or float4 in flight), each at the split the
template's rule chooses and a few others, each checked against NumPy (max abs error printed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import string
import sys
from pathlib import Path

import _reduction_runs

FASTDIV = r"""
// Division of an index by the indexer's sizes with a multiply and a shift (Granlund & Montgomery 1994,
// unsigned, exact for every 32-bit dividend): the divisors are made once per thread, not per element.
struct _lg_udiv {
  unsigned int d, m, l;
};

__device__ __forceinline__ _lg_udiv _lg_udiv_make(unsigned int d) {
  _lg_udiv r;
  r.d = d;
  r.l = d > 1 ? 32 - __clz(d - 1) : 0;  // ceil(log2(d))
  r.m = (unsigned int)((((unsigned long long)1 << 32) * (((unsigned long long)1 << r.l) - d)) / d + 1);
  return r;
}

__device__ __forceinline__ unsigned int _lg_udiv_q(const _lg_udiv& v, unsigned int n) {
  unsigned long long t = __umulhi(v.m, n);
  return (unsigned int)((t + n) >> v.l);
}

#define _LG_MAX_DIMS 16
template <int N>
__device__ __forceinline__ void _lg_divs_init(_lg_udiv* divs, const CIndexer<N>& ind) {
  for (int dim = 1; dim < N && dim < _LG_MAX_DIMS; ++dim) divs[dim] = _lg_udiv_make(ind._lg_shape(dim));
}

template <int N>
__device__ __forceinline__ void _lg_index_set(CIndexer<N>& ind, const _lg_udiv* divs, int i) {
  if (N > _LG_MAX_DIMS) {
    ind.set(i);
    return;
  }
  int* index = const_cast<int*>(ind.get());
  unsigned int a = i;
  for (int dim = N; --dim > 0; ) {
    unsigned int q = _lg_udiv_q(divs[dim], a);
    index[dim] = a - q * divs[dim].d;
    a = q;
  }
  if (N > 0) index[0] = a;
}
"""


def header(cupy_dir: Path) -> str:
    """carray.cuh with a read accessor for an indexer's sizes (CIndexer<0> answers 1)."""
    text = (cupy_dir / "core" / "carray.cuh").read_text()
    if "_lg_shape" in text:  # a build with cupy-reduction-layout has it already
        return text
    general = "class CIndexer {\nprivate:\n  int size_;\n  int shape_[ndim];\n  int index_[ndim];\n\npublic:\n"
    assert general in text, "carray.cuh: CIndexer not as expected"
    text = text.replace(general, general + "  __device__ int _lg_shape(int dim) const { return shape_[dim]; }\n")
    zero = "class CIndexer<0> {\nprivate:\n  int size_;\n\npublic:\n"
    assert zero in text, "carray.cuh: CIndexer<0> not as expected"
    return text.replace(zero, zero + "  __device__ int _lg_shape(int) const { return 1; }\n")


def template(pxi: str, fastdiv: bool) -> str:
    found = re.search(r"module_code = string\.Template\('''(.*?)'''\)", pxi, re.S)
    assert found, "reduction.pxi has no kernel template"
    text = found.group(1)
    if fastdiv:
        count = text.count("_in_ind.set(_j);")
        assert count >= 2, count
        text = text.replace("_in_ind.set(_j);", "_lg_index_set(_in_ind, _lg_divs, _j);")
        start = "      unsigned int _tid = threadIdx.x;\n"
        assert start in text
        text = text.replace(start, start + "      _lg_udiv _lg_divs[_LG_MAX_DIMS];\n"
                                           "      _lg_divs_init(_lg_divs, _in_ind);\n")
        typedef = "    typedef ${reduce_type} _type_reduce;"
        text = text.replace(typedef, FASTDIV + "\n" + typedef)
    return text


def kernel_source(pxi: str, fastdiv: bool, in_ndim: int, name: str) -> str:
    params = (f"CArray<float, {in_ndim}> _raw_in0, CArray<float, 1> _raw_out0, CIndexer<{in_ndim}> _in_ind, "
              "CIndexer<1> _out_ind, int _block_stride, CArray<unsigned char, 1> _lg_part, "
              "CArray<unsigned int, 1> _lg_count, int _lg_nsplit")
    return string.Template(template(pxi, fastdiv)).substitute(
        name=name, block_size=512, reduce_type="float", params=params, identity="0", reduce_expr="a + b",
        pre_map_expr="in0", post_map_expr="out0 = a", preamble="",
        type_preamble="typedef float type_in0_raw; typedef float type_out0_raw;",
        input_expr="const type_in0_raw in0 = _raw_in0[_in_ind.get()];",
        output_expr="type_out0_raw &out0 = _raw_out0[_out_ind.get()];")


# --parts: the template with one cost taken out at a time. fast-const: the per-element branch on _lg_fast (uniform,
# true here) between the four loads of a step removed; idx32: CArray's per-dimension 64-bit offset products made
# 32-bit (byte offsets below 2^31, as in every shape --parts times).
TEMPLATE_MODS = ("as-is", "fast-const", "fast-const-idx32")


FAST_CALL = "_lg_index_set(_in_ind, _lg_divs, _lg_fast, _j);"  # the per-element division the mods edit


def template_mods(pxi: str) -> tuple[str, ...]:
    """The mods this template takes: all where it divides per element (cupy-reduction-layout's), as-is only where
    it does not (cupy-reduction-odometer's steps its indices instead)."""
    return TEMPLATE_MODS if pxi.count(FAST_CALL) >= 2 else TEMPLATE_MODS[:1]


def template_mod(source: str, mod: str) -> str:
    if mod == "as-is":
        return source
    assert source.count(FAST_CALL) >= 2, "template: no fast-division call to fix"
    source = source.replace(FAST_CALL, "_lg_index_set(_in_ind, _lg_divs, true, _j);")
    if mod.endswith("idx32"):
        wide = "ptr += static_cast<ptrdiff_t>(strides_[dim]) * idx[dim];"
        assert source.count(wide) == 1, "carray.cuh: CArray::operator[](const int*) not as expected"
        source = source.replace(wide, "ptr += (int)(strides_[dim] * idx[dim]);")
    return source


def median_ms(cupy, launch, reps: int = 20) -> float:
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(3):
        launch()
    times = []
    for _ in range(reps):
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pxi", type=Path, required=True)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--parts", action="store_true", help="time the runs/odometer variants (see above)")
    args = parser.parse_args()
    import cupy
    import numpy
    from cupy.core.core import Indexer

    pxi = args.pxi.read_text()
    head = header(Path(cupy.__file__).parent)
    sm = cupy.cuda.runtime.deviceGetAttribute(16, cupy.cuda.Device().id)
    slots = 4 * sm
    part = cupy.zeros((32 * 2 * slots * 32,), numpy.uint8)
    count = cupy.zeros((slots,), numpy.uint32)
    big = cupy.arange(1 << 26, dtype=numpy.float32) % 7
    dst = cupy.empty_like(big)
    # cudaMemcpyAsync device to device (kind 3) into a buffer made once: the copy bandwidth chainer_speed.py
    # measures (CuPy 1.24's x.copy() is an elementwise kernel plus an allocation, well below it).
    copy_ms = median_ms(cupy, lambda: cupy.cuda.runtime.memcpyAsync(dst.data.ptr, big.data.ptr, big.nbytes, 3, 0))
    copy_gbs = 2 * big.nbytes / copy_ms / 1e6
    print(f"copy bandwidth {copy_gbs:.1f} GB/s", flush=True)
    # (case, input shape, reduced axes, launch shapes (block_stride, nsplit, rows layout) to time). The rows layout
    # exists only in templates that have it: cupy-reduction-layout's as merged compiles it under a define in the
    # kernel's preamble; its first version (session 9, calls 2 and 4) read bit 16 of _block_stride at run time.
    text = template(pxi, False)
    if args.parts:
        _reduction_runs.HEAD[0] = head

        def template_row(case, x, axes, nsplit, want, mod):
            """The template (template_mod's `mod` of it), one output a block, nsplit blocks an output; None where
            the mod would force the fast division on a launch whose threads take fewer than 8 elements (the
            template makes the divisors only from 8 on)."""
            kept = tuple(d for d in range(x.ndim) if d not in axes)
            if mod != "as-is" and x.size // math.prod(x.shape[d] for d in kept) // nsplit < 8 * 512:
                return None
            xt = x.transpose(axes + kept)
            out_shape = tuple(x.shape[d] for d in kept)
            kern = cupy.cuda.compile_with_cache(template_mod(
                head + kernel_source(pxi, False, xt.ndim, "lg_variant_as_is"), mod)).get_function("lg_variant_as_is")
            out = cupy.empty(out_shape, numpy.float32)
            kargs = [xt, out, Indexer(xt.shape), Indexer(out_shape), numpy.int32(1), part, count,
                     numpy.int32(nsplit)]
            ms = median_ms(cupy, lambda: kern((out.size * nsplit,), (512,), kargs, shared_mem=32 * 512))
            got = cupy.asnumpy(out).astype("d")
            return {"case": case, "variant": f"template-{xt.ndim}d-{mod}", "nsplit": nsplit, "ms": round(ms, 4),
                    "pct_of_copy": round(100 * x.nbytes / ms / 1e6 / copy_gbs, 1),
                    "max_abs_err": float(numpy.abs(got - want).max()),
                    "equal_to_numpy": bool(numpy.array_equal(got.astype(numpy.float32), want.astype(numpy.float32)))}
        mods = template_mods(pxi)
        if len(mods) == 1:
            print("template: no per-element division (an odometer's), timed as it is only", flush=True)
        results = _reduction_runs.run_parts(cupy, numpy, big, copy_gbs, median_ms, sm, template_row, mods)
        if args.json:
            args.json.write_text(json.dumps({"copy_gbs": copy_gbs, "sm_count": sm, "rows": results}, indent=1))
        return 0 if all(r["equal_to_numpy"] for r in results) else 1
    rows_by_bit = "_block_stride & 0x10000" in text
    rows = rows_by_bit or "#ifdef _LG_ROWS_LAYOUT" in text
    cases = [
        ("last-axis sum 65536x1024", (65536, 1024), (1,),
         [(4, 1, False), (8, 1, False), (16, 1, False)] + ([(4, 1, True), (8, 1, True), (16, 1, True),
                                                             (32, 1, True)] if rows else [])),
        ("last-axis sum 6272x1024", (6272, 1024), (1,),
         [(8, 1, False)] + ([(8, 1, True), (16, 1, True)] if rows else [])),
        ("last-axis sum 65536x1000", (65536, 1000), (1,),
         [(8, 1, False)] + ([(8, 1, True), (16, 1, True)] if rows else [])),
        ("axes (0,2) sum 32x64x32768 (= axes (0,2,3) of 32x64x128x256)", (32, 64, 32768), (0, 2),
         [(1, n, False) for n in (4, 8, 9, 16, 17, 33, 66, 132)]),
        ("first-axis sum 65536x1024", (65536, 1024), (0,), [(32, 17, False), (32, 8, False)]),
    ]
    # A template that already divides by multiply and shift (cupy-reduction-layout) is timed as it is.
    fastdivs = [False, True] if "_in_ind.set(_j);" in template(pxi, False) else [False]
    results = []
    for case, shape, axes, launches in cases:
        x = big[:int(numpy.prod(shape))].reshape(shape)
        kept = tuple(d for d in range(len(shape)) if d not in axes)
        xt = x.transpose(axes + kept)
        out_shape = tuple(shape[d] for d in kept)
        want = cupy.asnumpy(x).sum(axis=axes, dtype="d")
        for fastdiv in fastdivs:
            name = f"lg_variant_{'fastdiv' if fastdiv else 'as_is'}"
            source = head + kernel_source(pxi, fastdiv, xt.ndim, name)
            kerns = {by_rows: cupy.cuda.compile_with_cache(
                source if rows_by_bit or not by_rows else "#define _LG_ROWS_LAYOUT 1\n" + source).get_function(name)
                for by_rows in {launch[2] for launch in launches}}
            for stride, nsplit, by_rows in launches:
                kern = kerns[by_rows]
                out = cupy.empty(out_shape, numpy.float32)
                groups = -(-out.size // stride)
                grid = groups * nsplit if nsplit > 1 else min(groups, 65536)
                bit = 1 << 16 if by_rows and rows_by_bit else 0
                kargs = [xt, out, Indexer(xt.shape), Indexer(out_shape), numpy.int32(stride | bit), part, count,
                         numpy.int32(nsplit)]

                def launch(kern=kern, grid=grid, kargs=kargs):
                    kern((grid,), (512,), kargs, shared_mem=32 * 512)
                ms = median_ms(cupy, launch)
                ok = bool(numpy.array_equal(cupy.asnumpy(out), want.astype(numpy.float32)))
                row = {"case": case, "fastdiv": fastdiv, "block_stride": stride, "nsplit": nsplit,
                       "rows_layout": by_rows, "ms": round(ms, 4),
                       "pct_of_copy": round(100 * x.nbytes / ms / 1e6 / copy_gbs, 1), "equal_to_numpy": ok}
                results.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"copy_gbs": copy_gbs, "sm_count": sm, "rows": results}, indent=1))
    return 0 if all(r["equal_to_numpy"] for r in results) else 1


if __name__ == "__main__":
    os.environ.setdefault("CUPY_CACHE_DIR", "/tmp/lg-variant-cache")
    sys.exit(main())
