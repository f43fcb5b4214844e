"""chainer-host-inline on the real Chainer 1.24.0 sdist: one commit on six files, right after chainer-layer-lean and
gated like it; each frame it answers in place answers as the call did.

- Function.__call__'s flag aggregation (the real tree on the CPU): the output's volatile flag, or the error, for
  every mix of ON / OFF / AUTO inputs, Variables, a Variable subclass and plain arrays, as without the step.
- Pooling2D's and Convolution2DFunction's pairs (the real tree): ints, tuples, lists, NumPy ints and bools.
- Convolution2DFunction.forward_gpu (the real tree, CuPy replaced by a fake array type): the output's shape or the
  assertion for a grid of sizes, windows, strides, pads and cover_all, and which inputs are handed to
  ascontiguousarray (contiguous or not, a subclass).
- ReLU.forward_gpu: the path (cuDNN or CuPy) for contiguous, non-contiguous and subclass inputs; LinearFunction's
  same-types test: every mix of CuPy and NumPy inputs refused or passed as before, same_types skipped only for
  inputs all CuPy arrays.
- cupy/cudnn.py and Pooling2D.forward_gpu as the tree has them, on test_chainer_layer_lean's recording fake of
  CuPy's cuDNN binding: the same cuDNN calls and arguments, the same arrays made, and the same arrays handed to
  ascontiguousarray as after chainer-layer-lean, contiguous or not.

On the GPU, bench/gpu/chainer_proof.py, chainer_pool_check.py and chainer_reduction_check.py run on a wheel of the
recipe (docs/gpu-proofs.md, session 21).
"""

from __future__ import annotations

import types
from typing import Any

import pytest
import test_chainer_layer_lean as layer_lean
from helpers import Runner, git
from helpers.chainer_cpu import ChainerTrees, assert_gated_to_cudnn_builds_from, chainer_trees, run_chainer
from helpers.reduction_template import commit_of

pytestmark = [pytest.mark.integration]

STEP = "chainer-host-inline/host-inline"
BEFORE = layer_lean.STEP
FILES = ["chainer/function.py", "chainer/functions/activation/relu.py",
         "chainer/functions/connection/convolution_2d.py", "chainer/functions/connection/linear.py",
         "chainer/functions/pooling/pooling_2d.py", "cupy/cudnn.py"]


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> ChainerTrees:
    return chainer_trees(tmp_path_factory.mktemp("chainer-host-inline"), STEP)


def test_gated_like_layer_lean(lgpatch: Runner) -> None:
    steps = assert_gated_to_cudnn_builds_from(lgpatch, STEP, "11.0", "10.2")
    assert steps[BEFORE] is True


def test_one_commit_on_its_six_files_right_after_layer_lean(trees: ChainerTrees) -> None:
    assert trees.applied.index(STEP) == trees.applied.index(BEFORE) + 1
    changed = git(trees.patched, "show", "--name-only", "--format=", commit_of(trees.patched, STEP)).split()
    assert sorted(changed) == FILES


FLAGS = """
import itertools
from chainer import flag


class Pass(chainer.Function):
    def forward_cpu(self, inputs):
        return inputs[0].copy(),


class Odd(chainer.Variable):  # a subclass: its flag is read through the property
    @property
    def volatile(self):
        return self._volatile


x = numpy.zeros(2, 'f')
kinds = [('array', lambda: x)]
for f in ('on', 'off', 'auto'):
    kinds.append(('Variable ' + f, lambda f=f: chainer.Variable(x, volatile=f)))
    kinds.append(('Odd ' + f, lambda f=f: Odd(x, volatile=f)))
out = {}
for n in (1, 2, 3):
    for combo in itertools.product(kinds, repeat=n):
        key = ', '.join(name for name, _ in combo)
        try:
            y = Pass()(*[make() for _, make in combo])
            out[key] = 'volatile %s, creator %s' % (y.volatile, type(y.creator).__name__)
        except ValueError as exc:
            out[key] = 'ValueError: %s' % exc
print(json.dumps(out))
"""


def test_function_call_aggregates_flags_as_aggregate_flags_did(trees: ChainerTrees) -> None:
    patched = run_chainer(trees, trees.patched, FLAGS)
    assert patched == run_chainer(trees, trees.without_step, FLAGS)
    assert patched["Variable on, Odd off"] == "ValueError: ON and OFF flags cannot be mixed."
    assert patched["array, Odd on"] == "volatile ON, creator NoneType"
    assert patched["array, Variable off"] == "volatile OFF, creator Pass"
    assert patched["array"] == patched["Variable auto, array"] == "volatile AUTO, creator Pass"


PAIRS = """
from chainer.functions.connection.convolution_2d import Convolution2DFunction
from chainer.functions.pooling.average_pooling_2d import AveragePooling2D
from chainer.functions.pooling.max_pooling_2d import MaxPooling2D


def described(make, names):
    try:
        f = make()
    except TypeError as exc:  # Convolution2DFunction's _pair keeps a NumPy int (it has __getitem__): both trees
        return 'TypeError: %s' % exc
    return [[repr(getattr(f, n)), type(getattr(f, n)).__name__] for n in names]


values = [2, (2, 3), [1, 2], numpy.int64(3), True, 0]
out = []
for v in values:
    for w in values:
        for cls in (MaxPooling2D, AveragePooling2D):
            out.append(described(lambda: cls(v, w, w), ('kh', 'kw', 'sy', 'sx', 'ph', 'pw')))
            out.append(described(lambda: cls(v), ('sy', 'sx')))
        out.append(described(lambda: Convolution2DFunction(v, w), ('sy', 'sx', 'ph', 'pw')))
print(json.dumps(out))
"""


def test_pooling_and_convolution_pairs_as_before(trees: ChainerTrees) -> None:
    patched = run_chainer(trees, trees.patched, PAIRS)
    assert patched == run_chainer(trees, trees.without_step, PAIRS)
    assert patched[0] == [["2", "int"]] * 6  # MaxPooling2D(2, 2, 2): the pairs made in place
    assert any(isinstance(row, str) and row.startswith("TypeError") for row in patched)  # a NumPy int, both trees


# What forward_gpu reads of CuPy, replaced: a fake array type (cuda.ndarray), its outputs recorded, and a stop at
# the first call past the code the step changed (im2col without cuDNN, get_handle with it).
FAKE_CUPY = """
import types
from chainer.functions.connection import convolution_2d as c2d


class Stop(Exception):
    pass


class Fake(object):
    def __init__(self, shape, dtype='f', contiguous=True, label='new'):
        self.shape, self.dtype, self.ndim = tuple(shape), numpy.dtype(dtype), len(shape)
        self._c_contiguous, self.label = contiguous, label
        self.flags = types.SimpleNamespace(c_contiguous=contiguous)


class Sub(Fake):  # not exactly cuda.ndarray: ascontiguousarray is asked for it
    pass


events = []


def stop(*args, **kwargs):
    raise Stop()


def contiguous(a):  # CuPy's: a itself when C-contiguous (a subclass's instance too), else a copy
    events.append(['ascontiguousarray', a.label, type(a).__name__, a._c_contiguous])
    return a if a._c_contiguous else Fake(a.shape, a.dtype, True, 'copy of ' + a.label)


cupy = types.SimpleNamespace(empty=lambda shape, dtype: Fake(shape, dtype, True, 'empty'),
                             ascontiguousarray=contiguous, maximum=lambda x, v: 'cupy', ndarray=Fake)
# chainer.cuda as with CuPy: type_check.same_types asks cuda.cupy.ndarray once cuda.available
chainer.cuda.available, chainer.cuda.cupy, chainer.cuda.ndarray = True, cupy, Fake
"""

CONVOLUTION = FAKE_CUPY + """
c2d.cuda = types.SimpleNamespace(ndarray=Fake, cupy=cupy, cudnn_enabled=False)
c2d.conv.im2col_gpu = stop
c2d.cudnn = types.SimpleNamespace(get_handle=stop)


def run(f, inputs):
    del events[:]
    try:
        f.forward_gpu(inputs)
    except Stop:
        pass
    except (AssertionError, ValueError) as exc:  # a subclass fails same_types (type_check's own cuda.ndarray)
        events.append('%s: %s' % (type(exc).__name__, str(exc).splitlines()[0]))
    return events[:]


out = []
for h in (1, 2, 5, 8, 17):
    for k in (1, 2, 3, 5):
        for s in (1, 2, 3):
            for p in (0, 1, 2):
                for cover_all in (False, True):
                    f = c2d.Convolution2DFunction(s, p, cover_all=cover_all)
                    original = Fake.__init__

                    def made(self, shape, dtype='f', contiguous=True, label='new'):
                        events.append('made %s %s' % (list(shape), numpy.dtype(dtype).char))
                        original(self, shape, dtype, contiguous, label)
                    x, W = Fake((2, 3, h, h + 1), 'f', True, 'x'), Fake((4, 3, k, k), 'f', True, 'W')
                    Fake.__init__ = made
                    out.append([h, k, s, p, cover_all, run(f, (x, W))])
                    Fake.__init__ = original
c2d.cuda.cudnn_enabled = True
c2d._cudnn_version = 9000  # set where CuPy has cuDNN
for flags in ((True, True, True), (False, True, True), (True, False, False), (False, False, False)):
    for kind in (Fake, Sub):
        x, W = kind((1, 3, 8, 8), 'f', flags[0], 'x'), kind((4, 3, 3, 3), 'f', flags[1], 'W')
        b = kind((4,), 'f', flags[2], 'b')
        out.append([kind.__name__, flags, run(c2d.Convolution2DFunction(1, 1), (x, W, b)),
                    run(c2d.Convolution2DFunction(1, 1), (x, W))])
print(json.dumps(out))
"""


def handed_only_what_needs_it(before: list, after: list) -> None:
    """ascontiguousarray was handed every input before the step; after it, only those it does not return as they
    are (not C-contiguous) or that are not exactly the CuPy array type, in the same order."""
    assert after == [event for event in before if event[2] != "Fake" or not event[3]]


def test_convolution_output_and_contiguity_as_before(trees: ChainerTrees) -> None:
    patched = run_chainer(trees, trees.patched, CONVOLUTION)
    before = run_chainer(trees, trees.without_step, CONVOLUTION)
    assert patched[:-8] == before[:-8]  # output shapes and assertions
    outcomes = [row[-1] for row in patched[:-8]]
    assert ["AssertionError: Height in the output should be positive."] in outcomes
    assert any(o and o[0].startswith("made [2, 4, ") for o in outcomes)
    for row_before, row_after in zip(before[-8:], patched[-8:]):
        for run_before, run_after in zip(row_before[2:], row_after[2:]):
            handed_only_what_needs_it(run_before, run_after)
    handed = [event[1:] for row in patched[-8:] for run in row[2:] for event in run]
    assert ["x", "Fake", False] in handed and ["b", "Fake", False] in handed and ["W", "Sub", True] in handed


RELU_AND_LINEAR = FAKE_CUPY + """
from chainer import cuda
from chainer.functions.activation import relu
from chainer.functions.connection import linear
from chainer.utils import type_check

relu.cudnn = types.SimpleNamespace(activation_forward=lambda x, mode: 'cudnn')
relu._cudnn_version, relu._mode = 9000, 1  # set where CuPy has cuDNN
relu_paths = []
for enabled in (True, False):
    relu.cuda.cudnn_enabled = enabled
    for use_cudnn in (True, False):
        for x in (Fake((2, 3)), Fake((2, 3), 'f', False), Sub((2, 3)), Sub((2, 3), 'f', False), Fake((4,), 'e')):
            relu_paths.append(relu.ReLU(use_cudnn).forward_gpu((x,))[0])

same_types = type_check.same_types
asked = []


def counting(*args):
    asked.append(len(args))
    return same_types(*args)


type_check.same_types = counting
linear._lg_linear_gpu = lambda x, W, b: 'y'
gpu, cpu = Fake((2, 3)), numpy.zeros((2, 3), 'f')
linear_outcomes = []
for inputs in ((gpu, gpu), (gpu, gpu, gpu), (cpu, gpu), (gpu, cpu), (gpu, gpu, cpu), (cpu, cpu, gpu),
               (Sub((2, 3)), gpu), (gpu, Sub((4, 3)), gpu)):
    try:
        linear_outcomes.append(linear.LinearFunction().forward(inputs)[0])
    except ValueError as exc:
        linear_outcomes.append(str(exc).splitlines()[0])
print(json.dumps({'relu': relu_paths, 'linear': linear_outcomes, 'asked': len(asked)}))
"""


def test_relu_path_and_linear_same_types_as_before(trees: ChainerTrees) -> None:
    patched = run_chainer(trees, trees.patched, RELU_AND_LINEAR)
    before = run_chainer(trees, trees.without_step, RELU_AND_LINEAR)
    assert (patched["relu"], patched["linear"]) == (before["relu"], before["linear"])
    assert set(patched["relu"]) == {"cudnn", "cupy"}
    assert patched["linear"][:2] == ["y", "y"]
    assert "numpy and cupy must not be used together" in patched["linear"]
    # same_types is asked for every input mix before the step, and for all but the two all-CuPy ones after it.
    assert (before["asked"], patched["asked"]) == (8, 6)


class Copies:
    """cupy.ascontiguousarray for the fake arrays: records which array it was handed; returns it unchanged when
    C-contiguous (as CuPy does, a subclass's instance too), else a C-contiguous copy at a new address."""

    def __init__(self) -> None:
        self.handed: list[tuple] = []

    def __call__(self, x: Any) -> Any:
        self.handed.append(("ascontiguousarray", x.shape, x.dtype.char, x.flags.c_contiguous, type(x).__name__))
        return x if x.flags.c_contiguous else layer_lean.Array(x.shape, x.dtype)


class Strided(layer_lean.Array):  # not exactly cupy.ndarray
    pass


def arrays(shape: tuple[int, ...], dtype: str) -> list[Any]:
    """A C-contiguous array, one that is not, and a subclass instance (each at its own address)."""
    strided = layer_lean.Array(shape, dtype)
    strided.flags = types.SimpleNamespace(c_contiguous=False)
    return [layer_lean.Array(shape, dtype), strided, Strided(shape, dtype)]


def activation_calls(tree: Any, step: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list]:
    cudnn, recording = layer_lean.cudnn_module(tree, step, monkeypatch)
    copies = Copies()
    cudnn.activation_forward.__globals__["cupy"].ascontiguousarray = copies
    layer_lean.Array.made = 0
    for shape in layer_lean.ACTIVATIONS[:-1]:  # the empty batch is layer-lean's test's
        for dtype in ("f", "d"):
            for x in arrays(shape, dtype):
                y = cudnn.activation_forward(x, recording.CUDNN_ACTIVATION_RELU)
                recording.calls.append(("y", y.shape, y.dtype.char, type(y).__name__))
            strided = arrays(shape, dtype)[1]
            try:
                cudnn.create_tensor_descriptor(strided)
            except ValueError as exc:
                recording.calls.append(("error", str(exc)))
    return recording.described(), copies.handed


def only_those_that_need_it(before: list[tuple], after: list[tuple]) -> None:
    """ascontiguousarray was handed every array before the step; after it, only those it does not return as they
    are (not C-contiguous) or that are not exactly CuPy's array type, in the same order."""
    assert after == [call for call in before if not call[3] or call[4] != "Array"]
    assert {(call[3], call[4]) for call in after} == {(False, "Array"), (True, "Strided")}


def test_activation_and_descriptors_make_the_same_calls(trees: ChainerTrees, monkeypatch: pytest.MonkeyPatch) -> None:
    (before, handed_before), (after, handed_after) = (activation_calls(trees.patched, step, monkeypatch)
                                                      for step in (BEFORE, STEP))
    assert before == after
    assert ("error", "cupy.cudnn supports c-contiguous arrays only") in after
    only_those_that_need_it(handed_before, handed_after)
    assert len(handed_after) == 2 * 2 * (len(layer_lean.ACTIVATIONS) - 1)


def pooling_calls(tree: Any, step: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list]:
    cudnn, recording = layer_lean.cudnn_module(tree, step, monkeypatch)
    pooling = layer_lean.pooling_module(tree, step, cudnn, monkeypatch)
    copies = Copies()
    pooling.cuda.cupy.ascontiguousarray = copies
    plain: set[Any] = pooling._lg_plain_pool_descs

    class Registered(pooling.Pooling2D):  # type: ignore[name-defined]  # a base read from a namespace
        def create_pool_desc(self) -> Any:
            return cudnn.create_pooling_descriptor((self.kh, self.kw), (self.sy, self.sx), (self.ph, self.pw), 0)

    plain.add(Registered.create_pool_desc)
    layer_lean.Array.made = 0
    for _ in range(2):
        for shape, dtype, ksize, stride, pad, cover_all in layer_lean.POOLINGS[:-1]:
            for x in arrays(shape, dtype):
                function = Registered(ksize, stride, pad, cover_all)
                (y,) = function.forward_gpu((x,))
                recording.calls.append(("y", y.shape, y.dtype.char, type(y).__name__, function.y is y))
    return recording.described(), copies.handed


def test_pooling_forward_makes_the_same_calls(trees: ChainerTrees, monkeypatch: pytest.MonkeyPatch) -> None:
    (before, handed_before), (after, handed_after) = (pooling_calls(trees.patched, step, monkeypatch)
                                                      for step in (BEFORE, STEP))
    assert before == after
    assert sum(call[0] == "poolingForward" for call in after) == 2 * 3 * (len(layer_lean.POOLINGS) - 1)
    only_those_that_need_it(handed_before, handed_after)
    assert len(handed_after) == 2 * 2 * (len(layer_lean.POOLINGS) - 1)  # the strided array and the subclass
