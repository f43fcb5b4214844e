"""chainer-max-pool-kernel on the real Chainer 1.24.0 sdist: it applies (strict) as one commit on max_pooling_2d.py
right after chainer-call-overhead; the kernels' source, rendered by the patched module itself, compiles with the
real nvcc (sm_90 and PTX for compute_75, no atomics); the kernels' bodies, compiled as host C++ (g++ with the
address and undefined-behaviour sanitizers), give a NumPy statement of the rule and Chainer's own non-cuDNN GPU
kernels (their operation text from the same file, compiled alike) the same y, argmax offsets and gx, write every
element of gx exactly once, and agree with Chainer's CPU path wherever a window holds no NaN; and the Python
dispatch (real Chainer imported on the CPU) sends exactly the non-overlapping poolings to the new kernels.

On the GPU, bench/gpu/chainer_pool_check.py runs the same comparisons for real and times the kernels against cuDNN.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy
import pytest
from helpers import NVCC, git, requires_nvcc
from helpers.chainer_cpu import ChainerTrees, _deps, assert_gated_like_the_speed_steps, run_chainer
from helpers.reduction_template import applied_in_order, commit_of, text_at

pytestmark = [pytest.mark.integration]

STEP = "chainer-max-pool-kernel/max-pool-kernel"
BEFORE = "chainer-call-overhead/call-fast-paths"
AFTER = "cupy-reduction-grid/reduction-split-grid"
POOL = "chainer/functions/pooling/max_pooling_2d.py"
DTYPES = {"e": numpy.float16, "f": numpy.float32, "d": numpy.float64}
WINDOWS = [(1, 1), (2, 2), (3, 3), (2, 3), (3, 2), (4, 1), (8, 16)]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "max-pool", BEFORE, STEP, AFTER)


@pytest.fixture(scope="module")
def trees(tree: Path) -> ChainerTrees:
    return ChainerTrees(tree, tree, _deps(tree.parent), ())


@pytest.fixture(scope="module")
def sources(trees: ChainerTrees) -> dict[str, str]:
    """The kernels' source for every dtype and window, as the patched module renders it."""
    code = f"""
    from chainer.functions.pooling import max_pooling_2d as mp
    windows = {WINDOWS!r}
    print(json.dumps({{"%s_%d_%d" % (t, kh, kw): mp._lg_pool_source(t, kh, kw)
                      for t in "efd" for kh, kw in windows}}))
    """
    return run_chainer(trees, trees.patched, code)


def test_gated_like_the_speed_steps(lgpatch) -> None:
    assert_gated_like_the_speed_steps(lgpatch, STEP)


def test_one_commit_on_max_pooling_2d_that_keeps_chainers_paths(tree: Path) -> None:
    commit = commit_of(tree, STEP)
    assert git(tree, "show", "--name-only", "--format=", commit).split() == [POOL]
    diff = git(tree, "show", "--format=", commit)
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == []  # cuDNN's path and Chainer's max_pool_fwd / max_pool_bwd kernels are all still there
    text = text_at(tree, STEP, POOL)
    for method in ("forward_gpu", "backward_gpu"):
        body = re.search(rf"    def {method}\(self, x.*?(?=\n    def )", text, re.S)
        assert body, method
        # The fast path is decided before cuDNN's and Chainer's kernels, whatever use_cudnn says.
        assert body.group(0).index("_lg_") < body.group(0).index("self.use_cudnn"), method


@requires_nvcc
@pytest.mark.nvcc
@pytest.mark.parametrize(("kind", "arch"), [("cubin", "sm_90"), ("ptx", "compute_75")])
@pytest.mark.parametrize("kernel", ["e_2_2", "f_2_2", "d_2_2", "e_3_3", "f_3_3", "d_3_3", "f_8_16"])
def test_kernels_compile_with_nvcc(tree: Path, sources: dict[str, str], tmp_path: Path, kernel: str, kind: str,
                                   arch: str) -> None:
    """carray.cuh + the source: what cupy.core.core.compile_with_cache hands nvcc."""
    assert NVCC
    (tmp_path / "pool.cu").write_text(text_at(tree, STEP, "cupy/core/carray.cuh") + sources[kernel])
    proc = subprocess.run([NVCC, f"--{kind}", "-arch", arch, "pool.cu"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"nvcc --{kind} -arch {arch} failed:\n{proc.stdout}{proc.stderr}"
    if kind == "ptx":
        ptx = (tmp_path / "pool.ptx").read_text()
        assert re.search(r"\.entry\s+lgpatch_max_pool_fwd", ptx) and re.search(r"\.entry\s+lgpatch_max_pool_bwd", ptx)
        assert "atom." not in ptx and "red." not in ptx  # no atomics: every gx element has one writer


# ------------------------------------------------------------------------------------- the rule, stated in NumPy
def windows_of(x: numpy.ndarray, kh: int, kw: int, out_h: int, out_w: int):
    """(n, c, oy, ox, values in row-major window order with their offsets ky * kw + kx), partial windows clipped."""
    n, c, h, w = x.shape
    for i in range(n):
        for j in range(c):
            for oy in range(out_h):
                for ox in range(out_w):
                    cells = [(ky * kw + kx, x[i, j, oy * kh + ky, ox * kw + kx])
                             for ky in range(min(kh, h - oy * kh)) for kx in range(min(kw, w - ox * kw))]
                    yield i, j, oy, ox, cells


def model(x: numpy.ndarray, gy: numpy.ndarray, kh: int, kw: int) -> tuple:
    """Chainer's GPU rule: the first element, replaced only by a strictly larger one (a NaN stays where it comes
    first and is passed over elsewhere); gx is gy at that element and zero everywhere else."""
    out_h, out_w = gy.shape[2:]
    y = numpy.empty(gy.shape)
    arg = numpy.empty(gy.shape, numpy.int64)
    gx = numpy.zeros(x.shape)
    for i, j, oy, ox, cells in windows_of(x, kh, kw, out_h, out_w):
        best_k, best = cells[0]
        for k, v in cells[1:]:
            if best < v:
                best_k, best = k, v
        y[i, j, oy, ox], arg[i, j, oy, ox] = best, best_k
        gx[i, j, oy * kh + best_k // kw, ox * kw + best_k % kw] = gy[i, j, oy, ox]
    return y, arg, gx


def nan_free_windows(x: numpy.ndarray, kh: int, kw: int, out_h: int, out_w: int) -> numpy.ndarray:
    free = numpy.ones((x.shape[0], x.shape[1], out_h, out_w), bool)
    for i, j, oy, ox, cells in windows_of(x, kh, kw, out_h, out_w):
        free[i, j, oy, ox] = not any(numpy.isnan(v) for _, v in cells)
    return free


def out_size(size: int, k: int, cover_all: bool) -> int:
    return -(-size // k) if cover_all else size // k


SHAPES = [(1, 1, 2, 2), (2, 3, 7, 9), (1, 2, 6, 8), (2, 1, 13, 17), (1, 1, 1, 1), (1, 2, 16, 32)]


def cases() -> list[dict]:
    """Integer-valued data (many ties), with NaN and infinities in some; every dtype, window, cover_all, shape."""
    rng = numpy.random.RandomState(17)
    out = []
    for t in "efd":
        for kh, kw in WINDOWS:
            for cover_all in (True, False):
                for shape in SHAPES:
                    oh, ow = out_size(shape[2], kh, cover_all), out_size(shape[3], kw, cover_all)
                    if oh <= 0 or ow <= 0:
                        continue
                    for special in ("ties", "nan", "inf"):
                        x = rng.randint(-3, 4, size=shape).astype("d")
                        if special == "nan":
                            x[rng.rand(*shape) < 0.2] = numpy.nan
                            x[..., 0, 0] = numpy.nan  # a NaN first in a window, kept by the rule
                        elif special == "inf":
                            x[rng.rand(*shape) < 0.3] = -numpy.inf
                            x[rng.rand(*shape) < 0.05] = numpy.inf
                        gy = rng.randint(1, 9, size=(shape[0], shape[1], oh, ow)).astype("d")
                        out.append({"t": t, "kh": kh, "kw": kw, "cover_all": cover_all, "x": x, "gy": gy})
    # float64 values float32 cannot hold: Chainer's kernel compares in float there, the new one in double.
    x = 1.0 + rng.randint(0, 4, size=(1, 2, 6, 6)) * 2.0 ** -40
    out.append({"t": "d", "kh": 2, "kw": 2, "cover_all": True, "x": x, "gy": numpy.ones((1, 2, 3, 3)),
                "fine": True})
    return out


# ------------------------------------------------------------------------------ the kernels' bodies on the host
HOST_PRELUDE = r"""
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
using std::max;
using std::min;
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
struct Dim { int x; };
static Dim blockIdx, threadIdx, blockDim;
// float16 on the host: the values the tests use are exact in half; conversions as carray.cuh has them.
class float16 {
  float v_;
 public:
  float16() {}
  float16(float v) : v_(v) {}
  operator float() const { return v_; }
};
// Counts stores into gx (every element must be written exactly once).
static std::vector<int> g_writes;
static const void* g_base;
class Counted {
  float v_;
 public:
  Counted() {}
  Counted(float v) : v_(v) {}
  operator float() const { return v_; }
  Counted& operator=(const Counted& o) {
    v_ = o.v_;
    // Only stores into gx count (the kernel's locals are assigned too).
    std::uintptr_t at = reinterpret_cast<std::uintptr_t>(this), base = reinterpret_cast<std::uintptr_t>(g_base);
    if (at >= base && at < base + g_writes.size() * sizeof(Counted)) g_writes[(at - base) / sizeof(Counted)] += 1;
    return *this;
  }
};
"""

CHAINER_KERNELS = r"""
namespace chainer_gpu {
template <typename T> void fwd(const T* in, int h, int w, int out_h, int out_w, int kh, int kw, int sy, int sx,
                               int ph, int pw, T* out_a, int* idx_a, int n) {
  for (int i = 0; i < n; ++i) {
    T& out = out_a[i];
    int& indexes = idx_a[i];
    FWD_OP
  }
}
template <typename T> void bwd(const T* gy, const int* indexes, int h, int w, int out_h, int out_w, int kh, int kw,
                               int sy, int sx, int ph, int pw, T* gx_a, int n) {
  for (int i = 0; i < n; ++i) {
    T& gx = gx_a[i];
    BWD_OP
  }
}
}
"""

HOST_MAIN = r"""
template <typename T, typename F, typename B>
static void run_case(FILE* in, FILE* out, F fast_fwd, B fast_bwd, int kh, int kw) {
  int n, c, h, w, oh, ow;
  if (fscanf(in, "%d %d %d %d %d %d", &n, &c, &h, &w, &oh, &ow) != 6) exit(3);
  int nx = n * c * h * w, ny = n * c * oh * ow;
  int bands = (h + kh - 1) / kh, groups = (w + kw - 1) / kw, nb = n * c * bands * groups;
  std::vector<T> x(nx), gy(ny), y(ny), gx(nx), cy(ny), cgx(nx);
  std::vector<signed char> arg(ny);
  std::vector<int> cidx(ny);
  for (int i = 0; i < nx; ++i) { double v; if (fscanf(in, "%lf", &v) != 1) exit(3); x[i] = T(v); }
  for (int i = 0; i < ny; ++i) { double v; if (fscanf(in, "%lf", &v) != 1) exit(3); gy[i] = T(v); }
  blockDim.x = 256;
  for (int b = 0; b * 256 < ny + 256; ++b) for (int t = 0; t < 256; ++t) {
    blockIdx.x = b; threadIdx.x = t;
    fast_fwd(x.data(), y.data(), arg.data(), h, w, oh, ow, ny);
  }
  for (int b = 0; b * 256 < nb + 256; ++b) for (int t = 0; t < 256; ++t) {
    blockIdx.x = b; threadIdx.x = t;
    fast_bwd(gy.data(), arg.data(), gx.data(), h, w, oh, ow, bands, groups, nb);
  }
  chainer_gpu::fwd(x.data(), h, w, oh, ow, kh, kw, kh, kw, 0, 0, cy.data(), cidx.data(), ny);
  chainer_gpu::bwd(gy.data(), cidx.data(), h, w, oh, ow, kh, kw, kh, kw, 0, 0, cgx.data(), nx);
  for (int i = 0; i < ny; ++i) fprintf(out, "%.17g %d %.17g %d\n", (double)y[i], (int)arg[i], (double)cy[i],
                                       cidx[i]);
  for (int i = 0; i < nx; ++i) fprintf(out, "%.17g %.17g\n", (double)gx[i], (double)cgx[i]);
}
"""


def host_program(sources: dict[str, str], pool_py: str) -> str:
    """One C++ program: each rendered kernel in a namespace of its own, Chainer's two operation strings in
    templates, and a main reading cases (kernel key, shape, x, gy) from stdin and printing both kernels' results."""
    ops = re.findall(r"'''\n((?:(?!''').)*?)''',\s*'max_pool_(fwd|bwd)'", pool_py, re.S)
    assert [name for _, name in ops] == ["fwd", "bwd"], "Chainer's own kernels not found"
    parts = [HOST_PRELUDE, CHAINER_KERNELS.replace("FWD_OP", ops[0][0]).replace("BWD_OP", ops[1][0])]
    keys = sorted(sources)
    for key in keys:
        body = sources[key].replace('extern "C" ', "")
        parts.append(f"namespace k_{key} {{\n{body}\n}}\n#undef _LG_KH\n#undef _LG_KW\n")
    counted = sources["f_2_3"].replace("typedef float _lg_T;", "typedef Counted _lg_T;").replace('extern "C" ', "")
    assert "typedef Counted _lg_T;" in counted
    parts.append(f"namespace counted {{\n{counted}\n}}\n#undef _LG_KH\n#undef _LG_KW\n")
    parts.append(HOST_MAIN)
    dispatch = []
    for key in keys:
        t, kh, kw = key.split("_")
        ctype = {"e": "float16", "f": "float", "d": "double"}[t]
        dispatch.append(f'    if (key == "{key}") run_case<{ctype}>(stdin, stdout, k_{key}::lgpatch_max_pool_fwd, '
                        f"k_{key}::lgpatch_max_pool_bwd, {kh}, {kw});")
    parts.append(COUNT_MAIN + "int main() {\n  char buf[32];\n  while (scanf(\"%31s\", buf) == 1) {\n"
                 "    std::string key(buf);\n    if (key == \"count\") { count_writes(); continue; }\n"
                 + "\n".join(dispatch) + "\n  }\n  return 0;\n}\n")
    return "#include <string>\n" + "".join(parts)


COUNT_MAIN = r"""
// The backward of a 2x3 window over sizes not divisible by it (covered and uncovered blocks): stores per element.
static void count_writes() {
  const int shapes[][4] = {{1, 2, 7, 8}, {2, 1, 6, 9}, {1, 1, 1, 1}, {1, 1, 5, 2}};
  for (const auto& s : shapes) for (int cover = 0; cover < 2; ++cover) {
    int n = s[0], c = s[1], h = s[2], w = s[3];
    int oh = cover ? (h + 1) / 2 : h / 2, ow = cover ? (w + 2) / 3 : w / 3;
    if (oh <= 0 || ow <= 0) continue;
    int bands = (h + 1) / 2, groups = (w + 2) / 3, nb = n * c * bands * groups, nx = n * c * h * w;
    std::vector<Counted> gy(n * c * oh * ow, Counted(1.0f)), gx(nx);
    std::vector<signed char> arg(n * c * oh * ow, 4);
    g_writes.assign(nx, 0);
    g_base = gx.data();
    blockDim.x = 256;
    for (int b = 0; b * 256 < nb + 256; ++b) for (int t = 0; t < 256; ++t) {
      blockIdx.x = b; threadIdx.x = t;
      counted::lgpatch_max_pool_bwd(gy.data(), arg.data(), gx.data(), h, w, oh, ow, bands, groups, nb);
    }
    for (int i = 0; i < nx; ++i) printf("%d ", g_writes[i]);
  }
  printf("\n");
}
"""


@pytest.fixture(scope="module")
def host_binary(tree: Path, sources: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    folder = tmp_path_factory.mktemp("pool-host")
    (folder / "pool.cpp").write_text(host_program(sources, text_at(tree, STEP, POOL)))
    flags = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-std=c++14"]
    build = subprocess.run([compiler, *flags, "-o", "pool", "pool.cpp"], cwd=folder, capture_output=True, text=True,
                           timeout=600)
    if build.returncode != 0 and "sanitize" in build.stderr:
        flags = ["-O1", "-std=c++14"]  # a compiler without the sanitizers' run-time libraries
        build = subprocess.run([compiler, *flags, "-o", "pool", "pool.cpp"], cwd=folder, capture_output=True,
                               text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-4000:]
    return folder / "pool"


def run_host(binary: Path, text: str) -> list[str]:
    proc = subprocess.run([str(binary)], input=text, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"host kernels exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc.stdout.splitlines()


def host_results(binary: Path, all_cases: list[dict]) -> list[dict]:
    lines = []
    for case in all_cases:
        x, gy = case["x"].astype(DTYPES[case["t"]]).astype("d"), case["gy"]
        case["x_cast"] = x
        head = f"{case['t']}_{case['kh']}_{case['kw']} {' '.join(map(str, x.shape))} {gy.shape[2]} {gy.shape[3]}"
        lines.append(head + "\n" + " ".join(repr(float(v)) for v in x.ravel()) + "\n"
                     + " ".join(repr(float(v)) for v in gy.ravel()))
    out = iter(run_host(binary, "\n".join(lines) + "\n"))
    results = []
    for case in all_cases:
        ny, nx = case["gy"].size, case["x"].size
        rows = [next(out).split() for _ in range(ny)]
        grads = [next(out).split() for _ in range(nx)]
        results.append({
            "y": numpy.array([float(r[0]) for r in rows]).reshape(case["gy"].shape),
            "arg": numpy.array([int(r[1]) for r in rows]).reshape(case["gy"].shape),
            "chainer_y": numpy.array([float(r[2]) for r in rows]).reshape(case["gy"].shape),
            "chainer_idx": numpy.array([int(r[3]) for r in rows]).reshape(case["gy"].shape),
            "gx": numpy.array([float(g[0]) for g in grads]).reshape(case["x"].shape),
            "chainer_gx": numpy.array([float(g[1]) for g in grads]).reshape(case["x"].shape)})
    return results


def same(a: numpy.ndarray, b: numpy.ndarray) -> bool:
    return bool(numpy.array_equal(a, b, equal_nan=True))


@pytest.fixture(scope="module")
def checked(host_binary: Path) -> tuple[list[dict], list[dict]]:
    all_cases = cases()
    return all_cases, host_results(host_binary, all_cases)


def test_host_kernels_follow_the_rule_and_chainers_own_gpu_kernels(checked: tuple) -> None:
    all_cases, results = checked
    assert len(all_cases) > 200
    for case, got in zip(all_cases, results):
        label = (case["t"], case["kh"], case["kw"], case["cover_all"], case["x"].shape)
        y, arg, gx = model(case["x_cast"], case["gy"], case["kh"], case["kw"])
        assert same(got["y"], y) and same(got["arg"], arg) and same(got["gx"], gx), label
        if case.get("fine"):
            # Chainer's kernel reads float64 through a float: it rounds the max (and may pick another element).
            assert not same(got["chainer_y"], y), label
            continue
        assert same(got["chainer_y"], got["y"]), label
        assert same(got["chainer_idx"], got["arg"]), label
        assert same(got["chainer_gx"], got["gx"]), label


def test_every_gx_element_is_written_exactly_once(host_binary: Path) -> None:
    counts = run_host(host_binary, "count\n")[0].split()
    assert counts and set(counts) == {"1"}, counts


def test_agrees_with_chainers_cpu_path_where_a_window_has_no_nan(trees: ChainerTrees, checked: tuple,
                                                                 tmp_path: Path) -> None:
    """Chainer's CPU path (im2col, NumPy's max and argmax) pools the same windows; NumPy's max propagates a NaN
    where the GPU rule passes it over unless it comes first, so windows with a NaN are compared by the rule only."""
    all_cases, results = checked
    numpy.savez(tmp_path / "cases.npz", **{f"x{i}": c["x_cast"].astype(DTYPES[c["t"]]) for i, c in
                                            enumerate(all_cases)}, **{f"g{i}": c["gy"].astype(DTYPES[c["t"]]) for
                                                                      i, c in enumerate(all_cases)})
    params = [(c["kh"], c["kw"], c["cover_all"]) for c in all_cases]
    code = f"""
    data = numpy.load({str(tmp_path / "cases.npz")!r})
    out = {{}}
    for i, (kh, kw, cover_all) in enumerate({params!r}):
        x = chainer.Variable(data["x%d" % i])
        y = F.max_pooling_2d(x, (kh, kw), cover_all=cover_all)
        y.grad = data["g%d" % i]
        y.backward()
        out["y%d" % i], out["gx%d" % i] = y.data, x.grad
    numpy.savez({str(tmp_path / "cpu.npz")!r}, **out)
    print(json.dumps({{"n": len(out)}}))
    """
    assert run_chainer(trees, trees.patched, code)["n"] == 2 * len(all_cases)
    cpu = numpy.load(tmp_path / "cpu.npz")
    compared_nan = 0
    for i, (case, got) in enumerate(zip(all_cases, results)):
        label = (case["t"], case["kh"], case["kw"], case["cover_all"], case["x"].shape)
        free = nan_free_windows(case["x_cast"], case["kh"], case["kw"], *case["gy"].shape[2:])
        cpu_y = cpu[f"y{i}"].astype("d")
        assert cpu_y.shape == got["y"].shape, label
        assert same(cpu_y[free], got["y"][free]), label
        if free.all():
            assert same(cpu[f"gx{i}"].astype("d"), got["gx"]), label
        else:
            compared_nan += 1
            assert numpy.isnan(cpu_y[~free]).all()  # NumPy: any NaN in the window
    assert compared_nan > 50


# ------------------------------------------------------------------------------------------ the Python dispatch
DISPATCH = """
from chainer.functions.pooling import max_pooling_2d as mp, pooling_2d
f4, f2, f8 = numpy.float32, numpy.float16, numpy.float64
calls = []
table = [
    ((2, 3, 8, 8), f4, (2, 2), (2, 2), (0, 0), True),
    ((2, 3, 7, 9), f4, (2, 2), (2, 2), (0, 0), True),
    ((2, 3, 7, 9), f4, (2, 2), (2, 2), (0, 0), False),
    ((1, 1, 7, 7), f2, (3, 3), (3, 3), (0, 0), True),
    ((1, 1, 7, 7), f8, (3, 3), (3, 3), (0, 0), False),
    ((1, 1, 2, 2), f4, (2, 2), (2, 2), (0, 0), False),
    ((1, 1, 1, 1), f4, (2, 2), (2, 2), (0, 0), True),
    ((1, 1, 1, 1), f4, (2, 2), (2, 2), (0, 0), False),
    ((1, 1, 9, 9), f4, (3, 3), (2, 2), (0, 0), True),
    ((1, 1, 9, 9), f4, (2, 2), (2, 2), (1, 1), True),
    ((1, 1, 9, 9), f4, (2, 3), (2, 3), (0, 0), True),
    ((1, 1, 9, 9), f4, (2, 3), (3, 2), (0, 0), True),
    ((1, 1, 16, 16), f4, (8, 16), (8, 16), (0, 0), True),
    ((1, 1, 16, 16), f4, (12, 11), (12, 11), (0, 0), True),
    ((1, 1, 8, 8), numpy.int32, (2, 2), (2, 2), (0, 0), True),
    ((0, 3, 8, 8), f4, (2, 2), (2, 2), (0, 0), True),
    ((2048, 1024, 32, 32), f4, (2, 2), (2, 2), (0, 0), True),
    ((32, 64, 128, 256), f4, (2, 2), (2, 2), (0, 0), True),
]
shapes = [mp._lg_fast_pool_shape(*row) for row in table]
mp._lg_fast_max_pool = False
off = mp._lg_fast_pool_shape(*table[0])
mp._lg_fast_max_pool = True


def record(name, result):
    def call(*args, **kwargs):
        calls.append(name)
        return result
    return call


x = numpy.zeros((2, 3, 8, 8), numpy.float32)
big = numpy.zeros((1, 1, 2048, 2048), numpy.float32)  # 2^22 elements: max-pool-small-cudnn's bound
mp._lg_forward = record("fast forward", (x[:, :, ::2, ::2], "offsets"))
mp._lg_backward = record("fast backward", x)
pooling_2d.Pooling2D.forward_gpu = record("cudnn forward", (x,))
pooling_2d.Pooling2D.backward_gpu = record("cudnn backward", (x,))
mp.cuda.cudnn_enabled = True
pooling_2d._cudnn_version = 7000
routes = []
for args, a in ((dict(ksize=2), big), (dict(ksize=2, use_cudnn=False), big), (dict(ksize=3, stride=2), big),
                (dict(ksize=2, pad=1), big), (dict(ksize=2), x), (dict(ksize=2, use_cudnn=False), x)):
    del calls[:]
    f = mp.MaxPooling2D(**args)
    f.forward_gpu((a,))
    f.backward_gpu((a,), (a,))
    routes.append(list(calls))
# Below the bound without cuDNN (a build without it): the kernels.
mp.cuda.cudnn_enabled = False
del calls[:]
f = mp.MaxPooling2D(2)
f.forward_gpu((x,))
f.backward_gpu((x,), (x,))
routes.append(list(calls))
mp.cuda.cudnn_enabled = True
small_ok = [mp._lg_cudnn_is_cheaper(numpy.zeros(n, numpy.float32), True) for n in ((1 << 22) - 1, 1 << 22)]
# One Function object, a covered call then one that is not: its backward must not use the stale offsets.
f = mp.MaxPooling2D(2)
f.forward_gpu((big,))
f.ph = 1
del calls[:]
f.forward_gpu((x,))
f.backward_gpu((x,), (x,))
routes.append(list(calls))
print(json.dumps({"shapes": shapes, "off": off, "routes": routes, "small": small_ok}))
"""


def test_dispatch_sends_exactly_the_non_overlapping_poolings_to_the_new_kernels(trees: ChainerTrees) -> None:
    got = run_chainer(trees, trees.patched, DISPATCH)
    assert got["shapes"] == [
        [4, 4], [4, 5], [3, 4], [3, 3], [2, 2], [1, 1], [1, 1],
        None,  # cover_all=False, window larger than the input: Chainer's path and its assertion
        None, None,  # overlapping windows; padding
        [5, 3], None,  # ksize (2, 3) == stride; a transposed stride
        [2, 1], None,  # 128 elements a window fit the int8 offsets, 132 do not
        None, None,  # not a float; an empty input
        None,  # 2^31 elements: beyond the kernels' int indexing
        [64, 128],
    ]
    assert got["off"] is None  # the module flag turns the path off
    assert got["routes"] == [
        ["fast forward", "fast backward"],
        ["fast forward", "fast backward"],  # use_cudnn=False: the same kernels, Chainer's GPU rule
        ["cudnn forward", "cudnn backward"],
        ["cudnn forward", "cudnn backward"],
        ["cudnn forward", "cudnn backward"],  # below 2^22 elements with cuDNN: Chainer's cuDNN path (host cost)
        ["fast forward", "fast backward"],  # ... but use_cudnn=False still gets the kernels
        ["fast forward", "fast backward"],  # ... and so does a build without cuDNN
        ["cudnn forward", "cudnn backward"],  # the stale-offsets case
    ]
    assert got["small"] == [True, False]  # the bound is strict: 2^22 elements take the kernels


def test_bench_check_script_parses_and_names_the_flag(tree: Path) -> None:
    from helpers import REPO

    script = (REPO / "bench" / "gpu" / "chainer_pool_check.py").read_text()
    compile(script, "chainer_pool_check.py", "exec")
    assert "_lg_fast_max_pool" in script and "_lg_fast_max_pool = True" in text_at(tree, STEP, POOL)


LAUNCH = """
from chainer.functions.pooling import max_pooling_2d as mp
made, launches = {}, []


class Memory:
    def __init__(self, ptr):
        self.ptr = ptr


class Array:
    \"\"\"What the launch code reads of a CuPy array: shape, dtype, size and the device pointer.\"\"\"
    def __init__(self, name, shape, dtype):
        self.shape, self.dtype = tuple(shape), numpy.dtype(dtype)
        self.size = int(numpy.prod(self.shape))
        self.data = Memory(4096 * (len(made) + 1))
        made[self.data.ptr] = (name, self.dtype.name, list(self.shape))


class Cupy:
    names = iter(["y", "argmax", "gx"])

    @staticmethod
    def ascontiguousarray(a):
        return a

    @staticmethod
    def empty(shape, dtype):
        return Array(next(Cupy.names), shape, dtype)


def kernels(dtype, kh, kw):
    def launcher(kind):
        def launch(grid, block, args):
            launches.append({"kind": kind, "grid": list(grid), "block": list(block), "key": [dtype, kh, kw],
                             "args": [made[a][0] if type(a) is int else [type(a).__name__, int(a)] for a in args]})
        return launch
    return launcher("fwd"), launcher("bwd")


mp.cuda.cupy = Cupy
mp._lg_pool_kernels = kernels
x = Array("x", (2, 3, 7, 9), "float16")
y, argmax = mp._lg_forward(x, 2, 3, (3, 3))  # cover_all=False: the last row of x in no window
gx = mp._lg_backward(x, Array("gy", (2, 3, 3, 3), "float16"), argmax, 2, 3)
print(json.dumps({"launches": launches, "arrays": sorted(made.values())}))
"""


def kernel_params(source: str, name: str) -> list[str]:
    found = re.search(rf"void {name}\((.*?)\)", source, re.S)
    assert found, name
    return [p.split()[-1] for p in found.group(1).split(",")]


def test_launches_pass_what_the_kernels_declare(trees: ChainerTrees, sources: dict[str, str]) -> None:
    """The launch code, run against recording stand-ins for CuPy's arrays and the compiled kernels: the arguments
    in the order and with the widths the kernels' signatures declare (pointers, then int32 sizes), and a grid that
    gives every window (forward) and every kh x kw block of gx (backward) one thread."""
    got = run_chainer(trees, trees.patched, LAUNCH)
    assert got["arrays"] == [["argmax", "int8", [2, 3, 3, 3]], ["gx", "float16", [2, 3, 7, 9]],
                             ["gy", "float16", [2, 3, 3, 3]], ["x", "float16", [2, 3, 7, 9]],
                             ["y", "float16", [2, 3, 3, 3]]]
    fwd, bwd = got["launches"]
    assert fwd["key"] == bwd["key"] == ["e", 2, 3]
    values = {"h": 7, "w": 9, "out_h": 3, "out_w": 3, "n_out": 54, "bands": 4, "groups": 3, "n_blocks": 72}
    for launch, name in ((fwd, "lgpatch_max_pool_fwd"), (bwd, "lgpatch_max_pool_bwd")):
        params = kernel_params(sources["e_2_3"], name)
        assert len(launch["args"]) == len(params), (name, params)
        for param, arg in zip(params, launch["args"]):
            if param in values:
                assert arg == ["int32", values[param]], (name, param, arg)
            else:
                assert arg == param, (name, param, arg)  # the array of the parameter's name
        threads = values["n_out" if launch is fwd else "n_blocks"]
        (blocks,), (block,) = launch["grid"], launch["block"]
        assert (blocks - 1) * block < threads <= blocks * block
