"""cupy-reduction-layout on the real Chainer 1.24.0 sdist: it applies (strict) as one commit on reduction.pxi after
cupy-reduction-grid, the kernel template it leaves compiles with the real nvcc (sm_90 and PTX for compute_75), a
model of its index mapping and four-element steps, tied to the template's own expressions, visits every element
once in the one-by-one order and gives NumPy's results, and its host-side rules (block_stride from the layout,
split of groups, buffer bounds, launch grid) match independent statements of them.

On the GPU, bench/gpu/chainer_reduction_check.py runs the same reductions for real (layout shapes, views, a
_J-reading ReductionKernel); the template here is the one a CuPy build of this tree compiles at run time.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy
import pytest
from helpers import git, requires_nvcc
from helpers.chainer_cpu import assert_gated_like_the_speed_steps
from helpers.reduction_template import (
    applied_in_order,
    assert_compiles,
    bench_modules,
    commit_of,
    kernels,
    python_function,
    template,
    text_at,
)

pytestmark = [pytest.mark.integration]

STEP = "cupy-reduction-layout/reduction-layout"
GRID = "cupy-reduction-grid/reduction-split-grid"
PXI = "cupy/core/reduction.pxi"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "reduction-layout", GRID, STEP)


@pytest.fixture(scope="module")
def pxi(tree: Path) -> str:
    return text_at(tree, STEP, PXI)


def test_step_is_gated_to_cuda_9_and_newer(lgpatch) -> None:
    assert_gated_like_the_speed_steps(lgpatch, STEP)


def test_applies_as_one_commit_on_the_template_and_the_indexer(tree: Path) -> None:
    files = git(tree, "show", "--name-only", "--format=", commit_of(tree, STEP)).split()
    assert sorted(files) == ["cupy/core/carray.cuh", PXI]
    # carray.cuh gains a read accessor only: CIndexer::set and get are CuPy 1.24's.
    diff = git(tree, "show", "--format=", commit_of(tree, STEP), "--", "cupy/core/carray.cuh")
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == [] and diff.count("_lg_shape(") == 2


ROWS_DEFINE = "#define _LG_ROWS_LAYOUT 1\n"  # what _lg_layout_preamble puts before a rows kernel's preamble


@requires_nvcc
@pytest.mark.nvcc
@pytest.mark.parametrize(("kind", "arch"), [("cubin", "sm_90"), ("ptx", "compute_75")])
@pytest.mark.parametrize("kernel", ["sum_float", "mean_float16_2d", "argmax_double", "max_float16"])
@pytest.mark.parametrize("rows", [False, True], ids=["interleaved", "rows"])
def test_template_compiles(tree: Path, pxi: str, tmp_path: Path, kernel: str, kind: str, arch: str,
                           rows: bool) -> None:
    source = kernels(pxi, text_at(tree, STEP, "cupy/core/core.pyx"))[kernel]
    assert_compiles(text_at(tree, STEP, "cupy/core/carray.cuh"), (ROWS_DEFINE if rows else "") + source, tmp_path,
                    kind, arch)


@requires_nvcc
@pytest.mark.nvcc
def test_the_rows_define_makes_a_kernel_of_its_own(tree: Path, pxi: str, tmp_path: Path) -> None:
    source = kernels(pxi, text_at(tree, STEP, "cupy/core/core.pyx"))["sum_float"]
    header = text_at(tree, STEP, "cupy/core/carray.cuh")
    texts = []
    for rows in (False, True):
        folder = tmp_path / str(rows)
        folder.mkdir()
        assert_compiles(header, (ROWS_DEFINE if rows else "") + source, folder, "ptx", "compute_75")
        texts.append((folder / "kern.ptx").read_text())
    assert texts[0] != texts[1]


# ----------------------------------------------------------------------------------------------- the index model
def simulate(x: numpy.ndarray, block_size: int, stride: int, nsplit: int, pre, reduce, identity) -> list:
    """The kernel's work division per the template's expressions (asserted below): output i belongs to group
    i // stride; block (group, slice) gives it lanes = block_size // stride threads; lane l visits
    J = l + slice*lanes, stepping lanes*nsplit, four at a time then one at a time, reducing in visiting order. The
    last block combines the slices' partials in slice order."""
    reduced, out_size = x.shape
    lanes = block_size // stride
    results = []
    for i in range(out_size):
        partials, seen = [], []
        for s in range(nsplit):
            lane_values = []
            for lane in range(lanes):
                acc, step = identity, lanes * nsplit
                visits = list(range(lane + s * lanes, reduced, step))
                quads, rest = len(visits) // 4 * 4, visits[len(visits) // 4 * 4:]
                for j in visits[:quads] + rest:
                    acc = reduce(acc, pre(x[j, i], j))
                    seen.append(j)
                lane_values.append(acc)
            block = identity
            for v in lane_values:
                block = reduce(block, v)
            partials.append(block)
        assert sorted(seen) == list(range(reduced)), (i, nsplit, stride)
        total = identity
        for p in partials:
            total = reduce(total, p)
        results.append(total)
    return results


def argmax_reduce(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if a[0] == b[0]:
        return (a[0], min(a[1], b[1]))
    return a if a[0] >= b[0] else b


def test_index_mapping_model_gives_numpy_results(pxi: str) -> None:
    kernel = template(pxi)
    for expr in ("int _lg_lanes = ${block_size} / _block_stride;",
                 "    #else\n      int _J_offset = _tid / _block_stride + _lg_slice * _lg_lanes;\n    #endif",
                 "int _J_stride = _lg_lanes * _lg_nsplit;",
                 "for (; _j + 3 * _j_stride < _in_ind.size();\n             _j += 4 * _j_stride, _J += 4 * _J_stride)",
                 "for (; _j < _in_ind.size(); _j += _j_stride, _J += _J_stride)",
                 "int _lg_group = _i_base / _block_stride;",
                 "for (int _o = ${block_size} / 2; _o >= _block_stride; _o >>= 1)"):
        assert expr in kernel, expr
    # Each of the four elements of a step is read in its own scope with its own _j and _J, then reduced in order.
    for k in range(4):
        assert f"const long long _j = _lg_j{k};\n              const int _J = _lg_J{k};" in kernel, k
        assert f"_lg_j{k} = _j + {k} * _j_stride;" in kernel and f"_lg_J{k} = _J + {k} * _J_stride;" in kernel
    order = [kernel.index(f"_s = REDUCE(_s, _lg_a{k});") for k in range(4)]
    assert order == sorted(order)
    rng = numpy.random.RandomState(0)
    x = rng.randint(-3, 4, size=(700, 5)).astype("d")
    for stride, nsplit in ((1, 1), (1, 3), (4, 1), (4, 2), (32, 1), (32, 5)):
        sums = simulate(x, 64, stride, nsplit, lambda v, j: v, lambda a, b: a + b, 0.0)
        assert sums == list(x.sum(axis=0)), (stride, nsplit)
        got = simulate(x, 64, stride, nsplit, lambda v, j: (v, j), argmax_reduce, None)
        assert [g[1] for g in got] == list(x.argmax(axis=0)), (stride, nsplit)


# ------------------------------------------------------------------------------------------- host-side rules
def reference_split(in_size: int, out_size: int, stride: int, block_size: int, sm_count: int) -> int:
    """Independent statement: the most blocks per group of `stride` outputs (at most 1024; all groups' blocks
    together within the rounded-up share of 4 resident blocks per SM) giving each thread at least 8 elements."""
    groups = -(-out_size // stride) if out_size else 0
    if stride > 32 or out_size == 0 or groups >= 4 * sm_count:
        return 1
    best = 1
    for s in range(1, 1025):
        fits_slots = (s - 1) * groups < 4 * sm_count
        enough_work = (in_size // out_size) >= s * (block_size // stride) * 8
        if fits_slots and enough_work:
            best = s
    return best


@pytest.mark.parametrize("sm_count", [1, 24, 132])
def test_split_of_groups_matches_reference_and_is_the_old_rule_for_one_output_a_block(
        tree: Path, pxi: str, sm_count: int) -> None:
    split = python_function(pxi, "_lg_reduction_split")["_lg_reduction_split"]
    old = python_function(text_at(tree, GRID, PXI), "_lg_reduction_split")["_lg_reduction_split"]
    rng = numpy.random.RandomState(sm_count)
    for _ in range(400):
        out_size, stride = int(rng.randint(1, 3000)), int(2 ** rng.randint(0, 7))
        in_size = out_size * int(rng.randint(1, 1 << 16))
        want = reference_split(in_size, out_size, stride, 512, sm_count)
        assert split(in_size, out_size, stride, 512, sm_count) == want, (in_size, out_size, stride)
        if stride == 1:
            assert want == old(in_size, out_size, 1, 512, sm_count)
    # The buffers (2 * slots * 32 partials, slots counters) hold every split the rule allows.
    for stride in (1, 2, 4, 32):
        for out_size in range(1, 4 * sm_count * stride, max(1, stride // 2)):
            s = split(1 << 40, out_size, stride, 512, sm_count)
            groups = -(-out_size // stride)
            assert s == 1 or (out_size * s < 2 * 4 * sm_count * 32 and groups < 4 * sm_count)
    assert "buffers = (ndarray((32 * 2 * slots * _LG_MAX_SPLIT_STRIDE,),\n" in pxi


def layout_rule(pxi: str) -> Any:
    namespace = python_function(pxi, "_lg_layout_block_stride")
    namespace["ndarray"] = numpy.ndarray  # CuPy's ndarray has the same shape/strides/itemsize/ndim/size
    return namespace["_lg_layout_block_stride"]


def transposed(a: numpy.ndarray, axis: tuple) -> numpy.ndarray:
    """The input as _get_trans_args leaves it: reduced axes first, kept axes after, in order."""
    kept = tuple(d for d in range(a.ndim) if d not in axis)
    return a.transpose(axis + kept)


def old_stride(in_size: int, out_size: int) -> int:
    return max(1, 512 // (1 << int.bit_length(int(in_size // out_size - 1))))


ROWS = 0x10000  # bit 16 of _lg_layout_block_stride's answer: the rows layout (a define in the kernel's preamble)

LAYOUTS = [  # (shape, reduced axes, the view, _lg_layout_block_stride's answer wanted)
    ((6272, 1024), (0,), "C", 32),    # x.sum(axis=0): 32 neighbouring outputs a block
    ((300, 40), (0,), "C", 32),
    ((6272, 1024), (1,), "C", 32 | ROWS),  # rows of 1024: 32 a block in the rows layout, 64 elements a thread
    ((6272, 300), (1,), "C", 32 | ROWS),
    ((6272, 2048), (1,), "C", 16 | ROWS),
    ((6272, 4096), (1,), "C", 8 | ROWS),
    ((64, 8192), (1,), "C", 4 | ROWS),
    ((64, 32768), (1,), "C", 1),      # long rows keep one output a block (both layouts are the same then)
    ((8, 64, 56, 56), (0, 2, 3), "C", 1),
    ((1000, 7), (1,), "C", 64),       # rows shorter than 8: CuPy 1.24's stride, interleaved
    ((17, 31), (0,), "C", 16),        # fewer than 32 neighbours: CuPy 1.24's stride
    ((16, 1024), (0,), "C", 32),      # reduced length <= 16: CuPy 1.24's stride (32) already
    ((6272, 1024), (0,), "F", 4 | ROWS),  # column-major: the reduced axis is the contiguous one, 6272 long
    ((1024, 6272), (0,), "T", 32 | ROWS),  # a transpose: its reduced axis is the contiguous one
    ((1024, 6272), (1,), "T", 32),    # ... and here its kept axis
    ((1024, 6272), (0,), "every other column", 1),
]


def test_block_stride_follows_the_layout_and_never_goes_below_cupy_124s(pxi: str) -> None:
    rule = layout_rule(pxi)
    for shape, axis, view, want in LAYOUTS:
        base = numpy.zeros(shape, "f")
        a = {"C": base, "F": numpy.asfortranarray(base), "T": numpy.zeros(shape[::-1], "f").T,
             "every other column": numpy.zeros((shape[0], 2 * shape[1]), "f")[:, ::2]}[view]
        t = transposed(a, axis)
        out_size = int(numpy.prod([shape[d] for d in range(len(shape)) if d not in axis]))
        start = old_stride(a.size, out_size)
        got = rule([t], len(axis), start, a.size, out_size)
        assert got == want, (shape, axis, view, got)
        stride = got & 0xFFFF
        assert stride >= start and stride & (stride - 1) == 0 and got in (stride, stride | ROWS)
        assert not got & ROWS or stride > 1  # one output a block has one layout
    # The first array argument counts; no array or a full reduction: CuPy 1.24's stride. A broadcast row's
    # strides (0, 4) say its outputs are neighbours, which they are.
    a = transposed(numpy.zeros((6272, 1024), "f"), (0,))
    assert rule([3, a], 1, 1, a.size, 1024) == 32
    assert rule([5], 1, 1, 100, 10) == 1
    assert rule([a], 2, 1, a.size, 1) == 1
    wide = numpy.broadcast_to(numpy.zeros(1024, "f"), (6272, 1024))
    assert rule([wide], 1, 1, wide.size, 1024) == 32
    assert rule([numpy.zeros(10, "f")], 1, 1, 6272 * 1024, 1024) == 1  # not the indexer's size: not recognised
    # Both call sites give the kernel, the split and the launch the plain stride, and the rows layout as a define
    # in the kernel's preamble (so it is a kernel of its own, memoised and cached under its own source).
    assert pxi.count("layout = _lg_layout_block_stride(\n            in_args, len(axis), block_stride,") == 2
    assert pxi.count("block_stride = layout & _LG_STRIDE_MASK\n") == 2
    assert pxi.count("in_args, out_args, in_indexer, out_indexer, block_stride,\n") == 2
    assert "_lg_layout_preamble(layout, self._preamble), ())" in pxi
    assert "_lg_layout_preamble(layout, self.preamble), self.options)" in pxi
    preamble = python_function(pxi, "_lg_layout_preamble")
    preamble["_LG_ROWS_DEFINE"] = "#define _LG_ROWS_LAYOUT 1\n"
    assert "_LG_ROWS_DEFINE = '#define _LG_ROWS_LAYOUT 1\\n'\n" in pxi
    assert preamble["_lg_layout_preamble"](32 | ROWS, "P") == "#define _LG_ROWS_LAYOUT 1\nP"
    assert preamble["_lg_layout_preamble"](32, "P") == "P"


def rows_layout(tid: int, stride: int, block_size: int) -> tuple[int, int, int]:
    """(output in the group, lane, shared-memory slot) of thread `tid` in the rows layout, per the template."""
    lanes = block_size // stride
    return tid // lanes, tid % lanes, (tid % lanes) * stride + tid // lanes


def interleaved_layout(tid: int, stride: int) -> tuple[int, int, int]:
    return tid % stride, tid // stride, tid


def test_rows_layout_fills_the_interleaved_layouts_slots_and_reads_rows_by_warps(pxi: str) -> None:
    kernel = template(pxi)
    for expr in ("    #ifdef _LG_ROWS_LAYOUT\n      int _J_offset = _tid % _lg_lanes + _lg_slice * _lg_lanes;",
                 "    #ifdef _LG_ROWS_LAYOUT\n        long long _j = _i_base + (int)(_tid / _lg_lanes) + _j_offset;\n"
                 "    #else\n        long long _j = _i + _j_offset;\n    #endif",
                 "    #ifdef _LG_ROWS_LAYOUT\n"
                 "          _sdata[(_tid % _lg_lanes) * _block_stride + _tid / _lg_lanes] = _s;\n"
                 "    #else\n          _sdata[_tid] = _s;\n    #endif"):
        assert expr in kernel, expr
    assert kernel.count("#ifdef _LG_ROWS_LAYOUT") == 3 and "_block_stride &=" not in kernel
    for block_size in (64, 512):
        for stride in (2, 4, 8, 16, 32, 64):
            rows = [rows_layout(t, stride, block_size) for t in range(block_size)]
            # A bijection onto the slots, each slot holding the (output, lane) the interleaved layout puts there:
            # the tree, the split and the output see the same values in the same places.
            assert sorted(r[2] for r in rows) == list(range(block_size))
            for output, lane, slot in rows:
                assert interleaved_layout(slot, stride)[:2] == (output, lane)
            # A warp's threads serve one output with consecutive lanes (consecutive _J: neighbours in a row), or
            # whole rows' lanes when a row has fewer than 32.
            lanes = block_size // stride
            for warp in range(block_size // 32):
                members = rows[32 * warp:32 * warp + 32]
                if lanes >= 32:
                    assert len({m[0] for m in members}) == 1
                    assert [m[1] for m in members] == list(range(members[0][1], members[0][1] + 32))
                else:
                    assert len({m[0] for m in members}) == 32 // lanes

def test_split_launch_has_a_block_per_group_and_slice(pxi: str) -> None:
    """ceil(outputs / block_stride) * split blocks, which the kernel maps to (group, slice) pairs."""
    launch = re.search(r"^cpdef _lg_launch\(.*?(?=^\S)", pxi, re.S | re.M)
    assert launch
    assert "((out_indexer.size + block_stride - 1) // block_stride * split,)" in launch.group(0)
    kernel = template(pxi)
    assert "_i_base = (blockIdx.x / _lg_nsplit) * _block_stride;" in kernel
    assert "int _lg_slice = blockIdx.x % _lg_nsplit;" in kernel
    # Only the group's real outputs write partials; the last block resets the group's counter.
    assert "if (_tid < _block_stride && _i < _out_ind.size()) {\n            _lg_p[_lg_slice] = _s;" in kernel
    assert "if (_tid == 0) _lg_count[_lg_group] = 0u;" in kernel


# --------------------------------------------------------------------- the indexer's division, run on the host
HOST_SHIMS = r"""
#include <cstdio>
#include <cstdlib>
#define __device__
#define __forceinline__ inline
static int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
// CuPy 1.24's CIndexer (its set() as carray.cuh has it) with the accessor the step adds.
template <int ndim> class CIndexer {
 public:
  int size_; int shape_[ndim]; int index_[ndim];
  int _lg_shape(int dim) const { return shape_[dim]; }
  void set(int i) {
    unsigned int a = i;
    for (int dim = ndim; --dim > 0; ) { unsigned int s = shape_[dim]; index_[dim] = (a % s); a /= s; }
    if (ndim > 0) index_[0] = a;
  }
  const int* get() const { return index_; }
};
"""

HOST_MAIN = r"""
static unsigned int next(unsigned long long* state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (unsigned int)(*state >> 32);
}

template <int N> static int check(const int* shape, unsigned long long* state) {
  CIndexer<N> plain, fast;
  long long size = 1;
  for (int d = 0; d < N; ++d) { plain.shape_[d] = fast.shape_[d] = shape[d]; size *= shape[d]; }
  _lg_udiv divs[_LG_MAX_DIMS];
  _lg_divs_init(divs, fast);
  for (int k = 0; k < 20000; ++k) {
    int i = k < 10 ? (int)(size - 1 - k) : (int)(next(state) % (unsigned long long)size);
    if (i < 0) i = 0;
    plain.set(i);
    _lg_index_set(fast, divs, true, i);
    for (int d = 0; d < N; ++d) if (plain.get()[d] != fast.get()[d]) { printf("index %d dim %d\n", i, d); return 1; }
  }
  return 0;
}

int main() {
  unsigned long long state = 42;
  for (unsigned int d = 1; d < 5000; ++d) {
    for (int k = 0; k < 200; ++k) {
      unsigned int n = k == 0 ? 0xffffffffu : (k == 1 ? d * 7u : next(&state));
      if (_lg_udiv_q(_lg_udiv_make(d), n) != n / d) { printf("q %u / %u\n", n, d); return 1; }
    }
  }
  for (int k = 0; k < 200000; ++k) {
    unsigned int d = next(&state) >> (next(&state) % 31);
    if (d == 0) d = 1;
    unsigned int n = next(&state);
    if (_lg_udiv_q(_lg_udiv_make(d), n) != n / d) { printf("q %u / %u\n", n, d); return 1; }
  }
  const int s2[] = {65536, 1024}, s3[] = {32, 32768, 64}, s4[] = {7, 3, 1000, 13}, s1[] = {100003};
  const int odd[] = {1, 1, 5, 1, 3}, big[] = {46341, 46340};
  if (check<2>(s2, &state) || check<3>(s3, &state) || check<4>(s4, &state) || check<1>(s1, &state) ||
      check<5>(odd, &state) || check<2>(big, &state)) return 1;
  printf("ok\n");
  return 0;
}
"""


def test_fast_division_gives_the_indexers_own_indices_compiled_and_run_on_the_host(pxi: str, tmp_path: Path) -> None:
    """The division helpers exactly as the template has them, compiled with the host compiler behind stand-ins
    for the two CUDA intrinsics, against CuPy 1.24's CIndexer::set: quotients for every divisor below 5000 and
    200,000 random ones (the 32-bit extremes included), and whole indices for 1- to 5-dimensional shapes."""
    kernel = template(pxi)
    helpers = kernel[kernel.index("    struct _lg_udiv {"):kernel.index("    typedef ${reduce_type} _type_reduce;")]
    assert "_lg_index_set(_in_ind, _lg_divs, _lg_fast, _j);" in kernel and "_in_ind.set(_j)" not in kernel
    assert kernel.count("_lg_index_set(_in_ind, _lg_divs, _lg_fast, _j);") == 5
    assert "bool _lg_fast = _in_ind.size() / _out_ind.size() >= 8LL * _J_stride;" in kernel
    (tmp_path / "fastdiv.cpp").write_text(HOST_SHIMS + helpers + HOST_MAIN)
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    build = subprocess.run([compiler, "-O2", "-o", "fastdiv", "fastdiv.cpp"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp_path / "fastdiv")], capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout.strip()) == (0, "ok"), run.stdout


def test_parts_bench_kernels_read_every_element_once(pxi: str) -> None:
    """Each kernel of reduction_variants.py --parts, emulated per (block, thread, step) with its own expressions,
    reads every element of an output exactly once, at the split the template's rule gives and at 66."""
    runs, _ = bench_modules()
    rule_of = python_function(pxi, "_lg_reduction_split")["_lg_reduction_split"]
    for _case, _shape, _axes, (n, c, length) in runs.SHAPES:
        rule = runs.split_rule(n * c * length, c, 132)
        assert rule == rule_of(n * c * length, c, 1, 512, 132)
        for name in runs.VARIANTS:
            for nsplit in (rule, 66):
                runs.emulate(name, n, c, length, nsplit)


@requires_nvcc
def test_parts_bench_kernels_compile_for_sm_90(tree: Path, pxi: str, tmp_path: Path) -> None:
    """The --parts kernels and the template's variants (fast-const, idx32; 3- and 4-D indexers) compile."""
    from helpers import NVCC

    runs, variants = bench_modules()
    head = variants.header(tree / "cupy")
    sources = {name: head + runs.source(name) for name in runs.VARIANTS}
    sources.update({f"t{nd}-{mod}": variants.template_mod(head + variants.kernel_source(pxi, False, nd, "lg_t"), mod)
                    for nd in (3, 4) for mod in variants.TEMPLATE_MODS})
    for name, text in sources.items():
        (tmp_path / f"{name}.cu").write_text(text)
        proc = subprocess.run([NVCC, "-cubin", "-arch=sm_90", f"{name}.cu"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, f"{name}:\n{proc.stderr}"
