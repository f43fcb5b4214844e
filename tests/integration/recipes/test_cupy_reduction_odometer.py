"""cupy-reduction-odometer on the real Chainer 1.24.0 sdist: it applies (strict) as two commits on reduction.pxi
after cupy-reduction-layout; the kernel template it leaves compiles with the real nvcc (sm_90 and PTX for
compute_75) for sums of float32/float16/float64, a float16 mean, argmax, max, a _J-reading pre-map and 1- to 5-D
(and 17-D, past the odometer's bound) indexers; the template's own index loops, cut out of the patched file and
compiled with the host compiler, visit every element of every output exactly once, in the same order per thread
with the odometer as with CIndexer::set per element, and give each element the indices CIndexer::set gives; the
split rule fills at most one wave of block slots.
"""

from __future__ import annotations

import shutil
import string
import subprocess
from pathlib import Path

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
    render,
    template,
    text_at,
)

pytestmark = [pytest.mark.integration]

LAYOUT = "cupy-reduction-layout/reduction-layout"
STEP = "cupy-reduction-odometer/reduction-odometer"
WAVES = "cupy-reduction-odometer/reduction-split-waves"
PXI = "cupy/core/reduction.pxi"
ROWS_DEFINE = "#define _LG_ROWS_LAYOUT 1\n"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "reduction-odometer", LAYOUT, STEP, WAVES)


@pytest.fixture(scope="module")
def pxi(tree: Path) -> str:
    return text_at(tree, STEP, PXI)


@pytest.fixture(scope="module")
def final_pxi(tree: Path) -> str:
    return text_at(tree, WAVES, PXI)


@pytest.mark.parametrize("step", [STEP, WAVES])
def test_steps_are_gated_to_cuda_9_and_newer(lgpatch, step: str) -> None:
    assert_gated_like_the_speed_steps(lgpatch, step)


def test_applies_as_two_commits_on_the_template_right_after_the_layout(tree: Path) -> None:
    applied = git(tree, "log", "--format=%s").splitlines()[::-1]
    steps = [line.removeprefix("lgpatch: ") for line in applied if line.startswith("lgpatch: ")]
    assert steps[steps.index(LAYOUT) + 1:steps.index(LAYOUT) + 3] == [STEP, WAVES]
    for step in (STEP, WAVES):
        files = git(tree, "show", "--name-only", "--format=", commit_of(tree, step)).split()
        assert files == [PXI], (step, files)
    # The odometer step leaves the launch rules alone; the waves step leaves the kernel alone.
    layout, odometer, final = (text_at(tree, step, PXI) for step in (LAYOUT, STEP, WAVES))
    assert after_template(layout) == after_template(odometer)
    assert template(final) == template(odometer)


def after_template(pxi: str) -> str:
    return pxi[pxi.index("'''", pxi.index("module_code = string.Template('''") + 40):]


# ------------------------------------------------------------------------------------------------ compiles
def odometer_kernels(pxi: str, core: str) -> dict[str, str]:
    found = kernels(pxi, core)
    found["sum_double_3d"] = render(pxi, "cupy_sum", "double", "double", "double", "0", "in0", "a + b", "out0 = a",
                                    in_ndim=3, out_ndim=1)
    found["sum_float16_5d"] = render(pxi, "cupy_sum", "float", "float16", "float16", "0", "in0", "a + b",
                                     "out0 = a", in_ndim=5, out_ndim=2)
    # A pre-map that reads the reduced index _J (as argmax's does, and ReductionKernels may).
    found["j_weighted_sum_4d"] = render(pxi, "cupy_jsum", "double", "float", "double", "0", "in0 * (_J + 1)",
                                        "a + b", "out0 = a", in_ndim=4, out_ndim=1)
    # Past _LG_MAX_DIMS: the odometer is off (CIndexer::set per element), and the kernel still compiles.
    found["sum_float_17d"] = render(pxi, "cupy_sum", "float", "float", "float", "0", "in0", "a + b", "out0 = a",
                                    in_ndim=17, out_ndim=1)
    return found


KERNELS = ["sum_float", "mean_float16_2d", "argmax_double", "max_float16", "sum_double_3d", "sum_float16_5d",
           "j_weighted_sum_4d", "sum_float_17d"]


@requires_nvcc
@pytest.mark.nvcc
@pytest.mark.parametrize(("kind", "arch"), [("cubin", "sm_90"), ("ptx", "compute_75")])
@pytest.mark.parametrize("kernel", KERNELS)
def test_template_compiles(tree: Path, pxi: str, tmp_path: Path, kernel: str, kind: str, arch: str) -> None:
    source = odometer_kernels(pxi, text_at(tree, STEP, "cupy/core/core.pyx"))[kernel]
    rows = kernel in ("sum_float16_5d", "j_weighted_sum_4d")  # the rows layout's define on some of them
    assert_compiles(text_at(tree, STEP, "cupy/core/carray.cuh"), (ROWS_DEFINE if rows else "") + source, tmp_path,
                    kind, arch)


@requires_nvcc
@pytest.mark.nvcc
@pytest.mark.parametrize("ndim", [3, 5])
def test_the_fast_loops_divide_once_per_thread_not_per_element(tree: Path, pxi: str, tmp_path: Path,
                                                                ndim: int) -> None:
    """PTX of CuPy's sum over an ndim-D indexer: cupy-reduction-layout's template has a multiply-high per dimension
    beyond the first at each of its five element sites; this step's has them only for the first element's
    _lg_index_set and the step's digits (_lg_odo_make), and the odometer's selects instead."""
    counts = {}
    for step in (LAYOUT, STEP):
        source = render(text_at(tree, step, PXI), "cupy_sum", "float", "float", "float", "0", "in0", "a + b",
                        "out0 = a", in_ndim=ndim, out_ndim=1)
        folder = tmp_path / step.split("/")[1]
        folder.mkdir()
        assert_compiles(text_at(tree, STEP, "cupy/core/carray.cuh"), source, folder, "ptx", "compute_75")
        ptx = (folder / "kern.ptx").read_text()
        counts[step] = (ptx.count("mul.hi.u32"), ptx.count("selp."))
    assert counts[LAYOUT][0] == 5 * (ndim - 1)
    assert counts[STEP][0] == 2 * (ndim - 1)
    assert counts[STEP][1] >= counts[LAYOUT][1] + 5 * (ndim - 1)


# ------------------------------------------------------------------------------ the template's loops, on the host
HOST_SHIMS = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
#define __device__
#define __forceinline__ inline
static int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
struct lg_dim3 { unsigned int x; };
static lg_dim3 threadIdx, blockIdx, gridDim;
// CuPy 1.24's CIndexer (its set() as carray.cuh has it) with the accessor cupy-reduction-layout adds.
template <int ndim> class CIndexer {
 public:
  int size_; int shape_[ndim]; int index_[ndim];
  int _lg_shape(int dim) const { return shape_[dim]; }
  int size() const { return size_; }
  void set(int i) {
    unsigned int a = i;
    for (int dim = ndim; --dim > 0; ) { unsigned int s = shape_[dim]; index_[dim] = (a % s); a /= s; }
    if (ndim > 0) index_[0] = a;
  }
  const int* get() const { return index_; }
};
struct lg_out_ind { int size_; int size() const { return size_; } };
"""

HOST_MAIN = r"""
typedef int _type_reduce;
#define REDUCE(a, b) ((a) + (b))

static bool g_allow_fast = true;
static int g_bad = 0;
static long long g_fast_threads = 0, g_slow_threads = 0;
struct lg_visit { long long j; int J; };
static std::vector<lg_visit> g_seq;

template <int N> static void _lg_rec(const CIndexer<N>& ind, long long j, int J) {
  CIndexer<N> ref = ind;
  ref.set((int)j);
  for (int d = 0; d < N; ++d)
    if (ref.get()[d] != ind.get()[d]) {
      if (g_bad++ < 5) printf("indices of j=%lld differ in dim %d: %d != %d\n", j, d, ind.get()[d], ref.get()[d]);
    }
  g_seq.push_back(lg_visit{j, J});
}

template <int N>
static void lg_thread(CIndexer<N>& _in_ind, const lg_out_ind& _out_ind, int _block_stride, int _lg_nsplit,
                      bool* fast_out) {
  unsigned int _tid = threadIdx.x;
LG_BODY
}

template <int N> static int run(const int* shape, int out_size, int block_stride, int nsplit) {
  CIndexer<N> ind;
  long long size = 1;
  for (int d = 0; d < N; ++d) { ind.shape_[d] = shape[d]; size *= shape[d]; }
  ind.size_ = (int)size;
  lg_out_ind out{out_size};
  const int lanes = LG_BLOCK / block_stride, groups = (out_size + block_stride - 1) / block_stride;
  const long long reduced = size / out_size;
  std::vector<unsigned char> seen(size, 0);
  gridDim.x = groups * nsplit;
  for (unsigned int b = 0; b < gridDim.x; ++b) {
    for (unsigned int t = 0; t < LG_BLOCK; ++t) {
      blockIdx.x = b; threadIdx.x = t;
      std::vector<lg_visit> seqs[2];
      bool fast[2] = {false, false};
      for (int mode = 0; mode < 2; ++mode) {
        g_allow_fast = mode == 0;
        g_seq.clear();
        CIndexer<N> fresh = ind;
        lg_thread<N>(fresh, out, block_stride, nsplit, &fast[mode]);
        seqs[mode] = g_seq;
      }
      if (fast[1]) { printf("the odometer ran with g_allow_fast false\n"); return 1; }
      (fast[0] ? g_fast_threads : g_slow_threads) += 1;
      // The same elements in the same order, odometer or not.
      if (seqs[0].size() != seqs[1].size()) { printf("b %u t %u: %zu vs %zu visits\n", b, t, seqs[0].size(),
                                                     seqs[1].size()); return 1; }
      for (size_t k = 0; k < seqs[0].size(); ++k)
        if (seqs[0][k].j != seqs[1][k].j || seqs[0][k].J != seqs[1][k].J) { printf("order b %u t %u\n", b, t);
                                                                           return 1; }
      // Which output this thread serves and which slice of the reduced axis (independent of the template).
      const int group = b / nsplit, slice = b % nsplit;
#ifdef _LG_ROWS_LAYOUT
      const int o = group * block_stride + t / lanes, lane = t % lanes;
#else
      const int o = group * block_stride + t % block_stride, lane = t / block_stride;
#endif
      long long prev = -1;
      long long J_want = lane + (long long)slice * lanes;
      for (const lg_visit& v : seqs[0]) {
        if (v.J != J_want || v.j != (long long)v.J * out_size + o || v.j <= prev || v.j >= size) {
          printf("visit j=%lld J=%d of b %u t %u (output %d, J wanted %lld)\n", v.j, v.J, b, t, o, J_want);
          return 1;
        }
        prev = v.j;
        J_want += (long long)lanes * nsplit;
        if (o < out_size) seen[v.j] += 1;
      }
      if (J_want < reduced && o < out_size) { printf("b %u t %u stopped early\n", b, t); return 1; }
    }
  }
  for (long long j = 0; j < size; ++j)
    if (seen[j] != 1) { printf("element %lld read %d times\n", j, seen[j]); return 1; }
  return g_bad ? 1 : 0;
}

// The odometer alone on large shapes (size < 2^31): from a random start, 2000 steps of a random step that fits 8
// times, each against CIndexer::set.
template <int N> static int large(const int* shape, unsigned long long* state) {
  CIndexer<N> ind, ref;
  long long size = 1;
  for (int d = 0; d < N; ++d) { ind.shape_[d] = ref.shape_[d] = shape[d]; size *= shape[d]; }
  _lg_udiv divs[_LG_MAX_DIMS];
  unsigned int inc[_LG_MAX_DIMS];
  _lg_divs_init(divs, ind);
  for (int trial = 0; trial < 200; ++trial) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    unsigned long long r = *state >> 11;
    long long step = 1 + (long long)(r % (unsigned long long)(size / 8));
    if (trial < 4) step = trial == 0 ? 1 : (trial == 1 ? size / 8 : shape[N - 1] - (trial == 2));
    if (step < 1) step = 1;
    long long j = (long long)((r >> 7) % (unsigned long long)size);
    if (trial == 5) j = size - 1 - 2000 * step > 0 ? size - 1 - 2000 * step : 0;
    _lg_odo_make(inc, divs, ind, (unsigned int)step);
    _lg_index_set(ind, divs, true, (int)j);
    for (int k = 0; k < 2000 && j < size; ++k, j += step) {
      ref.set((int)j);
      for (int d = 0; d < N; ++d)
        if (ref.get()[d] != ind.get()[d]) { printf("large: j %lld step %lld dim %d\n", j, step, d); return 1; }
      _lg_index_next(ind, divs, inc);
    }
  }
  return 0;
}

int main() {
  int n, out_size, block_stride, nsplit, shape[32];
  while (scanf("%d %d %d %d", &n, &out_size, &block_stride, &nsplit) == 4) {
    for (int d = 0; d < n; ++d) if (scanf("%d", &shape[d]) != 1) return 2;
    int rc;
    switch (n) {
      case 1: rc = run<1>(shape, out_size, block_stride, nsplit); break;
      case 2: rc = run<2>(shape, out_size, block_stride, nsplit); break;
      case 3: rc = run<3>(shape, out_size, block_stride, nsplit); break;
      case 4: rc = run<4>(shape, out_size, block_stride, nsplit); break;
      case 5: rc = run<5>(shape, out_size, block_stride, nsplit); break;
      case 17: rc = run<17>(shape, out_size, block_stride, nsplit); break;
      default: return 2;
    }
    if (rc) { printf("config n=%d out=%d stride=%d nsplit=%d\n", n, out_size, block_stride, nsplit); return 1; }
  }
  unsigned long long state = 7;
  const int l1[] = {2147483647}, l2[] = {46341, 46340}, l3[] = {3, 32768, 21845}, l4[] = {1, 65535, 1, 32767},
            l5[] = {5, 7, 11, 13, 300007};
  if (large<1>(l1, &state) || large<2>(l2, &state) || large<3>(l3, &state) || large<4>(l4, &state) ||
      large<5>(l5, &state)) return 1;
  printf("ok fast %lld slow %lld\n", g_fast_threads, g_slow_threads);
  return 0;
}
"""


def host_source(pxi: str, block_size: int, rows: bool) -> str:
    """The template's helpers and its code from the block's slice to the end of the element loops, cut out of the
    patched file, with ${input_expr} recording each element's (_j, _J) and checking the indexer's indices."""
    kernel = template(pxi)
    helpers = kernel[kernel.index("    struct _lg_udiv {"):kernel.index("    typedef ${reduce_type} _type_reduce;")]
    start = kernel.index("      int _lg_slice = blockIdx.x % _lg_nsplit;")
    end = kernel.index("        if (_block_stride < ${block_size}) {")
    body = kernel[start:end] + "      }\n"  # closes the loop over the block's groups
    fast = "      bool _lg_fast = _in_ind.size() / _out_ind.size() >= 8LL * _J_stride &&\n"
    assert body.count(fast) == 1
    body = body.replace(fast, fast.replace("bool _lg_fast = ", "bool _lg_fast = g_allow_fast && "))
    body = body.replace("      for (int _i_base", "      *fast_out = _lg_fast;\n      for (int _i_base", 1)
    body = string.Template(body).substitute(block_size=block_size, identity="0", input_expr="_lg_rec(_in_ind, _j, _J);",
                                            pre_map_expr="1")
    defines = f"#define LG_BLOCK {block_size}\n" + (ROWS_DEFINE if rows else "")
    return defines + HOST_SHIMS + helpers + HOST_MAIN.replace("LG_BODY", body)


def configs(pxi: str, block_size: int, rng: numpy.random.RandomState, count: int) -> list[str]:
    """(ndim, outputs, block_stride, nsplit, shape): reduced axes first and kept axes after, as _get_trans_args
    orders them; strides of the array do not enter the indexer. nsplit from the rule (few SMs so that small
    arrays split) or forced; block_stride from CuPy 1.24's rule or a power of two up to 32."""
    split = python_function(pxi, "_lg_reduction_split")["_lg_reduction_split"]
    lines = []
    for k in range(count):
        ndim = int(rng.randint(1, 6))
        kept = int(rng.randint(0, ndim)) if ndim > 1 else 0
        shape = [int(rng.choice([1, 2, 3, 5, 7, 8, 13, 16, 31, 64, 100]) if d >= ndim - kept
                     else rng.choice([1, 2, 3, 4, 7, 9, 17, 33, 64, 129, 300, 1000])) for d in range(ndim)]
        size = int(numpy.prod(shape))
        if size > 300_000 or size == 0:
            continue
        out_size = int(numpy.prod(shape[ndim - kept:])) if kept else 1
        old = max(1, block_size // (1 << int.bit_length(size // out_size - 1)))
        stride = old if k % 3 == 0 else max(old, int(2 ** rng.randint(0, 6)))
        stride = min(stride, block_size)
        nsplit = (split(size, out_size, stride, block_size, int(rng.choice([1, 2, 3, 8])))
                  if k % 2 else int(rng.choice([1, 2, 3, 5])))
        if stride > 32:
            nsplit = 1
        lines.append(" ".join(map(str, [ndim, out_size, stride, nsplit, *shape])))
    return lines


FIXED = [  # the measured shape class, scaled down, and edges: 1-D, partial last steps, a partly used last group
    "3 8 1 4 4 4096 8", "3 8 1 3 4 4097 8", "3 64 1 1 2 2048 64", "1 1 1 7 100003", "1 1 1 1 600",
    "2 40 32 1 700 40", "2 40 32 3 700 40", "2 300 4 2 300 300", "2 33 16 1 1025 33", "4 6 2 2 3 50 7 6",
    "5 15 2 3 2 3 129 3 5", "17 9 1 2 2 1 3 1 1 1 2 1 1 1 1 1 1 1 1 3 3",
]


@pytest.mark.parametrize(("block_size", "rows"), [(64, False), (64, True), (512, False), (512, True)],
                         ids=["64-interleaved", "64-rows", "512-interleaved", "512-rows"])
def test_template_loops_visit_every_element_once_in_order_with_sets_indices(
        pxi: str, tmp_path: Path, block_size: int, rows: bool) -> None:
    """The template's own loops (helpers, slice, lanes, start, the odometer and the per-element set() loops) run on
    the host for every thread of every block: with the odometer each element's indices are CIndexer::set's, each
    thread visits the same (_j, _J) sequence as with set() per element (J = lane + slice*lanes, stepping
    lanes*nsplit, j = J*outputs + output), every element of every output is read exactly once, both loops ran; and
    the odometer alone on 1- to 5-D shapes up to 2^31 - 1 elements, steps up to size/8."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    kernel = template(pxi)
    # The odometer's loops: set once, then _lg_index_next after each of the four elements and each one-by-one.
    fast = kernel[kernel.index("        if (_lg_fast) {"):kernel.index("        } else {")]
    assert fast.count("_lg_index_set(_in_ind, _lg_divs, true, _j);") == 1
    assert fast.count("_lg_index_next(_in_ind, _lg_divs, _lg_inc);") == 5 and "set(_j)" not in fast
    slow = kernel[kernel.index("        } else {"):kernel.index("        if (_block_stride < ${block_size}) {")]
    assert slow.count("_in_ind.set(_j);") == 5 and "_lg_index_next" not in slow
    assert "_lg_odo_make(_lg_inc, _lg_divs, _in_ind, (unsigned int)_j_stride);" in kernel
    (tmp_path / "odo.cpp").write_text(host_source(pxi, block_size, rows))
    build = subprocess.run([compiler, "-O2", "-std=c++17", "-o", "odo", "odo.cpp"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    rng = numpy.random.RandomState(block_size + rows)
    lines = FIXED + configs(pxi, block_size, rng, 150 if block_size == 64 else 40)
    if block_size == 512:
        lines += ["3 8 1 3 4 40960 8", "2 32 32 2 4096 32", "2 7 8 2 4096 7"]
    run = subprocess.run([str(tmp_path / "odo")], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]
    words = run.stdout.split()
    assert words[:1] == ["ok"], run.stdout
    assert int(words[2]) > 0 and int(words[4]) > 0, run.stdout  # both loops ran


# --------------------------------------------------------------------------------- the odometer, modelled in Python
def odo_make(shape: list[int], step: int) -> list[int]:
    inc = [0] * len(shape)
    for d in range(len(shape) - 1, 0, -1):
        step, inc[d] = divmod(step, shape[d])
    inc[0] = step
    return inc


def odo_next(index: list[int], shape: list[int], inc: list[int]) -> int:
    """One step; returns the largest carried sum seen relative to 2 * shape (the bound the proof uses)."""
    carry, worst = 0, 0
    for d in range(len(shape) - 1, 0, -1):
        a = index[d] + inc[d] + carry
        worst = max(worst, a - (2 * shape[d] - 1))
        carry = int(a >= shape[d])
        index[d] = a - shape[d] if carry else a
        assert 0 <= index[d] < shape[d]
    index[0] += inc[0] + carry
    return worst


def test_one_carry_per_dimension_suffices(pxi: str) -> None:
    """The carry bound: for dim >= 1, index < shape and inc < shape, so index + inc + carry <= 2*shape - 1 and one
    compare-and-subtract leaves a digit below shape and a carry of 0 or 1; the indices are numpy.unravel_index's
    for every visited flat index (1- to 5-D, steps from 1 to size / 8, every start)."""
    kernel = template(pxi)
    assert ("unsigned int a = (unsigned int)index[dim] + inc[dim] + carry;\n"
            "        carry = a >= divs[dim].d;\n"
            "        index[dim] = (int)(carry ? a - divs[dim].d : a);") in kernel
    assert "if (N > 0) index[0] = (int)((unsigned int)index[0] + inc[0] + carry);" in kernel
    assert "inc[dim] = step - q * divs[dim].d;" in kernel
    rng = numpy.random.RandomState(3)
    shapes = 0
    while shapes < 200:
        shape = [int(v) for v in rng.randint(1, 24, size=rng.randint(1, 6))]
        size = int(numpy.prod(shape))
        if size > 4000:
            continue
        shapes += 1
        for step in {1, max(1, size // 8), int(rng.randint(1, max(2, size // 8 + 1))), shape[-1], shape[-1] + 1}:
            inc = odo_make(shape, step)
            assert all(0 <= v < s for v, s in zip(inc[1:], shape[1:]))
            for start in range(min(step, size)):
                index = [int(v) for v in numpy.unravel_index(start, shape)]
                for j in range(start, size, step):
                    assert index == [int(v) for v in numpy.unravel_index(j, shape)], (shape, step, start, j)
                    assert odo_next(index, shape, inc) <= 0


# ------------------------------------------------------------------------------------------------- the split rule
def reference_split(in_size: int, out_size: int, stride: int, block_size: int, sm_count: int) -> int:
    """Independent statement: the most blocks per group of `stride` outputs (at most 1024) such that all groups'
    blocks together fit one wave of 4 resident blocks per SM and each thread gets at least 8 elements."""
    groups = -(-out_size // stride) if out_size else 0
    if stride > 32 or out_size == 0 or groups >= 4 * sm_count:
        return 1
    best = 1
    for s in range(1, 1025):
        if s * groups <= 4 * sm_count and (in_size // out_size) >= s * (block_size // stride) * 8:
            best = s
    return best


@pytest.mark.parametrize("sm_count", [1, 24, 108, 132])
def test_split_fills_at_most_one_wave_and_matches_reference(tree: Path, final_pxi: str, sm_count: int) -> None:
    split = python_function(final_pxi, "_lg_reduction_split")["_lg_reduction_split"]
    old = python_function(text_at(tree, LAYOUT, PXI), "_lg_reduction_split")["_lg_reduction_split"]
    slots = 4 * sm_count
    rng = numpy.random.RandomState(sm_count)
    cases = [(int(rng.randint(1, 3000)), int(2 ** rng.randint(0, 7)), int(rng.randint(1, 1 << 16)))
             for _ in range(600)]
    cases += [(out, 1, 1 << 20) for out in range(1, slots + 2)]
    for out_size, stride, per_output in cases:
        in_size = out_size * per_output
        want = reference_split(in_size, out_size, stride, 512, sm_count)
        got = split(in_size, out_size, stride, 512, sm_count)
        assert got == want, (in_size, out_size, stride, sm_count)
        groups = -(-out_size // stride)
        before = old(in_size, out_size, stride, 512, sm_count)
        if got > 1:
            assert groups * got <= slots  # one wave
        # Unchanged where the old grid fit whole waves already, or the work bound decided.
        if (groups < slots and slots % groups == 0) or before * groups <= slots:
            assert got == before, (out_size, stride, per_output)
        assert got <= before
        # The buffers (2 * slots * 32 partials) still hold every split.
        assert got == 1 or out_size * got < 2 * slots * 32
    # The measured case: 64 outputs of 32 x 32768 on 132 SMs, 9 -> 8 blocks an output (576 -> 512 of 528 slots).
    if sm_count == 132:
        assert old(32 * 64 * 32768, 64, 1, 512, 132) == 9 and split(32 * 64 * 32768, 64, 1, 512, 132) == 8
        assert split(1 << 26, 1, 1, 512, 132) == old(1 << 26, 1, 1, 512, 132) == 528


def split_rule_text(pxi: str) -> list[str]:
    """_lg_reduction_split's lines, comments and the by_slots line left out."""
    text = pxi[pxi.index("def _lg_reduction_split"):pxi.index("# lgpatch cupy-reduction-layout: CuPy")]
    return [line for line in text.splitlines() if "by_slots" not in line and not line.lstrip().startswith("#")]


def test_split_rule_changes_only_by_slots(tree: Path, final_pxi: str) -> None:
    start = final_pxi.index("def _lg_reduction_split")
    rule = final_pxi[start:final_pxi.index("# lgpatch cupy-reduction-layout: CuPy")]
    assert "by_slots = max(1, slots // groups)" in rule and "(slots + groups - 1) // groups" not in rule
    assert split_rule_text(final_pxi) == split_rule_text(text_at(tree, LAYOUT, PXI))


def test_parts_bench_times_this_template_as_it_is(tree: Path, final_pxi: str) -> None:
    """bench/gpu/reduction_variants.py --parts edits the layout template's per-element division (its fast-const and
    idx32 rows); this template has none, so the bench times it as it is (session 11 call 6: it stopped with "no
    fast-division call to fix" after the as-is rows)."""
    _, variants = bench_modules()
    assert variants.template_mods(text_at(tree, LAYOUT, PXI)) == variants.TEMPLATE_MODS
    assert variants.template_mods(final_pxi) == ("as-is",)
