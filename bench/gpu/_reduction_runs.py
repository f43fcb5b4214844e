"""reduction_variants.py --parts: where the time of a sum over axes (0,2,3) of an NCHW array goes.

Standalone kernels for the shape class "outputs C (one kept axis), each a sum of N runs of L contiguous elements"
(axes (0,2) of N×C×L, axes (0,2,3) of N×C×H×W with L = H*W), all 512 threads a block, C*nsplit blocks, block b
reducing slice b % nsplit of output b // nsplit and the last block of an output combining the nsplit partials
(cupy-reduction-grid's arrival counter, reset by that block). Element offsets are in elements; the input is the
C-contiguous array seen flat. Kernels (#defines in front of _reduction_runs.cu, each a kernel of its own):

- strided, the template's visiting order (thread t of slice s reads reduced flat index J = t + 512*s, then
  J += 512*nsplit, UNROLL loads a step, the rest one by one), with the index of each element from
  - DIV: the template's work, J*C + c divided by C and by L with multiply and shift per element (cupy-reduction-
    layout's _lg_udiv), then n*sN + l*sL + c*sC;
  - ODO: an odometer: (n, l) and the offset made once by a division, then per element (step = kq*L + kr)
    l += kr, offset += kq*sN + kr and, where l >= L, l -= L and offset += sN - L (adds, a compare, two selects:
    no branch between a step's loads, which are issued after its UNROLL offsets);
  each with 64-bit (as the template) or 32-bit (IDX32) offsets.
- runs: the slice's lanes walk tiles of whole runs, TILE = 512*VEC*UNROLL elements: tile t (t = s, s + nsplit,
  ...) of the N*ceil(L/TILE) of the output is run n = t / tiles_per_run at offset (t % tiles_per_run)*TILE, one
  division a tile; thread k reads (u*512 + k)*VEC, u < UNROLL, of the tile: UNROLL independent loads (float4
  when VEC = 4: L, the strides and the base multiples of 4 and 16-byte aligned), bounds checked only in a run's
  last, partial tile.

`python bench/gpu/_reduction_runs.py --check [--cuh carray.cuh]` (no GPU) emulates every kernel's index mapping
for the timed shapes and splits (each element read exactly once) and, with --cuh, compiles every kernel with nvcc
for sm_90.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
from pathlib import Path

BLOCK = 512
# (case, shape, reduced axes, (N, C, L)): the runs shape class; the 4-D form has the same (N, C, L).
SHAPES = [
    ("axes (0,2) 32x64x32768", (32, 64, 32768), (0, 2), (32, 64, 32768)),
    ("axes (0,2,3) 32x64x128x256", (32, 64, 128, 256), (0, 2, 3), (32, 64, 32768)),
    ("axes (0,2,3) 8x64x112x112 (in L2)", (8, 64, 112, 112), (0, 2, 3), (8, 64, 12544)),
]
# name: defines. VEC/UNROLL for runs; MODE 0 = DIV, 1 = ODO for strided.
VARIANTS = {
    "strided-div64-u4": dict(KIND=0, MODE=0, IDX32=0, UNROLL=4),
    "strided-div32-u4": dict(KIND=0, MODE=0, IDX32=1, UNROLL=4),
    "strided-odo64-u4": dict(KIND=0, MODE=1, IDX32=0, UNROLL=4),
    "strided-odo32-u4": dict(KIND=0, MODE=1, IDX32=1, UNROLL=4),
    "strided-odo32-u8": dict(KIND=0, MODE=1, IDX32=1, UNROLL=8),
    "runs-vec1-u4-64": dict(KIND=1, VEC=1, UNROLL=4, IDX32=0),
    "runs-vec1-u4-32": dict(KIND=1, VEC=1, UNROLL=4, IDX32=1),
    "runs-vec1-u8-32": dict(KIND=1, VEC=1, UNROLL=8, IDX32=1),
    "runs-vec4-u1-32": dict(KIND=1, VEC=4, UNROLL=1, IDX32=1),
    "runs-vec4-u2-32": dict(KIND=1, VEC=4, UNROLL=2, IDX32=1),
    "runs-vec4-u4-32": dict(KIND=1, VEC=4, UNROLL=4, IDX32=1),
}
EXTRA_SPLITS = (4, 8, 16, 33, 66)  # 8: 512 blocks for 64 outputs, one wave of 528 slots



def source(name: str) -> str:
    """The kernel of variant `name`: its defines, then _reduction_runs.cu (put carray.cuh in front)."""
    defines = {"BLOCK": BLOCK, "KIND": 0, "MODE": 0, "IDX32": 0, "VEC": 1, "UNROLL": 4, **VARIANTS[name]}
    text = Path(__file__).with_name("_reduction_runs.cu").read_text()
    return "".join(f"#define {k} {v}\n" for k, v in defines.items()) + text


def applies(name: str, n: int, c: int, length: int) -> bool:
    """float4 runs need L (so every run's base, with C-contiguous strides) a multiple of 4; 32-bit offsets need
    the array below 2^31 elements; the strided order needs N*L*C below 2^31 (the template's int index)."""
    v = VARIANTS[name]
    if v.get("VEC", 1) == 4 and length % 4:
        return False
    return n * c * length < 2**31


def _udiv(a, d: int):
    """lg_udiv_make / lg_udiv_q as the kernel has them (32-bit multiply and shift), on arrays."""
    bits = int(d - 1).bit_length() if d > 1 else 0
    m = ((1 << 32) * ((1 << bits) - d)) // d + 1 & 0xFFFFFFFF
    return (((a * m) >> 32) + a) >> bits


def _strided_reads(v: dict, jj, n: int, c_count: int, length: int, nsplit: int, c: int) -> list:
    """KIND 0 for one slice: jj = the 512 threads' first J; the main loop (UNROLL offsets, then the loads), then
    the tail, each thread on its own until its own condition fails."""
    import numpy as np

    unroll, s_n, s_c = v["UNROLL"], c_count * length, length
    total, step = n * length, BLOCK * nsplit
    kq, kr = divmod(step, length)
    lane_l = jj % length
    off = (jj // length) * s_n + c * s_c + lane_l
    got = []

    def at(j, mask):
        if v["MODE"] == 0:  # lg_div_off
            jc = j[mask] * c_count + c
            q = _udiv(jc, c_count)
            nn = _udiv(q, length)
            return nn * s_n + (q - nn * length) + (jc - q * c_count) * s_c
        return off[mask]

    def advance(mask, lane_l, off):  # LG_ADVANCE (MODE 1)
        lane_l = np.where(mask, lane_l + kr, lane_l)
        off = np.where(mask, off + kq * s_n + kr, off)
        carry = mask & (lane_l >= length)
        return np.where(carry, lane_l - length, lane_l), np.where(carry, off + s_n - length, off)

    while (full := jj + (unroll - 1) * step < total).any():
        for u in range(unroll):
            got.append(at(jj + u * step, full))
            lane_l, off = advance(full, lane_l, off)
        jj = np.where(full, jj + unroll * step, jj)
    while (live := jj < total).any():
        got.append(at(jj, live))
        lane_l, off = advance(live, lane_l, off)
        jj = np.where(live, jj + step, jj)
    return got


def reads(name: str, n: int, c_count: int, length: int, nsplit: int, c: int) -> list:
    """The element offsets each block of output c reads: [(slice, offsets array)], the kernel's expressions per
    thread, vectorised over the 512 threads."""
    import numpy as np

    v = {"VEC": 1, "MODE": 0, **VARIANTS[name]}
    tid = np.arange(BLOCK, dtype=np.int64)
    out = []
    for s in range(nsplit):
        got = []
        if v["KIND"] == 0:
            got = _strided_reads(v, tid + s * BLOCK, n, c_count, length, nsplit, c)
        else:
            vec, unroll = v["VEC"], v["UNROLL"]
            tile = BLOCK * vec * unroll
            per_run = -(-length // tile)
            for t in range(s, n * per_run, nsplit):
                run = t // per_run
                start = (t - run * per_run) * tile
                base = run * c_count * length + c * length + start
                left = length - start
                for u in range(unroll):
                    first = (u * BLOCK + tid) * vec
                    live = first < left if left < tile else np.ones(BLOCK, bool)
                    for e in range(vec):
                        got.append(base + first[live] + e)
        out.append((s, np.concatenate(got) if got else np.zeros(0, np.int64)))
    return out


def emulate(name: str, n: int, c_count: int, length: int, nsplit: int) -> None:
    """Every element of outputs 0 and C-1 read exactly once, by that output's blocks only."""
    import numpy as np

    for c in sorted({0, c_count - 1}):
        offs = np.concatenate([o for _, o in reads(name, n, c_count, length, nsplit, c)])
        want = (np.arange(n)[:, None] * c_count * length + c * length + np.arange(length)[None, :]).ravel()
        assert offs.size == want.size, (name, nsplit, c, offs.size, want.size)
        assert np.array_equal(np.sort(offs), want), (name, nsplit, c)


def splits(rule: int) -> list[int]:
    return sorted({rule, *EXTRA_SPLITS})


def split_rule(in_size: int, out_size: int, sm: int) -> int:
    """cupy-reduction-grid's rule for one output a block (_lg_reduction_split, block_stride 1, 512 threads)."""
    slots = 4 * sm
    if out_size >= slots:
        return 1
    return max(1, min((in_size // out_size) // (BLOCK * 8), -(-slots // out_size), 1024))


def run_parts(cupy, numpy, big, copy_gbs: float, median_ms, sm: int, template_row, template_mods) -> list[dict]:
    """Time every variant on every shape, and the template by template_row(case, x, axes, nsplit, want, mod) for
    each of template_mods."""
    import json

    rows, timed = [], set()
    kernels = {name: cupy.cuda.compile_with_cache(HEAD[0] + source(name)).get_function("lg_parts")
               for name in VARIANTS}
    for case, shape, axes, (n, c_count, length) in SHAPES:
        x = big[:int(numpy.prod(shape))].reshape(shape)
        want = cupy.asnumpy(x).sum(axis=axes, dtype="d")
        rule = split_rule(x.size, c_count, sm)
        for mod, nsplit in itertools.product(template_mods, splits(rule)):
            row = template_row(case, x, axes, nsplit, want, mod)
            if row is not None:  # None: a mod this launch cannot take
                rows.append(row)
                print(json.dumps(row), flush=True)
        if (n, c_count, length) in timed:  # the 4-D form: the same runs, the same kernels' arguments
            continue
        timed.add((n, c_count, length))
        flat = big[:x.size]
        part = cupy.zeros((c_count * 1024,), numpy.float32)
        count = cupy.zeros((c_count,), numpy.uint32)
        for name, nsplit in itertools.product(VARIANTS, splits(rule)):
            if not applies(name, n, c_count, length):
                continue
            out = cupy.empty((c_count,), numpy.float32)
            kargs = [flat, out, part, count, numpy.int32(n), numpy.int32(c_count), numpy.int32(length),
                     numpy.int64(c_count * length), numpy.int64(length), numpy.int32(nsplit)]

            def launch(kern=kernels[name], grid=c_count * nsplit, kargs=kargs):
                kern((grid,), (BLOCK,), kargs)
            ms = median_ms(cupy, launch)
            got = cupy.asnumpy(out).astype("d")
            err = float(numpy.abs(got - want).max())
            rows.append({"case": case, "variant": name, "nsplit": nsplit, "rule_nsplit": rule, "ms": round(ms, 4),
                         "pct_of_copy": round(100 * x.nbytes / ms / 1e6 / copy_gbs, 1), "max_abs_err": err,
                         "equal_to_numpy": bool(numpy.array_equal(got.astype(numpy.float32),
                                                                  want.astype(numpy.float32)))})
            print(json.dumps(rows[-1]), flush=True)
    return rows


HEAD = [""]  # carray.cuh as reduction_variants.header() gives it, set by the caller


def check(cuh: Path | None, sm: int = 132) -> int:
    for case, _shape, _axes, (n, c_count, length) in SHAPES:
        rule = split_rule(n * c_count * length, c_count, sm)
        for name in VARIANTS:
            if not applies(name, n, c_count, length):
                print(f"{case}: {name} does not apply")
                continue
            for nsplit in splits(rule):
                emulate(name, n, c_count, length, nsplit)
            print(f"{case}: {name} reads every element once at nsplit {splits(rule)} (rule {rule})", flush=True)
    if cuh is None:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in VARIANTS:
            cu = Path(tmp) / f"{name}.cu"
            cu.write_text(cuh.read_text() + source(name))
            proc = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-Xptxas", "-v", "-o", str(cu.with_suffix(
                ".cubin")), str(cu)], capture_output=True, text=True)
            regs = [ln.strip() for ln in proc.stderr.splitlines() if "registers" in ln]
            print(f"nvcc sm_90 {name}: rc {proc.returncode} {regs[-1] if regs else proc.stderr[-2000:]}")
            if proc.returncode:
                return 1
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", required=True)
    parser.add_argument("--cuh", type=Path, help="cupy/core/carray.cuh of an applied tree: also compile")
    sys.exit(check(parser.parse_args().cuh))
