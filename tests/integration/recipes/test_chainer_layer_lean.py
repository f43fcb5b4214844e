"""chainer-layer-lean on the real Chainer 1.24.0 sdist: one commit on five files, gated like the graph convolution;
and the code it changed, run as it is in the patched tree against CuPy's cuDNN binding replaced by a recording
fake (test_chainer_cudnn_host_cache.Binding), makes exactly the cuDNN calls, with the same arguments, that the
tree one step earlier makes: Pooling2D.forward_gpu for shapes, windows, dtypes and cover_all that come back, a
subclass whose create_pool_desc is not registered, and an empty output; cudnn.activation_forward for 0-d to 4-d and
empty inputs. The convolution's same-types test still refuses mixed NumPy / CuPy inputs (the real tree on the CPU).

On the GPU, bench/gpu/chainer_proof.py and chainer_reduction_check.py (cuDNN pooling, ReLU and convolution
against the CPU results) run on a wheel of the recipe.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import numpy
import pytest
import test_chainer_cudnn_host_cache as host_cache
from helpers import Runner, git
from helpers.chainer_cpu import ChainerTrees, assert_gated_to_cudnn_builds_from, chainer_trees, run_chainer
from helpers.reduction_template import commit_of, text_at

pytestmark = [pytest.mark.integration]

STEP = "chainer-layer-lean/layer-lean"
BEFORE = "cupy-reduction-odometer/reduction-split-waves"  # the step before it: cupy/cudnn.py as cudnn-lean left it
POOLING = "chainer/functions/pooling/pooling_2d.py"
FILES = ["chainer/functions/connection/convolution_2d.py", "chainer/functions/pooling/average_pooling_2d.py",
         "chainer/functions/pooling/max_pooling_2d.py", POOLING, "cupy/cudnn.py"]


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> ChainerTrees:
    return chainer_trees(tmp_path_factory.mktemp("chainer-layer-lean"), STEP)


def test_gated_like_the_graph_convolution(lgpatch: Runner) -> None:
    steps = assert_gated_to_cudnn_builds_from(lgpatch, STEP, "11.0", "10.2")
    assert steps["chainer-cudnn-graph-conv/graph-conv-lean"] is True


def test_last_step_one_commit_on_its_five_files(trees: ChainerTrees) -> None:
    at = trees.applied.index(STEP)
    assert trees.applied[at - 1] == BEFORE
    changed = git(trees.patched, "show", "--name-only", "--format=", commit_of(trees.patched, STEP)).split()
    assert sorted(changed) == FILES
    for name, cls in (("max", "MaxPooling2D"), ("average", "AveragePooling2D")):
        text = text_at(trees.patched, STEP, f"chainer/functions/pooling/{name}_pooling_2d.py")
        assert f"pooling_2d._lg_plain_pool_descs.add({cls}.create_pool_desc)" in text


class Recording(host_cache.Binding):
    """The host cache test's fake binding, also recording the cuDNN calls that run a layer."""

    CUDNN_POOLING_MAX = 0
    HANDLE = 7

    def __init__(self) -> None:
        super().__init__()
        self.scalars: dict[Any, Any] = {}  # the module's alpha/beta table ((value, dtype) -> its scalar), once loaded

    def create(self) -> int:
        return self.HANDLE

    def destroy(self, handle: int) -> None:  # cupy/cudnn.py's reset_handles, at exit
        pass

    def __getattr__(self, name: str) -> Any:
        if name in ("poolingForward", "activationForward_v4"):
            return lambda *args: self.calls.append((name, *args))
        return super().__getattr__(name)

    def described(self) -> list[tuple]:
        """Each layer call, its descriptors replaced by what they were set to hold (handles differ between runs)."""
        held: dict[int, Any] = {call[1]: (call[0], *call[2:]) for call in self.calls if call[0].startswith("set")}
        held.update({scalar.data: ("scalar", *key) for key, scalar in self.scalars.items()})
        return [tuple(held.get(a, a) if isinstance(a, int) else a for a in call)
                for call in self.calls if not call[0].startswith("set")]


class Memory:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class Array(host_cache.Array):
    """The cupy.ndarray attributes the layers read: contiguous arrays at made-up addresses."""

    made = 0

    def __init__(self, shape: tuple[int, ...], dtype: Any = "f") -> None:
        super().__init__(tuple(shape), numpy.dtype(dtype).char)
        Array.made += 1
        self.data = Memory(4096 * Array.made)
        self.size = int(numpy.prod(shape))

    @property
    def _c_contiguous(self) -> bool:  # what chainer-host-inline reads in place of flags.c_contiguous
        return bool(self.flags.c_contiguous)

    def reshape(self, *shape: int) -> Array:
        view = Array(numpy.empty(self.shape, self.dtype).reshape(*shape).shape, self.dtype)
        Array.made -= 1  # a view takes no memory of its own: the addresses that follow stay those of before
        view.data = self.data
        return view


def fake_cupy() -> Any:
    return types.SimpleNamespace(ascontiguousarray=lambda x: x, empty_like=lambda x: Array(x.shape, x.dtype),
                                 empty=lambda shape, dtype: Array(shape, dtype), ndarray=Array)


def cudnn_module(tree: Path, step: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Recording]:
    """cupy/cudnn.py as it was right after `step`, on a recording binding; cupy.ascontiguousarray and empty_like
    as CuPy's for contiguous arrays."""
    recording = Recording()
    monkeypatch.setattr(host_cache, "Binding", lambda: recording)
    namespace, _ = host_cache.load(tree, step, monkeypatch)
    namespace["cupy"] = fake_cupy()
    recording.scalars = namespace["_lg_scalars"]
    return types.SimpleNamespace(**namespace), recording


ACTIVATIONS = [(), (5,), (1, 32, 224, 224), (32, 64, 56, 56), (8, 100), (1, 128, 28, 28), (3, 0, 4)]


def test_activation_forward_makes_the_same_cudnn_calls(trees: ChainerTrees, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = []
    for step in (BEFORE, STEP):
        cudnn, recording = cudnn_module(trees.patched, step, monkeypatch)
        Array.made = 0
        for _ in range(2):
            for shape in ACTIVATIONS:
                for dtype in ("f", "d", "e"):
                    try:
                        cudnn.activation_forward(Array(shape, dtype), recording.CUDNN_ACTIVATION_RELU)
                    except ValueError as exc:  # the empty batch: _as4darray's reshape refuses it in both
                        recording.calls.append(("error", str(exc)))
        runs.append(recording.described())
    assert runs[0] == runs[1]
    assert sum(call[0] == "activationForward_v4" for call in runs[1]) >= 2 * 3 * (len(ACTIVATIONS) - 1)


def pooling_module(tree: Path, step: str, cudnn: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """pooling_2d.py and chainer/utils/conv.py as they were right after `step`, with chainer.cuda a namespace of
    cuDNN on (cudnn: the module above; cupy: fake_cupy()) and Function a plain base class."""
    cuda = types.SimpleNamespace(cudnn_enabled=True, cudnn=cudnn, cupy=fake_cupy(), ndarray=Array)
    chainer = types.ModuleType("chainer")
    chainer.cuda = cuda  # type: ignore[attr-defined]
    chainer.function = types.SimpleNamespace(Function=object)  # type: ignore[attr-defined]
    utils = types.ModuleType("chainer.utils")
    conv: dict[str, Any] = {"__name__": "chainer.utils.conv"}
    for name, module in {"chainer": chainer, "chainer.utils": utils}.items():
        monkeypatch.setitem(sys.modules, name, module)
    exec(compile(text_at(tree, step, "chainer/utils/conv.py"), "conv.py", "exec"), conv)
    utils.conv = types.SimpleNamespace(**conv)  # type: ignore[attr-defined]
    utils.type_check = types.SimpleNamespace()  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {"__name__": f"pooling_at_{step.split('/')[0]}"}
    exec(compile(text_at(tree, step, POOLING), POOLING, "exec"), namespace)
    return types.SimpleNamespace(**namespace)


POOLINGS = [  # (input shape, dtype, ksize, stride, pad, cover_all)
    ((1, 32, 224, 224), "f", 2, 2, 0, True), ((1, 128, 28, 28), "f", 4, 4, 0, False),
    ((8, 3, 8, 9), "d", 3, 2, 1, True), ((8, 3, 8, 9), "d", 3, 2, 1, False),
    ((2, 4, 5, 5), "e", (2, 3), 1, (1, 0), True),
    ((1, 32, 224, 224), "d", 2, 2, 0, True), ((2, 2, 2, 2), "f", 5, 1, 0, False),  # the last: an empty output
]


def pooling_calls(tree: Path, step: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """The cuDNN calls of Pooling2D.forward_gpu as of `step`, three rounds of POOLINGS, for a subclass whose
    create_pool_desc is registered as reading the window alone and one that reads more (`mode`)."""
    cudnn, recording = cudnn_module(tree, step, monkeypatch)
    pooling = pooling_module(tree, step, cudnn, monkeypatch)

    class Registered(pooling.Pooling2D):  # type: ignore[name-defined]  # a base read from a namespace
        def create_pool_desc(self) -> Any:
            return cudnn.create_pooling_descriptor((self.kh, self.kw), (self.sy, self.sx), (self.ph, self.pw), 0)

    class Unregistered(Registered):  # reads more than the window: must take the old way
        def create_pool_desc(self) -> Any:
            return cudnn.create_pooling_descriptor((self.kh, self.kw), (self.sy, self.sx), (self.ph, self.pw),
                                                   self.mode)

    plain: set[Any] = getattr(pooling, "_lg_plain_pool_descs", set())  # none before this step
    plain.add(Registered.create_pool_desc)
    Array.made = 0
    for round_ in range(3):
        for shape, dtype, ksize, stride, pad, cover_all in POOLINGS:
            for kind in (Registered, Unregistered):
                function = kind(ksize, stride, pad, cover_all)
                function.mode = round_ % 2  # the unregistered class's descriptor changes with it
                try:
                    (y,) = function.forward_gpu((Array(shape, dtype),))
                    recording.calls.append(("y", y.shape, y.dtype.char, function.y is y))
                except AssertionError as exc:
                    recording.calls.append(("error", str(exc)))
    return recording.described()


def test_pooling_forward_makes_the_same_cudnn_calls(trees: ChainerTrees, monkeypatch: pytest.MonkeyPatch) -> None:
    before, after = (pooling_calls(trees.patched, step, monkeypatch) for step in (BEFORE, STEP))
    assert before == after
    assert sum(call[0] == "poolingForward" for call in after) == 3 * 2 * (len(POOLINGS) - 1)
    assert ("error", "Height in the output should be positive.") in after


def test_convolution_still_refuses_mixed_inputs(trees: ChainerTrees) -> None:
    code = """
import numpy
from chainer import cuda
from chainer.functions.connection.convolution_2d import Convolution2DFunction
x, W = numpy.zeros((1, 3, 4, 4), 'f'), numpy.zeros((2, 3, 3, 3), 'f')
out = {}
for name, inputs in (('x gpu', (cuda.ndarray(), W)), ('W gpu', (x, cuda.ndarray())),
                     ('b gpu', (x, W, cuda.ndarray())), ('b cpu', (cuda.ndarray(), cuda.ndarray(), W[0, 0, 0]))):
    try:
        Convolution2DFunction().forward_gpu(inputs)
        out[name] = 'ran'
    except ValueError as exc:
        out[name] = str(exc).splitlines()[0]
print(json.dumps(out))
"""
    patched = run_chainer(trees, trees.patched, code)
    assert patched == run_chainer(trees, trees.without_step, code)
    assert set(patched.values()) == {"numpy and cupy must not be used together"}


ROUTES = """
from chainer.functions.pooling import max_pooling_2d as mp, pooling_2d
calls = []


def record(name):
    def call(self_or_x, *args):
        calls.append(name)
        return (numpy.zeros(1, 'f'), 'offsets') if name == 'fast' else (numpy.zeros(1, 'f'),)
    return call


mp._lg_forward = record('fast')
pooling_2d.Pooling2D.forward_gpu = record('cudnn')
mp.cuda.elementwise = lambda *a, **k: (lambda *b, **c: calls.append('own'))
mp.cuda.cupy = type('cupy', (), {'empty': staticmethod(lambda shape, dtype: numpy.empty(shape, dtype))})
pooling_2d._cudnn_version = 7000
class Array(numpy.ndarray):  # what Chainer's own kernel call reads of a CuPy array
    def reduced_view(self):
        return self


small, big = numpy.zeros((2, 3, 8, 8), 'f').view(Array), numpy.zeros((1, 1, 2048, 2048), 'f').view(Array)
routes = []
for cudnn_on in (True, False, True):
    mp.cuda.cudnn_enabled = cudnn_on
    for fast_on in (True, False, True):
        mp._lg_fast_max_pool = fast_on
        for args, x in ((dict(ksize=2), small), (dict(ksize=2), big), (dict(ksize=2, use_cudnn=False), small),
                        (dict(ksize=3, stride=2), small), (dict(ksize=2, cover_all=False), big)):
            del calls[:]
            mp.MaxPooling2D(**args).forward_gpu((x,))
            routes.append(calls[:])
print(json.dumps(routes))
"""


def test_max_pooling_takes_the_path_it_took_each_call_before(trees: ChainerTrees) -> None:
    """The route kept per problem follows every switch the old per-call tests read (cuDNN on/off, the fast kernels'
    flag, use_cudnn, the size bound), problem by problem, as the tree one step earlier decides."""
    patched = run_chainer(trees, trees.patched, ROUTES)
    assert patched == run_chainer(trees, trees.without_step, ROUTES)
    assert {route[0] for route in patched} == {"fast", "cudnn", "own"}
