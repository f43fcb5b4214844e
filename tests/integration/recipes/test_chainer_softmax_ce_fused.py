"""chainer-softmax-ce-fused on the real Chainer 1.24.0 sdist: it applies (strict) after chainer-call-overhead
as one commit adding forward/backward overrides to softmax_cross_entropy.py and one new module; the CUDA source
that module hands CuPy 1.24's compile_with_cache (rendered by the module itself, per dtype) compiles with the real
nvcc for sm_90 and PTX for compute_75; the kernels' per-row algorithm (the lane loops, the running max/sum and its
butterfly, the row loss, the gradient) compiled with g++ from that same source and driven the way the kernels
divide the work agrees with Chainer 1.24's own CPU softmax_cross_entropy (forward and backward, every
normalize/reduce/ignore_label case, (N, C) and (N, C, H, W), large and tiny logits, C not a multiple of the warp);
the mean and its coefficient as the kernels order them; and the Python dispatch (which inputs the fused path
takes) on the CPU import of the tree.

On the GPU, bench/gpu/chainer_sce_check.py runs the fused path against Chainer 1.24's path and NumPy.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy
import pytest
from helpers import NVCC, REPO, Runner, git, requires_nvcc
from helpers.chainer_cpu import ChainerTrees, assert_gated_like_the_speed_steps, chainer_trees, run_chainer

pytestmark = [pytest.mark.integration]

STEP = "chainer-softmax-ce-fused/fused-softmax-ce"
SCE = "chainer/functions/loss/softmax_cross_entropy.py"
FUSED = "chainer/functions/loss/_lg_sce_fused.py"
KERNELS = ("lg_sce_fwd_rows", "lg_sce_fwd_cols", "lg_sce_fwd_mean", "lg_sce_bwd_rows", "lg_sce_bwd_flat")


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> ChainerTrees:
    return chainer_trees(tmp_path_factory.mktemp("chainer-sce"), STEP)


@pytest.fixture(scope="module")
def sources(trees: ChainerTrees) -> dict[str, str]:
    """The CUDA source per dtype char, as the patched module renders it for compile_with_cache."""
    return run_chainer(trees, trees.patched, """
        from chainer.functions.loss import _lg_sce_fused
        print(json.dumps({d: _lg_sce_fused.source(d) for d in 'efd'}))
    """)


def test_step_is_gated_like_the_other_speed_steps(lgpatch: Runner) -> None:
    assert_gated_like_the_speed_steps(lgpatch, STEP)


def test_applies_after_call_overhead_adding_forward_and_backward_only(trees: ChainerTrees) -> None:
    applied = list(trees.applied)
    # After chainer-call-overhead, among the Python-side speed steps, before the CuPy reduction steps.
    assert applied.index("chainer-call-overhead/call-fast-paths") < applied.index(STEP) \
        < applied.index("cupy-reduction-grid/reduction-split-grid")
    commit = git(trees.patched, "log", "--format=%H", "--grep", f"lgpatch: {STEP}$")
    assert sorted(git(trees.patched, "show", "--name-only", "--format=", commit).split()) == [FUSED, SCE]
    diff = git(trees.patched, "show", "--format=", commit, "--", SCE)
    assert [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")] == []
    # forward/backward overrides above forward_cpu (hunks above those of steps gated by other parameters, e.g.
    # chainer-numpy2's in forward_cpu: test_every_parameter_combination_applies_exactly); the debug-mode label check
    # runs before the fused forward; Chainer 1.24's four methods are untouched.
    module = ast.parse((trees.patched / SCE).read_text())
    cls = next(c for c in module.body if isinstance(c, ast.ClassDef) and c.name == "SoftmaxCrossEntropy")
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    names = list(methods)
    assert names.index("forward") < names.index("backward") < names.index("forward_cpu")
    forward, backward = ast.unparse(methods["forward"]), ast.unparse(methods["backward"])
    assert "isinstance(x, cuda.ndarray) and isinstance(t, cuda.ndarray) and _lg_sce_fused.supported(self, x, t)" \
        in forward
    assert forward.index("self._check_input_values(x, t)") < forward.index("_lg_sce_fused.forward(self, x, t)")
    assert "super(SoftmaxCrossEntropy, self).forward(inputs)" in forward
    assert "_lg_sce_fused.backward(self, x, t, grad_outputs[0])" in backward
    assert "super(SoftmaxCrossEntropy, self).backward(inputs, grad_outputs)" in backward
    before = ast.parse(git(trees.without_step, "show", f"HEAD:{SCE}"))
    old_cls = next(c for c in before.body if isinstance(c, ast.ClassDef) and c.name == "SoftmaxCrossEntropy")
    old = {f.name: ast.unparse(f) for f in old_cls.body if isinstance(f, ast.FunctionDef)}
    for name in ("forward_cpu", "forward_gpu", "backward_cpu", "backward_gpu"):
        assert ast.unparse(methods[name]) == old[name], name


@requires_nvcc
@pytest.mark.nvcc
@pytest.mark.parametrize(("kind", "arch"), [("cubin", "sm_90"), ("ptx", "compute_75")])
@pytest.mark.parametrize("dtype", ["e", "f", "d"])
def test_kernel_source_compiles(sources: dict[str, str], tmp_path: Path, dtype: str, kind: str, arch: str) -> None:
    assert NVCC
    (tmp_path / "sce.cu").write_text(sources[dtype])
    proc = subprocess.run([NVCC, f"--{kind}", "-arch", arch, "sce.cu"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"nvcc --{kind} -arch {arch} failed:\n{proc.stdout}{proc.stderr}"
    if kind == "ptx":
        ptx = (tmp_path / "sce.ptx").read_text()
        assert sorted(re.findall(r"\.entry\s+(\w+)", ptx)) == sorted(KERNELS)
        assert "shfl.sync.bfly" in ptx


# ------------------------------------------------------------------------------------ the per-row model, on the host
# Reads N C S ignore, x (N*C*S accumulation-type values), t (N*S int32) and g (N*S per-row gradient scales); drives
# the source's own lane functions the way the kernels divide the work; writes lse, loss, counted, gx.
HARNESS = r"""
#include <cstdio>
#include <cstring>
#include <vector>
int main(int argc, char** argv) {
  FILE* in = fopen(argv[1], "rb");
  int h[4];
  if (fread(h, sizeof(int), 4, in) != 4) return 2;
  int N = h[0], C = h[1], S = h[2], ignore = h[3], rows = N * S;
  bool warp = argv[3][0] == 'r';
  std::vector<lg_acc_t> x((size_t)rows * C), g(rows), lse(2 * rows), loss(rows), counted(rows);
  std::vector<lg_acc_t> gx((size_t)rows * C);
  std::vector<int> t(rows);
  if (fread(x.data(), sizeof(lg_acc_t), x.size(), in) != x.size()) return 2;
  if (fread(t.data(), sizeof(int), rows, in) != (size_t)rows) return 2;
  if (fread(g.data(), sizeof(lg_acc_t), rows, in) != (size_t)rows) return 2;
  for (int r = 0; r < rows; ++r) {
    int n = r / S, u = r % S, cnt = 0;
    const lg_acc_t* row = warp ? &x[(size_t)r * C] : &x[(size_t)n * C * S + u];
    long long stride = warp ? 1 : S;
    lg_acc_t m[32], s[32], om[32], os[32];
    int lanes = warp ? 32 : 1;
    for (int lane = 0; lane < lanes; ++lane) lg_lane_lse(row, stride, C, lane, lanes, m[lane], s[lane]);
    for (int off = 16; warp && off > 0; off >>= 1) {  // __shfl_xor_sync butterfly
      memcpy(om, m, sizeof m);
      memcpy(os, s, sizeof s);
      for (int lane = 0; lane < 32; ++lane) lg_lse_merge(m[lane], s[lane], om[lane ^ off], os[lane ^ off]);
    }
    for (int lane = 1; lane < lanes; ++lane)
      if (memcmp(&m[lane], &m[0], sizeof m[0]) || memcmp(&s[lane], &s[0], sizeof s[0])) return 3;
    lg_acc_t mx = m[0], ls = lg_log(s[0]);
    lse[2 * r] = mx;
    lse[2 * r + 1] = ls;
    loss[r] = lg_row_loss(row, stride, C, t[r], ignore, mx, ls, cnt);
    counted[r] = cnt;
    if (warp) {  // lg_sce_bwd_rows
      lg_acc_t* grow = &gx[(size_t)r * C];
      if (t[r] == ignore) for (int c = 0; c < C; ++c) grow[c] = 0;
      else for (int lane = 0; lane < 32; ++lane) lg_lane_grad(row, grow, C, lane, 32, t[r], mx, ls, g[r]);
    } else {  // lg_sce_bwd_flat, element i = (n * C + c) * S + u
      for (int c = 0; c < C; ++c) {
        size_t i = ((size_t)n * C + c) * S + u;
        gx[i] = t[r] == ignore ? lg_acc_t(0) : g[r] * (lg_exp((x[i] - mx) - ls) - lg_acc_t(c == t[r]));
      }
    }
  }
  FILE* out = fopen(argv[2], "wb");
  fwrite(lse.data(), sizeof(lg_acc_t), 2 * rows, out);
  fwrite(loss.data(), sizeof(lg_acc_t), rows, out);
  fwrite(counted.data(), sizeof(lg_acc_t), rows, out);
  fwrite(gx.data(), sizeof(lg_acc_t), gx.size(), out);
  return fclose(out) != 0;
}
"""

# The harness stands for these device lines; they must be the source's.
DEVICE_LINES = (
    "for (int off = 16; off > 0; off >>= 1) {\n      lg_acc_t m2 = __shfl_xor_sync(0xffffffffu, m, off);\n"
    "      lg_acc_t s2 = __shfl_xor_sync(0xffffffffu, s, off);\n      lg_lse_merge(m, s, m2, s2);",
    "lg_lane_lse(row, 1, n_class, lane, 32, m, s);",
    "const lg_x_t* row = x + (long long)n * n_class * n_unit + u;",
    "lg_lane_lse(row, n_unit, n_class, 0, 1, m, s);",
    "lg_acc_t ls = lg_log(s);\n      lse_out[2 * r] = m;\n      lse_out[2 * r + 1] = ls;",
    "lg_acc_t ls = lg_log(s);\n    lse_out[2 * r] = m;\n    lse_out[2 * r + 1] = ls;",
    "if (tr == ignore) {\n    for (int c = lane; c < n_class; c += 32) lg_store(grow + c, lg_acc_t(0));",
    "lg_lane_grad(row, grow, n_class, lane, 32, tr, lse[2 * r], lse[2 * r + 1],\n               g);",
    "lg_acc_t p = lg_exp((lg_acc_t(lg_in(x[i])) - lse[2 * r]) - lse[2 * r + 1]);\n"
    "  lg_store(gx + i, g * (p - lg_acc_t(c == tr)));",
    "int r = (int)(n * (unsigned int)n_unit + u);",
)


@pytest.fixture(scope="module")
def harnesses(sources: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The float and double sources (no __CUDACC__: the host part only) + HARNESS, built with g++."""
    for line in DEVICE_LINES:
        assert line in sources["f"], line
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    root = tmp_path_factory.mktemp("sce-host")
    built = {}
    for dtype in "fd":
        (root / f"sce_{dtype}.cpp").write_text(sources[dtype] + HARNESS)
        proc = subprocess.run([compiler, "-O2", "-Wall", "-o", f"sce_{dtype}", f"sce_{dtype}.cpp"], cwd=root,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        built[dtype] = root / f"sce_{dtype}"
    return built


def run_model(exe: Path, tmp: Path, x: numpy.ndarray, t: numpy.ndarray, g: numpy.ndarray, ignore: int, kind: str,
              acc: numpy.dtype) -> dict[str, numpy.ndarray]:
    n, c = x.shape[:2]
    s = x.size // (n * c)
    with open(tmp / "in.bin", "wb") as f:
        f.write(numpy.array([n, c, s, ignore], "<i4").tobytes())
        f.write(x.astype(acc).tobytes() + t.astype("<i4").tobytes() + g.astype(acc).tobytes())
    proc = subprocess.run([str(exe), str(tmp / "in.bin"), str(tmp / "out.bin"), kind], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.returncode
    out = numpy.fromfile(tmp / "out.bin", acc)
    rows = n * s
    return {"lse": out[:2 * rows].reshape(rows, 2), "loss": out[2 * rows:3 * rows],
            "counted": out[3 * rows:4 * rows], "gx": out[4 * rows:].reshape(x.shape)}


def tree_sum(values: numpy.ndarray, width: int) -> numpy.ndarray:
    """lg_block_sum: each block of `width` thread values summed by halving strides (index order of the tree)."""
    a = values.reshape(-1, width).copy()
    o = width // 2
    while o > 0:
        a[:, :o] += a[:, o:2 * o]
        o //= 2
    return a[:, 0]


def fused_mean(loss: numpy.ndarray, counted: numpy.ndarray, kind: str, normalize: bool, n_batch: int,
               dtype: numpy.dtype, acc: numpy.dtype) -> tuple:
    """lg_sce_fwd_{rows,cols}'s per-block partials and lg_sce_fwd_mean, in the kernels' order: a block's rows
    (8 at lanes 0 of its warps, or 256 a thread each), then thread i of one block summing partials i, i + 256, ...
    in turn, then the tree; coeff = 1 / max(1, count or N) rounded to x's type; loss = sum * coeff."""
    rows, width = loss.size, 256
    per_block = 8 if kind == "rows" else width
    blocks = -(-rows // per_block)
    slot = (numpy.arange(rows) // per_block) * width + (numpy.arange(rows) % per_block) * (width // per_block)
    values, counts = numpy.zeros(blocks * width, acc), numpy.zeros(blocks * width, numpy.int64)
    values[slot], counts[slot] = loss, counted
    part, part_count = tree_sum(values, width), tree_sum(counts, width)
    threads, thread_counts = numpy.zeros(width, acc), numpy.zeros(width, numpy.int64)
    for i in range(blocks):
        threads[i % width] += part[i]
        thread_counts[i % width] += part_count[i]
    total, count = tree_sum(threads, width)[0], int(tree_sum(thread_counts, width)[0])
    coeff = dtype.type(acc.type(1) / acc.type(max(1, count if normalize else n_batch)))
    return dtype.type(total * acc.type(coeff)), coeff


# (x dtype, shape, fraction of rows with ignore_label, logit scale, logit offset, ignore_label)
CASES = [
    ("f", (1, 1), 0.0, 1.0, 0.0, -1), ("f", (7, 3), 0.3, 2.0, 0.0, -1), ("d", (7, 3), 0.3, 2.0, 0.0, -1),
    ("f", (64, 1000), 0.25, 3.0, 0.0, -1), ("d", (64, 1000), 0.25, 3.0, 0.0, -1), ("f", (40, 33), 0.2, 1.0, 0.0, 0),
    ("f", (9, 32), 0.0, 1.0, 0.0, -1), ("f", (9, 31), 0.5, 1.0, 0.0, -1), ("f", (5, 129), 0.0, 30.0, 1e4, -1),
    ("f", (5, 127), 0.0, 1.0, -1e10, -1), ("d", (5, 1001), 0.2, 200.0, 500.0, -1),
    ("e", (6, 100), 0.2, 2.0, 0.0, -1), ("f", (3, 5, 4, 6), 0.2, 2.0, 0.0, -1), ("d", (2, 40, 3, 3), 0.3, 1.0, 0.0, -1),
    ("f", (4, 1, 2, 2), 0.0, 1.0, 0.0, 7),
    ("f", (300, 50), 1.0, 1.0, 0.0, -1), ("f", (2100, 40), 0.1, 1.0, 0.0, -1), ("f", (2, 3, 300), 0.1, 1.0, 0.0, -1),
]

TOL = {"e": 3e-3, "f": 2e-5, "d": 1e-12}


def case_inputs(index: int, dtype: str, shape: tuple, ignore_frac: float, scale: float, offset: float,
                ignore: int) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    rng = numpy.random.RandomState(100 + index)
    x = (rng.randn(*shape) * scale + offset).astype(dtype)
    if index == 9:  # a -inf logit (not the label's) in every row: exp(-inf) adds nothing
        x[:, 1] = -numpy.inf
    t_shape = (shape[0], *shape[2:])
    t = rng.randint(0, shape[1], size=t_shape).astype("i")
    if index == 9:
        t[...] = 0
    t[rng.rand(*t_shape) < ignore_frac] = ignore
    return x, t, rng.randn(*t_shape)


REFERENCE = """
import numpy, json
data = numpy.load(%r)
out = {}
for key in sorted(set(k.split('/')[0] for k in data.files)):
    x, t, gl = data[key + '/x'], data[key + '/t'], data[key + '/gl']
    for normalize in (True, False):
        for reduce in ('mean', 'no'):
            xv = chainer.Variable(x.astype('d'))
            loss = F.softmax_cross_entropy(xv, t, normalize=normalize, cache_score=normalize,
                                           ignore_label=int(data[key + '/ignore']), reduce=reduce)
            loss.grad = numpy.ones((), 'd') if reduce == 'mean' else gl
            loss.backward()
            name = '%%s/%%d/%%s' %% (key, normalize, reduce)
            out[name + '/loss'], out[name + '/gx'] = loss.data, xv.grad
numpy.savez(%r, **out)
print(json.dumps({"cases": len(out) // 2}))
"""


def test_fused_model_agrees_with_chainers_own_softmax_cross_entropy(trees: ChainerTrees, harnesses: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    """Every case through the kernels' host model and through Chainer 1.24's CPU function (float64 of the same
    x): per-row loss and gx for reduce='no' (ignore rows 0, gradients scaled by their own gloss), the mean and its
    gx for normalize True and False."""
    inputs: dict[str, Any] = {}
    for i, case in enumerate(CASES):
        x, t, gl = case_inputs(i, *case)
        inputs.update({f"c{i}/x": x, f"c{i}/t": t, f"c{i}/gl": gl, f"c{i}/ignore": numpy.array(case[-1])})
    numpy.savez(tmp_path / "in.npz", **inputs)
    assert run_chainer(trees, trees.patched, REFERENCE % (str(tmp_path / "in.npz"), str(tmp_path / "ref.npz"))) == {
        "cases": 4 * len(CASES)}
    ref = numpy.load(tmp_path / "ref.npz")
    plans = run_chainer(trees, trees.patched, f"""
        from chainer.functions.loss import _lg_sce_fused
        print(json.dumps([_lg_sce_fused.plan(s) for s in {[c[1] for c in CASES]!r}]))
    """)
    for i in range(len(CASES)):
        for normalize in (True, False):
            for reduce in ("mean", "no"):
                assert_case_agrees(harnesses, tmp_path, inputs, ref, i, plans[i], normalize, reduce)


def assert_case_agrees(harnesses: dict[str, Path], tmp_path: Path, inputs: dict, ref: Any, i: int, kind: str,
                       normalize: bool, reduce: str) -> None:
    dtype, shape, *_rest, ignore = CASES[i]
    x, t, gl = inputs[f"c{i}/x"], inputs[f"c{i}/t"], inputs[f"c{i}/gl"]
    xdt, acc = numpy.dtype(dtype), numpy.dtype("d" if dtype == "d" else "f")
    exe, tol = harnesses["d" if dtype == "d" else "f"], TOL[dtype]
    key = f"c{i}/{int(normalize)}/{reduce}"
    forward = run_model(exe, tmp_path, x, t, numpy.ones(t.size), ignore, kind, acc)
    assert set(numpy.unique(forward["counted"])) <= {0, 1}
    if reduce == "no":
        g = gl.ravel()
        loss = forward["loss"].astype(xdt).reshape(t.shape)
    else:
        loss, coeff = fused_mean(forward["loss"], forward["counted"], kind, normalize, shape[0], xdt, acc)
        g = numpy.full(t.size, acc.type(coeff))
    assert numpy.asarray(loss).dtype == xdt and numpy.shape(loss) == ref[key + "/loss"].shape
    bound = tol * (1 + numpy.abs(x[numpy.isfinite(x)]).max())
    numpy.testing.assert_allclose(loss, ref[key + "/loss"], rtol=tol, atol=bound, err_msg=key)
    gx = run_model(exe, tmp_path, x, t, g, ignore, kind, acc)["gx"].astype(xdt)
    numpy.testing.assert_allclose(gx, ref[key + "/gx"], rtol=tol, atol=tol * max(1.0, abs(g).max()), err_msg=key)
    ignored = numpy.broadcast_to((t == ignore).reshape(shape[0], 1, -1), (shape[0], shape[1], t.size // shape[0]))
    assert (gx.reshape(shape[0], shape[1], -1)[ignored] == 0).all()


def test_label_out_of_range_gives_nan_without_reading_outside_the_row(harnesses: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    """Chainer 1.24 read log_y outside the row for such a label (debug mode raises first, see the order test);
    the kernels give NaN for that row's loss, count it as Chainer 1.24's normalize did, and no gradient one-hot."""
    x = numpy.random.RandomState(1).randn(4, 40).astype("f")
    t = numpy.array([3, 40, -5, -1], "i")
    for kind in ("rows", "cols"):
        got = run_model(harnesses["f"], tmp_path, x, t, numpy.ones(4), -1, kind, numpy.dtype("f"))
        assert numpy.isfinite(got["loss"][[0, 3]]).all() and numpy.isnan(got["loss"][[1, 2]]).all()
        assert list(got["counted"]) == [1, 1, 1, 0]
        soft = numpy.exp(x - x.max(1, keepdims=True))
        soft /= soft.sum(1, keepdims=True)
        numpy.testing.assert_allclose(got["gx"][1:3], soft[1:3], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("offset", [1e30, -1e30, 1e4])
def test_huge_logits_against_a_stable_numpy_log_softmax(harnesses: dict[str, Path], tmp_path: Path,
                                                        offset: float) -> None:
    """Logits at +-1e30 (float32 holds them; their exponentials overflow or vanish) and a -inf logit: the running
    max keeps every exponential finite, and m and ls apart keep (x - m) - ls exact where Chainer 1.24's
    x - (m + ls) rounds at the logits' scale (so the reference here is NumPy's stable form, in float64)."""
    rng = numpy.random.RandomState(7)
    x = (rng.randn(6, 127) * (1e25 if abs(offset) > 1e20 else 3.0) + offset).astype("f")
    x[:, 5] = -numpy.inf
    t = numpy.array([0, 1, 2, 126, -1, 64], "i")
    xd = x.astype("d")
    m = xd.max(1, keepdims=True)
    log_y = (xd - m) - numpy.log(numpy.exp(xd - m).sum(1, keepdims=True))
    for kind in ("rows", "cols"):
        got = run_model(harnesses["f"], tmp_path, x, t, numpy.ones(6), -1, kind, numpy.dtype("f"))
        want = numpy.where(t == -1, 0.0, -log_y[numpy.arange(6), numpy.maximum(t, 0)])
        numpy.testing.assert_allclose(got["loss"], want, rtol=1e-5, atol=1e-5)
        soft = numpy.exp(log_y)
        soft[numpy.arange(6), numpy.maximum(t, 0)] -= 1
        soft[t == -1] = 0
        numpy.testing.assert_allclose(got["gx"], soft, rtol=1e-5, atol=1e-6)


DISPATCH = """
from chainer.functions.loss import _lg_sce_fused
from chainer.functions.loss.softmax_cross_entropy import SoftmaxCrossEntropy as SCE
x4 = numpy.zeros((2, 3, 4, 5), 'f')
t4 = numpy.zeros((2, 4, 5), 'i')
x2, t2 = numpy.zeros((8, 40), 'f'), numpy.zeros(8, 'i')
cases = {
    "float32": (SCE(), x2, t2), "float64": (SCE(), x2.astype('d'), t2), "float16": (SCE(), x2.astype('e'), t2),
    "nchw": (SCE(), x4, t4), "reduce_no": (SCE(reduce='no'), x2, t2), "no_normalize": (SCE(normalize=False), x2, t2),
    "no_cache": (SCE(cache_score=False), x2, t2), "ignore_0": (SCE(ignore_label=0), x2, t2),
    "ignore_int64": (SCE(ignore_label=numpy.int64(-1)), x2, t2), "C1": (SCE(), numpy.zeros((8, 1), 'f'), t2),
    "class_weight": (SCE(class_weight=numpy.ones(40, 'f')), x2, t2),
    "transposed": (SCE(), numpy.zeros((40, 8), 'f').T, t2), "strided": (SCE(), numpy.zeros((8, 80), 'f')[:, ::2], t2),
    "t_int64": (SCE(), x2, t2.astype('q')), "x_1d": (SCE(), numpy.zeros(8, 'f'), t2),
    "empty": (SCE(), numpy.zeros((0, 40), 'f'), numpy.zeros(0, 'i')), "int_x": (SCE(), x2.astype('i'), t2),
    "ignore_huge": (SCE(ignore_label=2 ** 40), x2, t2), "ignore_bool": (SCE(ignore_label=True), x2, t2),
}
out = {name: _lg_sce_fused.supported(*args) for name, args in cases.items()}
_lg_sce_fused.enabled = False
out["disabled"] = _lg_sce_fused.supported(SCE(), x2, t2)
out["plans"] = [_lg_sce_fused.plan(s) for s in [(8, 40), (8, 32), (8, 31), (8, 1), (2, 40, 3), (2, 3, 4, 5)]]
out["blocks"] = [_lg_sce_fused.launch_blocks(s) for s in [(65536, 1000), (9, 40), (7, 3), (2, 3, 300), (1, 1)]]
print(json.dumps(out))
"""


def test_dispatch_takes_the_common_case_and_leaves_the_rest_to_chainer(trees: ChainerTrees) -> None:
    got = run_chainer(trees, trees.patched, DISPATCH)
    fused = {"float32", "float64", "float16", "nchw", "reduce_no", "no_normalize", "no_cache", "ignore_0",
             "ignore_int64", "C1"}
    assert {k for k, v in got.items() if v is True} == fused
    assert {k for k, v in got.items() if v is False} == {"class_weight", "transposed", "strided", "t_int64", "x_1d",
                                                         "empty", "int_x", "ignore_huge", "ignore_bool", "disabled"}
    assert got["plans"] == ["rows", "rows", "cols", "cols", "cols", "cols"]
    # (forward blocks, backward blocks): 8 rows a block for the warp a row; else a thread a row, a thread an element
    assert got["blocks"] == [[8192, 8192], [2, 2], [1, 1], [3, 8], [1, 1]]


CPU_RUN = """
out = {}
rng = numpy.random.RandomState(5)
for shape in ((6, 40), (3, 4, 2, 2)):
    x = rng.randn(*shape).astype('f')
    t = rng.randint(0, shape[1], (shape[0],) + shape[2:]).astype('i')
    t.ravel()[0] = -1
    for reduce in ('mean', 'no'):
        xv = chainer.Variable(x)
        loss = F.softmax_cross_entropy(xv, t, reduce=reduce)
        loss.grad = numpy.ones(loss.data.shape, 'f')
        loss.backward()
        out['%s/%s' % (shape, reduce)] = [loss.data.tobytes().hex(), xv.grad.tobytes().hex(), str(loss.data.dtype)]
bad = numpy.array([0, 1, 2, 3, 4, 40], 'i')
chainer.set_debug(True)
out['debug'] = outcome(lambda: F.softmax_cross_entropy(chainer.Variable(rng.randn(6, 40).astype('f')), bad))
print(json.dumps(out))
"""


def test_cpu_path_is_chainers_and_debug_mode_still_refuses_a_bad_label(trees: ChainerTrees) -> None:
    patched = run_chainer(trees, trees.patched, CPU_RUN)
    assert patched == run_chainer(trees, trees.without_step, CPU_RUN)
    assert patched["debug"].startswith("ValueError: Each label `t` need to satisfy")


BENCH_REFERENCE = """
import sys
sys.path.insert(0, %r)
import chainer_sce_check as check
rng = numpy.random.RandomState(0)
failures, n = [], 0
for shape in check.SMALL:
    for ignored in (False, True):
        x, t = check.inputs(None, rng, shape, 'd', ignored)
        for normalize in (True, False):
            for reduce in ('mean', 'no'):
                gl = numpy.ones((), 'd') if reduce == 'mean' else rng.randn(*t.shape)
                xv = chainer.Variable(x)
                loss = F.softmax_cross_entropy(xv, t, normalize=normalize, reduce=reduce)
                loss.grad = gl
                loss.backward()
                want_loss, want_gx = check.reference(x, t, normalize, reduce, gl)
                c = check.Check()
                c.close('loss', loss.data, want_loss, 1e-10, 1.0)
                c.close('gx', xv.grad, want_gx, 1e-10, 1.0)
                failures += c.failures
                n += 1
print(json.dumps({"n": n, "failures": failures, "gpu_cases": sum(1 for _ in check.cases(rng))}))
"""


def test_gpu_checks_reference_is_chainers_definition_and_it_fails_without_cupy(trees: ChainerTrees) -> None:
    """bench/gpu/chainer_sce_check.py's float64 NumPy reference equals Chainer 1.24's CPU function on its small
    shapes; run where CuPy cannot import (this tree: no extension modules) it says so and exits 1."""
    bench = REPO / "bench" / "gpu"
    got = run_chainer(trees, trees.patched, BENCH_REFERENCE % str(bench))
    assert got == {"n": 48, "failures": [], "gpu_cases": 312}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(trees.patched), *([str(trees.deps)] if trees.deps else [])])
    proc = subprocess.run([sys.executable, str(bench / "chainer_sce_check.py"), "--no-timing"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 1 and proc.stdout.strip().splitlines()[-1] == "0/1 passed", proc.stdout + proc.stderr
    assert "no chainer-softmax-ce-fused or no CuPy" in proc.stderr
