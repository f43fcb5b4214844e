"""chainer-cudnn-host-cache on the real Chainer 1.24.0 sdist: it applies (strict) as one commit on cupy/cudnn.py and
five cuDNN call sites; and cupy/cudnn.py, run as it is in the patched tree with CuPy's cuDNN binding replaced by
a recording fake, makes each descriptor with exactly the calls the unpatched module makes (compared call for call),
once per shape/parameters and thread, keeps refusing non-contiguous arrays, stays bounded without freeing a
descriptor something still holds, and hands out alpha/beta scalars holding the right values.

On the GPU, bench/gpu/chainer_reduction_check.py (check_cudnn_host_cache) runs convolution, pooling, ReLU and
softmax through cuDNN with the cache against the CPU results, for shapes that come and go and from two threads.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import types
from pathlib import Path
from typing import Any

import numpy
import pytest
from helpers import git
from helpers.chainer_cpu import assert_gated_to_cudnn_builds_from_cuda_9
from helpers.reduction_template import applied_in_order, commit_of, text_at

pytestmark = [pytest.mark.integration]

STEP = "chainer-cudnn-host-cache/cudnn-host-cache"
BEFORE = "chainer-call-overhead/call-fast-paths"
CUDNN = "cupy/cudnn.py"
CALL_SITES = ["chainer/functions/activation/log_softmax.py", "chainer/functions/activation/softmax.py",
              "chainer/functions/connection/convolution_2d.py", "chainer/functions/connection/deconvolution_2d.py",
              "chainer/functions/pooling/pooling_2d.py"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "cudnn-host-cache", BEFORE, STEP)


def test_gated_like_the_other_cudnn_steps(lgpatch) -> None:
    assert_gated_to_cudnn_builds_from_cuda_9(lgpatch, STEP)


def test_one_commit_and_no_call_site_builds_its_scalars(tree: Path) -> None:
    changed = git(tree, "show", "--name-only", "--format=", commit_of(tree, STEP)).split()
    assert sorted(changed) == sorted([CUDNN, *CALL_SITES])
    for path in CALL_SITES:
        text = text_at(tree, STEP, path)
        assert "numpy.array(1, dtype=oz_dtype).ctypes" not in text, path
        assert text.count("cudnn._lg_scalar(1, oz_dtype)") == text.count("cudnn._lg_scalar(0, oz_dtype)") >= 2, path


class Binding:
    """cupy.cuda.cudnn as cupy/cudnn.py sees it: descriptors are ints; every create/set/destroy is recorded."""

    CUDNN_TENSOR_NCHW, CUDNN_TENSOR_NHWC = 0, 1
    CUDNN_DATA_FLOAT, CUDNN_DATA_DOUBLE, CUDNN_DATA_HALF = 0, 1, 2
    CUDNN_CROSS_CORRELATION, CUDNN_CONVOLUTION = 1, 0
    CUDNN_NOT_PROPAGATE_NAN = 0
    CUDNN_ACTIVATION_RELU = 1

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.live: set[int] = set()
        self._next = 100

    def getVersion(self) -> int:
        return 9_000

    def __getattr__(self, name: str) -> Any:
        if name.startswith("create") and name.endswith("Descriptor"):
            return self._create
        if name.startswith("destroy") and name.endswith("Descriptor"):
            return self._destroy
        if name.startswith("set"):
            return lambda desc, *args: self.calls.append((name, desc, *args))
        raise AttributeError(name)

    def _create(self) -> int:
        self._next += 1
        self.live.add(self._next)
        return self._next

    def _destroy(self, desc: int) -> None:
        self.live.remove(desc)

    def sets(self) -> list[tuple]:
        """The set* calls with the descriptor handle left out: what the descriptors were made to hold."""
        return [(call[0], *call[2:]) for call in self.calls]


class Array:
    """The cupy.ndarray attributes cupy/cudnn.py reads."""

    def __init__(self, shape: tuple[int, ...], dtype: str = "f", contiguous: bool = True,
                 strides: tuple[int, ...] | None = None) -> None:
        self.shape, self.dtype = shape, numpy.dtype(dtype)
        self.ndim, self.itemsize = len(shape), self.dtype.itemsize
        self.strides = strides or numpy.empty(shape, dtype).strides
        self.flags = types.SimpleNamespace(c_contiguous=contiguous)


def load(tree: Path, step: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Binding]:
    """cupy/cudnn.py as it was right after `step`, executed with the fake binding as cupy.cuda.cudnn."""
    binding = Binding()
    cupy = types.ModuleType("cupy")
    cuda = types.ModuleType("cupy.cuda")
    cuda.cudnn = binding  # type: ignore[attr-defined]
    cuda.get_device_id = lambda: 0  # type: ignore[attr-defined]
    core = types.ModuleType("cupy.core")
    core.internal = types.ModuleType("cupy.core.internal")  # type: ignore[attr-defined]
    cupy.cuda, cupy.core = cuda, core  # type: ignore[attr-defined]
    six = types.ModuleType("six")
    six.itervalues = lambda d: iter(d.values())  # type: ignore[attr-defined]
    for name, module in {"cupy": cupy, "cupy.cuda": cuda, "cupy.core": core, "six": six,
                         "cupy.core.internal": core.internal, "cupy.cuda.cudnn": binding}.items():  # type: ignore
        monkeypatch.setitem(sys.modules, name, module)
    namespace: dict[str, Any] = {"__name__": f"cudnn_at_{step.split('/')[0]}"}
    exec(compile(text_at(tree, step, CUDNN), CUDNN, "exec"), namespace)
    return namespace, binding


INPUTS: list[tuple[str, tuple]] = [
    ("create_tensor_descriptor", (Array((1, 32, 112, 112)),)),
    ("create_tensor_descriptor", (Array((32, 64, 56, 56), "d"),)),
    ("create_tensor_descriptor", (Array((1, 64, 1, 1), "e"),)),
    ("create_filter_descriptor", (Array((64, 32, 3, 3)),)),
    ("create_convolution_descriptor", ((1, 1), (1, 1), numpy.dtype("f"))),
    ("create_convolution_descriptor", ((3, 3), (2, 2), numpy.dtype("e"))),
    ("create_pooling_descriptor", ((2, 2), (2, 2), (0, 0), 0)),
    ("create_pooling_descriptor", ((3, 3), (1, 1), (1, 1), 1)),
]


def test_each_descriptor_is_set_as_before_and_made_once(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old, old_binding = load(tree, BEFORE, monkeypatch)
    new, new_binding = load(tree, STEP, monkeypatch)
    for function, args in INPUTS:
        kept_old = [old[function](*args) for _ in range(3)]
        kept_new = [new[function](*args) for _ in range(3)]
        # The old module made (and set) one per call; the patched one sets the same values, once.
        assert old_binding.sets()[-3:] == [old_binding.sets()[-1]] * 3, function
        assert new_binding.sets()[-1] == old_binding.sets()[-1], (function, args)
        assert len({d.value for d in kept_old}) == 3 and len({d.value for d in kept_new}) == 1, function
    assert len(new_binding.sets()) == len(INPUTS) == len(old_binding.sets()) // 3


def test_shape_dtype_format_and_parameters_are_all_part_of_the_key(tree: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    new, binding = load(tree, STEP, monkeypatch)
    tensor = new["create_tensor_descriptor"]
    seen = {tensor(Array((1, 3, 4, 4))).value, tensor(Array((1, 3, 4, 5))).value,
            tensor(Array((1, 3, 4, 4), "d")).value, tensor(Array((1, 3, 4, 4)), Binding.CUDNN_TENSOR_NHWC).value}
    assert len(seen) == 4
    conv = new["create_convolution_descriptor"]
    f = numpy.dtype("f")
    assert len({conv((1, 1), (1, 1), f).value, conv((1, 1), (2, 2), f).value, conv((0, 1), (1, 1), f).value,
                conv((1, 1), (1, 1), f, Binding.CUDNN_CONVOLUTION).value}) == 4
    pool = new["create_pooling_descriptor"]
    assert len({pool((2, 2), (2, 2), (0, 0), 0).value, pool((2, 2), (2, 2), (0, 0), 1).value,
                pool((2, 2), (1, 1), (0, 0), 0).value, pool([2, 2], [2, 2], [0, 0], 0).value}) == 3  # lists = tuples
    assert len(binding.calls) == 4 + 4 + 3


def test_nd_tensors_with_other_strides_get_their_own_descriptor(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new, binding = load(tree, STEP, monkeypatch)
    a = new["create_tensor_descriptor"](Array((2, 3, 1)))
    b = new["create_tensor_descriptor"](Array((2, 3, 1), strides=(12, 4, 64)))  # C-contiguous, odd stride of a 1
    assert a.value != b.value and [c[0] for c in binding.calls] == ["setTensorNdDescriptor"] * 2


def test_non_contiguous_arrays_are_refused_on_every_call(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new, _ = load(tree, STEP, monkeypatch)
    new["create_tensor_descriptor"](Array((1, 3, 4, 4)))
    for _ in range(2):
        with pytest.raises(ValueError, match="c-contiguous arrays only"):
            new["create_tensor_descriptor"](Array((1, 3, 4, 4), contiguous=False))


def test_bounded_and_a_held_descriptor_outlives_the_table(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new, binding = load(tree, STEP, monkeypatch)
    limit = new["_LG_DESCRIPTOR_LIMIT"]
    held = new["create_tensor_descriptor"](Array((1, 1, 1, 1)))
    for n in range(2, limit + 50):
        new["create_tensor_descriptor"](Array((1, 1, 1, n)))
    assert len(new["_lg_descriptor_cache"]()) <= limit
    assert held.value in binding.live  # still held here: not freed when the table let go of it
    assert len(binding.live) <= limit + 1  # the rest were freed with the table
    value = held.value
    del held
    assert value not in binding.live


def test_each_thread_has_its_own_descriptors(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new, _ = load(tree, STEP, monkeypatch)
    here = new["create_filter_descriptor"](Array((8, 3, 3, 3))).value
    there: list[int] = []
    thread = threading.Thread(target=lambda: there.append(new["create_filter_descriptor"](Array((8, 3, 3, 3))).value))
    thread.start()
    thread.join()
    assert there and there[0] != here
    assert new["create_filter_descriptor"](Array((8, 3, 3, 3))).value == here


def test_activation_descriptor_is_made_once_per_mode(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new, binding = load(tree, STEP, monkeypatch)
    first = new["_lg_activation_descriptor"](Binding.CUDNN_ACTIVATION_RELU)
    assert new["_lg_activation_descriptor"](Binding.CUDNN_ACTIVATION_RELU) is first
    assert new["_lg_activation_descriptor"](2) is not first
    assert [c for c in binding.calls if c[0] == "setActivationDescriptor"] == [
        ("setActivationDescriptor", first.value, 1, 0, 0.0),
        ("setActivationDescriptor", first.value + 1, 2, 0, 0.0)]


@pytest.mark.parametrize(("dtype", "ctype"), [("f", ctypes.c_float), ("d", ctypes.c_double)])
def test_scalars_hold_their_value_and_are_made_once(tree: Path, monkeypatch: pytest.MonkeyPatch, dtype: str,
                                                    ctype: Any) -> None:
    new, _ = load(tree, STEP, monkeypatch)
    one, zero = new["_lg_scalar"](1, dtype), new["_lg_scalar"](0, dtype)
    assert ctype.from_address(one.data).value == 1.0 and ctype.from_address(zero.data).value == 0.0
    assert new["_lg_scalar"](1, dtype) is one and new["_lg_scalar"](0, dtype) is zero
