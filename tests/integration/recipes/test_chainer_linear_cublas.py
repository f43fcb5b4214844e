"""chainer-linear-cublas on the real Chainer 1.24.0 sdist: it applies (strict) as one commit on linear.py, right
after chainer-cudnn-graph-conv's graph-conv-lean (whose cupy.cudnn._lg_nchw_descriptor it uses); and
LinearFunction.forward, run as it is in the patched tree with CuPy's cuBLAS, device, cudnn and ndarray replaced by
fakes that compute with NumPy over the buffers at the pointers they are handed — sgemm/dgemm with cuBLAS's
column-major semantics (op(A) m x k, op(B) k x n, C m x n, each with its leading dimension, nothing read or written
outside the buffers), cudnnAddTensor with its broadcast over NCHW descriptors — gives y == x @ W.T (+ b) for several
shapes and both dtypes; the direct path runs only for C-contiguous float32/float64 with k >= 2 and out >= 2, with
CHAINER_LINEAR_CUBLAS unset or not 0, and every other case takes CuPy's dot (and +=) as before. A wrong argument
order in the gemm call (transposes, m and n, A and B, ldc) makes those checks fail.

On the GPU, bench/gpu/chainer_linear_check.py compares the path on and off (identical outputs and gradients) and with
NumPy, and times the batch-1 layer.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy
import pytest
from helpers import git
from helpers.reduction_template import applied_in_order, commit_of, text_at

pytestmark = [pytest.mark.integration]

STEP = "chainer-linear-cublas/linear-cublas"
LEAN = "chainer-cudnn-graph-conv/graph-conv-lean"
LINEAR = "chainer/functions/connection/linear.py"
CUBLAS_HANDLE, CUDNN_HANDLE = 0xCB, 0xCD
GEMM_CALL = """    gemm(_lg_device.get_cublas_handle(), 1, 0, out, n, k, 1, W.data.ptr, k,
         x.data.ptr, k, 0, y.data.ptr, out)"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "linear-cublas", LEAN, STEP)


def test_gated_to_cuda_11_with_or_without_cudnn(lgpatch) -> None:
    for cuda, cudnn, selected in (("13.0", "true", True), ("11.0", "true", True), ("13.0", "false", True),
                                  ("10.2", "true", False), ("9.0", "true", False), ("8.0", "true", False)):
        r = lgpatch("show", "chainer-1.24", "--cuda", cuda, "--python", "3.12", "--param", f"cudnn={cudnn}",
                    "--json")
        assert r.code == 0, r.err
        steps = {s["step"]: s["selected"] for s in json.loads(r.out)["steps"]}
        assert steps[STEP] is selected, (cuda, cudnn)
        # where cuDNN is built, the descriptor helper the bias add uses comes with it
        assert not selected or cudnn == "false" or steps[LEAN] is True


def test_one_commit_on_linear_py_right_after_graph_conv_lean(tree: Path) -> None:
    subjects = git(tree, "log", "--reverse", "--format=%s").splitlines()
    applied = [s.split("lgpatch: ", 1)[1] for s in subjects if s.startswith("lgpatch: ")]
    assert applied.index(STEP) == applied.index(LEAN) + 1
    assert git(tree, "show", "--name-only", "--format=", commit_of(tree, STEP)).split() == [LINEAR]
    forward = text_at(tree, STEP, LINEAR).split("    def forward(", 1)[1].split("    def backward(", 1)[0]
    # asked first; dot (and +=) stay the path for everything it declines; backward untouched
    assert forward.index("_lg_linear_gpu(") < forward.index("x.dot(W.T).astype(x.dtype, copy=False)")
    assert "y += b" in forward
    assert text_at(tree, STEP, LINEAR).split("    def backward(", 1)[1] == \
        text_at(tree, LEAN, LINEAR).split("    def backward(", 1)[1]


class Memory:
    """Device memory: a pointer names the flat NumPy buffer of an array's elements in memory order."""

    def __init__(self) -> None:
        self.buffers: dict[int, numpy.ndarray] = {}
        self._next = 1 << 20
        self.dots = 0
        self.iadds = 0

    def place(self, a: numpy.ndarray) -> int:
        self._next += 1 << 20
        flat = numpy.ravel(a, order="K")
        if a.size > 1 and not numpy.shares_memory(flat, a):  # strided: what lies at the pointer is not the array
            flat = numpy.full(a.size, numpy.nan, a.dtype)
        self.buffers[self._next] = flat
        return self._next


class GpuArray:
    """cupy.ndarray as linear.py and CuPy's dot path (reshape, .T, dot, astype, +=) use it; holds a NumPy array."""

    def __init__(self, mem: Memory, a: numpy.ndarray) -> None:
        self.mem, self.a = mem, a
        self.shape, self.ndim, self.dtype = a.shape, a.ndim, a.dtype
        self._c_contiguous = bool(a.flags.c_contiguous)
        self.data = types.SimpleNamespace(ptr=mem.place(a))

    def __len__(self) -> int:
        return len(self.a)

    def reshape(self, *shape: int) -> GpuArray:
        return GpuArray(self.mem, self.a.reshape(*shape))

    @property
    def T(self) -> GpuArray:
        return GpuArray(self.mem, self.a.T)

    def dot(self, other: GpuArray) -> GpuArray:
        self.mem.dots += 1
        return GpuArray(self.mem, self.a.dot(other.a))

    def astype(self, dtype: Any, copy: bool = True) -> GpuArray:
        if not copy and numpy.dtype(dtype) == self.dtype:
            return self
        return GpuArray(self.mem, self.a.astype(dtype))

    def __iadd__(self, other: GpuArray) -> GpuArray:
        self.mem.iadds += 1
        self.a += other.a
        return self


def column_major(buf: numpy.ndarray, rows: int, cols: int, ld: int, dtype: Any) -> numpy.ndarray:
    """The rows x cols column-major matrix with leading dimension ld at the start of buf, as cuBLAS reads it."""
    assert buf.dtype == dtype, (buf.dtype, dtype)
    assert rows >= 1 and cols >= 1 and ld >= rows, (rows, cols, ld)
    assert (cols - 1) * ld + rows <= buf.size, "cuBLAS would read or write past the buffer"
    return numpy.lib.stride_tricks.as_strided(buf, (rows, cols), (buf.itemsize, ld * buf.itemsize))


class Cublas:
    """cupy.cuda.cublas: sgemm/dgemm computing C = alpha op(A) op(B) + beta C over the buffers (0: N, 1: T)."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.calls: list[tuple] = []

    def sgemm(self, *args: Any) -> None:
        self._gemm("sgemm", numpy.float32, *args)

    def dgemm(self, *args: Any) -> None:
        self._gemm("dgemm", numpy.float64, *args)

    def _gemm(self, name: str, dtype: Any, handle: int, transa: int, transb: int, m: int, n: int, k: int,
              alpha: float, A: int, lda: int, B: int, ldb: int, beta: float, C: int, ldc: int) -> None:
        self.calls.append((name, handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc))
        assert handle == CUBLAS_HANDLE and transa in (0, 1) and transb in (0, 1)
        a = column_major(self.mem.buffers[A], *((k, m) if transa else (m, k)), lda, dtype)
        b = column_major(self.mem.buffers[B], *((n, k) if transb else (k, n)), ldb, dtype)
        c = column_major(self.mem.buffers[C], m, n, ldc, dtype)
        product = alpha * ((a.T if transa else a).astype("d") @ (b.T if transb else b).astype("d"))
        c[...] = product if beta == 0 else product + beta * c  # beta 0: C is not read (it may hold anything)


class Cudnn:
    """cupy.cudnn as the bias add uses it: descriptors by shape, alpha/beta scalars, cudnnAddTensor
    (C = alpha A + beta C, A broadcast where its dimensions are 1)."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.adds: list[tuple] = []

    def get_handle(self) -> int:
        return CUDNN_HANDLE

    def _lg_scalar(self, value: int, dtype: str) -> Any:
        return types.SimpleNamespace(data=(value, dtype))

    def _lg_nchw_descriptor(self, shape: tuple, dtype: Any) -> Any:
        assert type(shape) is tuple and len(shape) == 4 and all(type(d) is int for d in shape), shape
        return types.SimpleNamespace(value=(shape, numpy.dtype(dtype)))

    def add_tensor(self, handle: int, alpha: Any, a_desc: Any, a_ptr: int, beta: Any, c_desc: Any,
                   c_ptr: int) -> None:
        self.adds.append((handle, alpha, a_desc, beta, c_desc))
        (a_shape, a_dtype), (c_shape, c_dtype) = a_desc, c_desc
        scalar_dtype = "d" if c_dtype == numpy.float64 else "f"  # cuDNN reads double scalars for double tensors
        assert handle == CUDNN_HANDLE and alpha[1] == beta[1] == scalar_dtype
        a_buf, c_buf = self.mem.buffers[a_ptr], self.mem.buffers[c_ptr]
        assert a_buf.dtype == a_dtype and c_buf.dtype == c_dtype
        assert a_buf.size == numpy.prod(a_shape) and c_buf.size == numpy.prod(c_shape)
        assert all(ad in (1, cd) for ad, cd in zip(a_shape, c_shape))
        c = c_buf.reshape(c_shape)
        c[...] = alpha[0] * a_buf.reshape(a_shape) + beta[0] * c


class Fakes:
    def __init__(self) -> None:
        self.mem = Memory()
        self.cublas, self.cudnn = Cublas(self.mem), Cudnn(self.mem)

    def array(self, a: numpy.ndarray) -> GpuArray:
        return GpuArray(self.mem, a)

    def empty(self, shape: tuple, dtype: Any) -> GpuArray:
        return GpuArray(self.mem, numpy.full(shape, numpy.nan, dtype))  # uninitialized: NaN where nothing wrote


def load(tree: Path, monkeypatch: pytest.MonkeyPatch, env: str | None = None, cudnn_enabled: bool = True,
         source: str | None = None) -> tuple[dict, Fakes]:
    """linear.py as the step left it (or `source`), imported against the fakes; CHAINER_LINEAR_CUBLAS = env."""
    if env is None:
        monkeypatch.delenv("CHAINER_LINEAR_CUBLAS", raising=False)
    else:
        monkeypatch.setenv("CHAINER_LINEAR_CUBLAS", env)
    fakes = Fakes()
    cupy = types.ModuleType("cupy")
    cupy_cuda = types.ModuleType("cupy.cuda")
    cupy_cuda.cublas = fakes.cublas  # type: ignore[attr-defined]
    cupy_cuda.device = types.SimpleNamespace(get_cublas_handle=lambda: CUBLAS_HANDLE)  # type: ignore[attr-defined]
    cupy.cuda, cupy.empty = cupy_cuda, fakes.empty  # type: ignore[attr-defined]
    chainer = types.ModuleType("chainer")
    chainer.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        available=True, cudnn_enabled=cudnn_enabled, ndarray=GpuArray, cupy=cupy, cudnn=fakes.cudnn)
    chainer.function = types.SimpleNamespace(Function=object)  # type: ignore[attr-defined]
    utils = types.ModuleType("chainer.utils")
    utils.type_check = types.SimpleNamespace(  # type: ignore[attr-defined]
        same_types=lambda *xs: all(type(x) is type(xs[0]) for x in xs))
    chainer.utils = utils  # type: ignore[attr-defined]
    for name, module in {"chainer": chainer, "chainer.utils": utils, "cupy": cupy, "cupy.cuda": cupy_cuda}.items():
        monkeypatch.setitem(sys.modules, name, module)
    namespace: dict[str, Any] = {"__name__": "linear_under_test"}
    exec(compile(source if source is not None else text_at(tree, STEP, LINEAR), LINEAR, "exec"), namespace)
    return namespace, fakes


def reference(x: numpy.ndarray, W: numpy.ndarray, b: numpy.ndarray | None) -> numpy.ndarray:
    y = x.reshape(len(x), -1).astype("d") @ W.T.astype("d")
    return y if b is None else y + b.astype("d")


def forward(ns: dict, *arrays: Any) -> Any:
    (y,) = ns["LinearFunction"]().forward(arrays)
    return y


# (batch, in, out, dtype, bias, 4-d input): every one takes the direct path
DIRECT = [(1, 128, 2, "f", True, False), (1, 128, 2, "f", False, False), (1, 3, 5, "d", True, False),
          (3, 2, 5, "f", True, False), (7, 300, 13, "f", True, False), (5, 6, 5, "f", True, False),
          (2, 5, 9, "d", False, False), (64, 256, 10, "d", True, False), (1, 48, 7, "f", True, True),
          (4, 64, 3, "d", True, True)]


def operands(case: tuple, seed: int = 0) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray | None]:
    n, k, out, dtype, bias, four_d = case
    rng = numpy.random.RandomState(seed)
    x = rng.randn(*((n, k // 16, 4, 4) if four_d else (n, k))).astype(dtype)
    W = rng.randn(out, k).astype(dtype)
    return x, W, (rng.randn(out).astype(dtype) if bias else None)


def direct_matches(ns: dict, fakes: Fakes, case: tuple) -> bool:
    """The case through the direct path: one gemm, y == x @ W.T (+ b) to the dtype's rounding."""
    x, W, b = operands(case)
    before = len(fakes.cublas.calls)
    args = [fakes.array(x), fakes.array(W)] + ([] if b is None else [fakes.array(b)])
    try:
        y = forward(ns, *args)
    except AssertionError:  # the fake cuBLAS refused the arguments (bounds, leading dimension)
        return False
    assert len(fakes.cublas.calls) == before + 1 and fakes.mem.dots == 0
    tol = {"f": 1e-6, "d": 1e-13}[case[3]]
    return (y.shape == (case[0], case[2]) and y.dtype == numpy.dtype(case[3]) and
            bool(numpy.allclose(y.a, reference(x, W, b), rtol=tol, atol=tol)))


@pytest.mark.parametrize("case", DIRECT, ids=lambda c: "x".join(map(str, c[:3])) + c[3] + "b" * c[4] + "4d" * c[5])
def test_direct_path_gives_x_times_w_transposed_plus_b(tree: Path, monkeypatch: pytest.MonkeyPatch,
                                                       case: tuple) -> None:
    ns, fakes = load(tree, monkeypatch)
    assert direct_matches(ns, fakes, case)
    n, k, out, dtype, bias, _ = case
    (call,) = fakes.cublas.calls
    # what dot(x, W.T) passes: transa T, transb N, m out, n batch, k in, alpha 1, lda k, ldb k, beta 0, ldc out
    assert call == ({"f": "sgemm", "d": "dgemm"}[dtype], CUBLAS_HANDLE, 1, 0, out, n, k, 1, k, k, 0, out)
    assert fakes.mem.iadds == 0
    if bias:
        ((_, alpha, b_desc, beta, y_desc),) = fakes.cudnn.adds
        assert b_desc == ((1, out, 1, 1), numpy.dtype(dtype)) and y_desc == ((n, out, 1, 1), numpy.dtype(dtype))
        assert alpha[0] == beta[0] == 1
    else:
        assert not fakes.cudnn.adds


def test_without_cudnn_the_bias_is_added_by_iadd(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns, fakes = load(tree, monkeypatch, cudnn_enabled=False)
    case = (3, 10, 4, "f", True, False)
    assert direct_matches(ns, fakes, case)
    assert fakes.mem.iadds == 1 and not fakes.cudnn.adds


MUTATIONS = {
    "transposes swapped": ("1, 0, out, n, k", "0, 1, out, n, k"),
    "no transpose": ("1, 0, out, n, k", "0, 0, out, n, k"),
    "m and n swapped": ("1, 0, out, n, k", "1, 0, n, out, k"),
    "A and B swapped": ("W.data.ptr, k,\n         x.data.ptr, k", "x.data.ptr, k,\n         W.data.ptr, k"),
    "ldc batch": ("y.data.ptr, out)", "y.data.ptr, n)"),
    "lda out": ("W.data.ptr, k,", "W.data.ptr, out,"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_wrong_argument_order_is_caught(tree: Path, monkeypatch: pytest.MonkeyPatch, mutation: str) -> None:
    text = text_at(tree, STEP, LINEAR)
    assert text.count(GEMM_CALL) == 1  # the call the mutations edit is the patched one
    old, new = MUTATIONS[mutation]
    call = GEMM_CALL.replace(old, new)
    assert call != GEMM_CALL
    ns, fakes = load(tree, monkeypatch, source=text.replace(GEMM_CALL, call))
    assert not all(direct_matches(ns, fakes, case) for case in DIRECT)


# (x, W, b) makers for cases the direct path must decline: dot (and +=) as before, no cuBLAS or cuDNN call
def _c(shape: tuple, dtype: str = "f") -> numpy.ndarray:
    return numpy.random.RandomState(len(shape) + shape[-1]).randn(*shape).astype(dtype)


DECLINED = {
    "float16": (_c((2, 8), "e"), _c((3, 8), "e"), _c((3,), "e")),
    "out 1": (_c((4, 8)), _c((1, 8)), _c((1,))),
    "in 1": (_c((5, 1)), _c((4, 1)), _c((4,))),
    "x not C-contiguous": (numpy.asfortranarray(_c((6, 8))), _c((3, 8)), _c((3,))),
    "W not C-contiguous": (_c((2, 8)), numpy.asfortranarray(_c((3, 8))), _c((3,))),
    "b not C-contiguous": (_c((2, 8)), _c((3, 8)), _c((6,))[::2]),
    "W float64, x float32": (_c((2, 8)), _c((3, 8), "d"), None),
    "b float64, x float32": (_c((2, 8)), _c((3, 8)), _c((3,), "d")),
}


@pytest.mark.parametrize("name", DECLINED)
def test_every_other_case_takes_dot(tree: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    ns, fakes = load(tree, monkeypatch)
    x, W, b = DECLINED[name]
    assert ns["_lg_linear_gpu"](fakes.array(x), fakes.array(W), None if b is None else fakes.array(b)) is None
    y = forward(ns, *(fakes.array(a) for a in (x, W, b) if a is not None))
    assert not fakes.cublas.calls and not fakes.cudnn.adds
    assert fakes.mem.dots == 1 and fakes.mem.iadds == (b is not None)
    tol = 1e-2 if x.dtype == numpy.float16 else 1e-5
    assert numpy.allclose(y.a, reference(x, W, b), rtol=tol, atol=tol)


def test_cpu_arrays_take_dot(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns, fakes = load(tree, monkeypatch)
    x, W, b = _c((2, 8)), _c((3, 8)), _c((3,))
    assert ns["_lg_linear_gpu"](x, W, b) is None
    (y,) = ns["LinearFunction"]().forward((x, W, b))
    assert isinstance(y, numpy.ndarray) and numpy.allclose(y, reference(x, W, b), rtol=1e-5)
    assert not fakes.cublas.calls


@pytest.mark.parametrize(("env", "direct"), [(None, True), ("1", True), ("0", False)])
def test_chainer_linear_cublas_0_turns_it_off(tree: Path, monkeypatch: pytest.MonkeyPatch, env: str | None,
                                              direct: bool) -> None:
    ns, fakes = load(tree, monkeypatch, env=env)
    assert ns["_lg_enabled"] is direct
    x, W, b = operands((2, 8, 3, "f", True, False))
    y = forward(ns, fakes.array(x), fakes.array(W), fakes.array(b))
    assert len(fakes.cublas.calls) == direct and fakes.mem.dots == (not direct)
    assert numpy.allclose(y.a, reference(x, W, b), rtol=1e-6)
    ns["_lg_enabled"] = False  # the module flag, as chainer_linear_check.py toggles it
    forward(ns, fakes.array(x), fakes.array(W), fakes.array(b))
    assert len(fakes.cublas.calls) == direct
