"""chainer-cudnn-graph-conv on the real Chainer 1.24.0 sdist: it applies (strict) as one commit adding
chainer/_cudnn_graph.py and changing convolution_2d.py's cuDNN forward; and the module, run as it is in the patched
tree against a fake libcudnn that plays the backend API (descriptors, attributes, finalize, heuristics, execute),
builds one plan per problem with the legacy call's convolution (cross-correlation, pads, strides, no dilation,
alpha 1 / beta 0, the compute type of CuPy 1.24's descriptor), keeps a variant pack per set of pointers, takes the
heuristics' first engine configuration that finalizes within the workspace limit, and answers False (the legacy
call runs) wherever it does not apply; bounded, per thread, and off with CHAINER_CUDNN_GRAPH=0.

graph-conv-lean (the step after it): convolution_2d.py's forward_gpu and backward_gpu, run against recording fakes
of cupy.cudnn, libcudnn and the graph module, make the legacy descriptors (input, filter, convolution, bias) only
where the legacy call runs, and backward_gpu makes the filter, convolution and bias descriptors when the forward
took the graph (and not again when it did not); the bias descriptor is cupy.cudnn._lg_nchw_descriptor((1, C, 1, 1),
dtype), which is create_tensor_descriptor's own cache entry for b[None, :, None, None].

On the GPU, bench/gpu/chainer_graph_conv_check.py compares the graph path's outputs with the legacy call's and with
the im2col path for many shapes, strides, pads and dtypes, forward and backward.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import types
from pathlib import Path
from typing import Any

import numpy
import pytest
from helpers import git
from helpers.reduction_template import applied_in_order, commit_of, text_at

pytestmark = [pytest.mark.integration]

STEP = "chainer-cudnn-graph-conv/graph-conv"
AFTER = "chainer-cudnn-host-cache/cudnn-host-cache"  # the forward's call site as this step finds it
MODULE = "chainer/_cudnn_graph.py"
CONV = "chainer/functions/connection/convolution_2d.py"
TENSOR, CONV_DESC, CONV_FWD, PLAN, PACK, CFG, ENGINE = 17, 1, 10, 5, 16, 3, 2
DOWN_CONVERT, TENSOR_CORE = 1, 0  # cuDNN's numerical notes
NOT_SUPPORTED = 3000


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "cudnn-graph-conv", AFTER, STEP)


def test_gated_to_cudnn_builds_from_cuda_11(lgpatch) -> None:
    for cuda, cudnn, selected in (("13.0", "true", True), ("11.0", "true", True), ("13.0", "false", False),
                                  ("10.2", "true", False), ("8.0", "true", False)):
        r = lgpatch("show", "chainer-1.24", "--cuda", cuda, "--python", "3.12", "--param", f"cudnn={cudnn}",
                    "--json")
        assert r.code == 0, r.err
        steps = {s["step"]: s["selected"] for s in json.loads(r.out)["steps"]}
        assert steps[STEP] is selected, (cuda, cudnn)


def test_one_commit_and_the_legacy_call_stays_the_fallback(tree: Path) -> None:
    changed = git(tree, "show", "--name-only", "--format=", commit_of(tree, STEP)).split()
    assert sorted(changed) == [MODULE, CONV]
    forward = text_at(tree, STEP, CONV).split("def forward_gpu", 1)[1].split("def backward", 1)[0]
    graph = forward.index("if not _cudnn_graph.forward(")
    assert graph < forward.index("libcudnn.convolutionForward(") < forward.index("cudnn.add_tensor(")
    assert "_lg_workspace_limit()):" in forward  # the limit the legacy call's algorithm choice works within
    # the legacy call and its workspace are made only where the graph path declined
    legacy = forward[graph:].split("if b is not None:", 1)[0]
    assert "_lg_algorithm_and_workspace(" in legacy and legacy.count("libcudnn.convolutionForward(") == 1


def value(desc: Any) -> int:
    return desc.value if isinstance(desc, ctypes.c_void_p) else desc


class FakeCudnn:
    """libcudnn's backend API as the module calls it: descriptors are ints; each config is (finalizes, workspace) or
    (finalizes, workspace, its engine's numerical notes)."""

    def __init__(self, configs: list[tuple] | None = None) -> None:
        self.configs = configs if configs is not None else [(True, 0)]
        self.engine_of: dict[int, int] = {}  # engine descriptor -> config index
        self.kind: dict[int, int] = {}
        self.attrs: dict[int, dict[int, tuple[int, list[Any]]]] = {}
        self.live: set[int] = set()
        self.cfg_index: dict[int, int] = {}
        self.executed: list[tuple[int, int, int]] = []
        self.execute_status = 0
        self._next = 1000

    def cudnnBackendCreateDescriptor(self, kind: int, ref: Any) -> int:
        self._next += 1
        ref._obj.value = self._next
        self.kind[self._next], self.attrs[self._next] = kind, {}
        self.live.add(self._next)
        return 0

    def cudnnBackendSetAttribute(self, desc: Any, name: int, kind: int, count: int, array: Any) -> int:
        self.attrs[value(desc)][name] = (kind, [array[i] for i in range(count)])
        return 0

    def cudnnBackendFinalize(self, desc: Any) -> int:
        d = value(desc)
        if self.kind[d] == PLAN and not self.configs[self.cfg_index[self.attrs[d][401][1][0]]][0]:
            return NOT_SUPPORTED
        return 0

    def cudnnBackendGetAttribute(self, desc: Any, name: int, kind: int, requested: int, count: Any,
                                 array: Any) -> int:
        if name == 202:  # the heuristics' results: engine configs, best first
            count._obj.value = min(requested, len(self.configs)) if requested else len(self.configs)
            for i in range(count._obj.value if array is not None else 0):
                self.cfg_index[array[i]] = i
            return 0
        if name == 300:  # the config's engine, into a descriptor the caller made
            assert self.kind[value(array._obj)] == ENGINE and requested == 1
            self.engine_of[value(array._obj)] = self.cfg_index[value(desc)]
            count._obj.value = 1
            return 0
        if name == 1303:  # the engine's numerical notes
            config = self.configs[self.engine_of[value(desc)]]
            notes = config[2] if len(config) > 2 else [TENSOR_CORE]
            for i, note in enumerate(notes[:requested]):
                array[i] = note
            count._obj.value = len(notes)
            return 0
        assert name == 402 and self.kind[value(desc)] == PLAN  # a plan's workspace size
        count._obj.value = 1
        array._obj.value = self.configs[self.cfg_index[self.attrs[value(desc)][401][1][0]]][1]
        return 0

    def cudnnBackendExecute(self, handle: int, plan: Any, pack: Any) -> int:
        self.executed.append((handle, value(plan), value(pack)))
        return self.execute_status

    def cudnnBackendDestroyDescriptor(self, desc: Any) -> int:
        self.live.remove(value(desc))
        return 0

    def of_kind(self, kind: int) -> list[int]:
        return [d for d, k in self.kind.items() if k == kind]


class CudaRuntimeError(RuntimeError):
    pass


class FakeCupy:
    """cupy as forward() uses it: empty() hands out distinct addresses; the runtime's synchronize is recorded."""

    def __init__(self) -> None:
        self.synchronized = 0
        self.fail_alloc = False
        self._ptr = 1 << 20
        self.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(
            CUDARuntimeError=CudaRuntimeError, deviceSynchronize=self._synchronize))

    def _synchronize(self) -> None:
        self.synchronized += 1

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        if self.fail_alloc:
            raise CudaRuntimeError("out of memory")
        self._ptr += 1 << 20
        return types.SimpleNamespace(data=types.SimpleNamespace(ptr=self._ptr))


def array(shape: tuple[int, ...], ptr: int, dtype: str = "f") -> Any:
    return types.SimpleNamespace(shape=shape, ndim=len(shape), dtype=numpy.dtype(dtype),
                                 data=types.SimpleNamespace(ptr=ptr))


def load(tree: Path, lib: FakeCudnn | None, monkeypatch: pytest.MonkeyPatch, env: str | None = None) -> dict:
    """chainer/_cudnn_graph.py as the step left it, with `lib` as the libcudnn it found."""
    if env is None:
        monkeypatch.delenv("CHAINER_CUDNN_GRAPH", raising=False)
    else:
        monkeypatch.setenv("CHAINER_CUDNN_GRAPH", env)
    namespace: dict[str, Any] = {"__name__": "cudnn_graph_under_test"}
    exec(compile(text_at(tree, STEP, MODULE), MODULE, "exec"), namespace)
    if lib is not None:
        namespace["_library"] = lib
    return namespace


PROBLEM = ((1, 32, 112, 112), (64, 32, 3, 3), (1, 64, 112, 112))


def conv(ns: dict, cupy: FakeCupy, ptrs: tuple[int, int, int] = (0x10000, 0x20000, 0x30000), dtype: str = "f",
         shapes: tuple[tuple[int, ...], ...] = PROBLEM, stride: tuple[int, int] = (1, 1),
         pad: tuple[int, int] = (1, 1), limit: int = 512 << 20, handle: int = 77) -> bool:
    x, w, y = (array(s, p, dtype) for s, p in zip(shapes, ptrs))
    return ns["forward"](cupy, 91900, handle, x, w, y, stride, pad, limit)


def strides(shape: tuple[int, ...]) -> list[int]:
    return [s // 4 for s in numpy.empty(shape, "f").strides]


def test_one_plan_per_problem_and_a_pack_per_set_of_pointers(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib, cupy = FakeCudnn(), FakeCupy()
    ns = load(tree, lib, monkeypatch)
    assert conv(ns, cupy) and conv(ns, cupy)
    assert len(lib.of_kind(PLAN)) == 1 and len(lib.of_kind(PACK)) == 1  # the second call made nothing
    assert lib.executed[0] == lib.executed[1] and lib.executed[0][0] == 77
    assert conv(ns, cupy, ptrs=(0x40000, 0x20000, 0x30000))  # another input buffer: a new pack, the same plan
    assert len(lib.of_kind(PLAN)) == 1 and len(lib.of_kind(PACK)) == 2
    assert lib.executed[2][1] == lib.executed[0][1] and lib.executed[2][2] != lib.executed[0][2]
    pack = lib.attrs[lib.executed[2][2]]
    assert pack[1000][1] == [1, 2, 3] and pack[1001][1] == [0x40000, 0x20000, 0x30000]
    assert pack[1003][1] == [None]  # no workspace asked: a NULL pointer
    for other in (dict(stride=(2, 2)), dict(pad=(0, 0)), dict(handle=78), dict(limit=8 << 20), dict(dtype="d"),
                  dict(ptrs=(0x10008, 0x20000, 0x30000))):  # an 8-byte aligned input: its own plan
        assert conv(ns, cupy, **other), other
    assert len(lib.of_kind(PLAN)) == 7


@pytest.mark.parametrize(("dtype", "data", "compute", "scalar"), [("f", 0, 0, 4), ("d", 1, 1, 5), ("e", 2, 0, 4)])
def test_the_graph_is_the_legacy_calls_convolution(tree: Path, monkeypatch: pytest.MonkeyPatch, dtype: str,
                                                   data: int, compute: int, scalar: int) -> None:
    lib, cupy = FakeCudnn(), FakeCupy()
    ns = load(tree, lib, monkeypatch)
    shapes = ((2, 3, 17, 9), (8, 3, 7, 5), (2, 8, 6, 4))
    assert conv(ns, cupy, ptrs=(0x1000, 0x2004, 0x3000), dtype=dtype, shapes=shapes, stride=(3, 2), pad=(3, 1))
    tensors = {lib.attrs[d][906][1][0]: lib.attrs[d] for d in lib.of_kind(TENSOR)}
    for uid, shape, align in ((1, shapes[0], 16), (2, shapes[1], 4), (3, shapes[2], 16)):
        t = tensors[uid]
        assert t[901][1] == [data] and t[902][1] == list(shape) and t[903][1] == strides(shape), uid
        assert t[900][1] == [align], uid  # what the plan may assume of the address
    (c,) = lib.of_kind(CONV_DESC)
    a = lib.attrs[c]
    assert a[100][1] == [compute] and a[101][1] == [1] and a[106][1] == [2] and a[102][1] == [1, 1]
    assert a[103][1] == [3, 2] and a[105][1] == [3, 1] and a[104][1] == [3, 1]
    (op,) = lib.of_kind(CONV_FWD)
    o = lib.attrs[op]
    assert o[700] == (scalar, [1.0]) and o[701] == (scalar, [0.0])
    by_uid = {uid: d for d in lib.of_kind(TENSOR) for uid in lib.attrs[d][906][1]}
    assert [o[k][1] for k in (704, 703, 705, 702)] == [[by_uid[1]], [by_uid[2]], [by_uid[3]], [c]]


def test_the_first_configuration_that_finalizes_within_the_limit(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib, cupy = FakeCudnn([(False, 0), (True, 600 << 20), (True, 4096), (True, 0)]), FakeCupy()
    ns = load(tree, lib, monkeypatch)
    assert conv(ns, cupy, limit=512 << 20)
    plan = lib.executed[-1][1]
    assert lib.cfg_index[lib.attrs[plan][401][1][0]] == 2  # 0 does not finalize, 1 needs more than the limit
    assert lib.attrs[lib.executed[-1][2]][1003][1][0] is not None  # its 4 KiB workspace was allocated
    assert conv(ns, cupy, limit=1 << 30)
    assert lib.cfg_index[lib.attrs[lib.executed[-1][1]][401][1][0]] == 1  # a larger limit: a plan of its own


@pytest.mark.parametrize(("dtype", "taken"), [("f", 1), ("d", 1), ("e", 0)])
def test_an_engine_that_computes_float32_in_half_is_passed_over(tree: Path, monkeypatch: pytest.MonkeyPatch,
                                                                dtype: str, taken: int) -> None:
    lib, cupy = FakeCudnn([(True, 0, [TENSOR_CORE, DOWN_CONVERT]), (True, 0, [TENSOR_CORE])]), FakeCupy()
    ns = load(tree, lib, monkeypatch)
    assert conv(ns, cupy, dtype=dtype)
    assert lib.cfg_index[lib.attrs[lib.executed[-1][1]][401][1][0]] == taken  # half data: nothing to convert


def test_declines_where_it_does_not_apply_and_remembers(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib, cupy = FakeCudnn([(False, 0), (True, 1 << 40)]), FakeCupy()
    ns = load(tree, lib, monkeypatch)
    assert not conv(ns, cupy) and not conv(ns, cupy)
    assert len(lib.of_kind(PLAN)) == 2  # tried once: the answer (none) is kept
    assert not lib.live  # the failed attempt's descriptors were destroyed
    assert not conv(ns, cupy, dtype="i")  # not a float type: not asked
    assert not lib.executed
    off = load(tree, FakeCudnn(), monkeypatch, env="0")
    assert off["enabled"] is False and not conv(off, cupy)


def test_an_execution_that_fails_sends_the_problem_to_the_legacy_call(tree: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    lib, cupy = FakeCudnn(), FakeCupy()
    ns = load(tree, lib, monkeypatch)
    lib.execute_status = 8  # CUDNN_STATUS_EXECUTION_FAILED
    assert not conv(ns, cupy)
    lib.execute_status = 0
    assert not conv(ns, cupy) and len(lib.executed) == 1  # not tried again
    cupy.fail_alloc = True
    lib2 = FakeCudnn([(True, 4096)])
    ns2 = load(tree, lib2, monkeypatch)
    assert not conv(ns2, cupy) and not lib2.executed  # no workspace: the legacy call finds its own way


def test_bounded_and_plans_go_only_after_the_device_finished(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib, cupy = FakeCudnn(), FakeCupy()
    ns = load(tree, lib, monkeypatch)
    ns["MAX_PACKS"], ns["MAX_PLANS"] = 4, 3
    for i in range(6):  # six sets of pointers of one problem
        assert conv(ns, cupy, ptrs=(0x100000 * (i + 1), 0x20000, 0x30000))
    tables = ns["_local"].tables
    assert len(tables.packs) <= 4 and len(tables.plans) == 1 and cupy.synchronized == 0
    assert len(lib.of_kind(PACK)) - len([d for d in lib.of_kind(PACK) if d in lib.live]) >= 4  # emptied once
    for pad in range(5):  # five problems: the plan table is emptied once, after a synchronize
        assert conv(ns, cupy, pad=(pad, pad))
    assert cupy.synchronized == 1 and len(tables.plans) <= 3
    live_plans = [d for d in lib.of_kind(PLAN) if d in lib.live]
    assert len(live_plans) == len(tables.plans)


def test_each_thread_has_its_own_plans(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib, cupy = FakeCudnn(), FakeCupy()
    ns = load(tree, lib, monkeypatch)
    assert conv(ns, cupy)
    thread = threading.Thread(target=lambda: conv(ns, cupy))
    thread.start()
    thread.join()
    assert len(lib.executed) == 2 and lib.executed[0][1] != lib.executed[1][1]


def test_library_only_binds_a_libcudnn_already_loaded(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = load(tree, None, monkeypatch)
    opened: list[tuple[str, int]] = []

    class Loaded:
        def __init__(self, name: str, mode: int) -> None:
            opened.append((name, mode))
            if name != "libcudnn.so.9":
                raise OSError(f"{name}: not loaded")
            self.version = 91900

        def cudnnGetVersion(self) -> int:
            return self.version

        def __getattr__(self, name: str) -> Any:
            fn = types.SimpleNamespace()  # argtypes can be set on it
            setattr(self, name, fn)
            return fn

    monkeypatch.setattr(ns["ctypes"], "CDLL", Loaded)
    assert ns["library"](91900) is not None


    assert opened == [("libcudnn.so.9", os.RTLD_NOLOAD | os.RTLD_NOW)]  # never loads a copy of its own
    for version, name in ((8907, "libcudnn.so.8"), (91000, "libcudnn.so.9")):
        ns["_library"] = None
        assert ns["library"](version) is None  # 8: not loaded; 9.10: another version than the one loaded
        assert opened[-1][0] == name
    ns["_library"] = None
    calls = len(opened)
    assert ns["library"](7605) is None and len(opened) == calls  # cuDNN 7: no backend API, nothing opened


def test_no_libcudnn_in_this_process_means_the_legacy_call(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = load(tree, None, monkeypatch)  # the real ctypes: this CPU test process has no libcudnn loaded
    assert ns["library"](91900) is None
    assert not conv(ns, FakeCupy())


# graph-conv-lean: convolution_2d.py's cuDNN forward and backward as that step left them, run against fakes of
# cupy.cudnn, libcudnn, cupy and chainer._cudnn_graph that record what is made and passed; cupy/cudnn.py's
# _lg_nchw_descriptor run as the step left it against host-cache's fake binding.

LEAN = "chainer-cudnn-graph-conv/graph-conv-lean"
CUDNN = "cupy/cudnn.py"


class Arr:
    """A cupy.ndarray as forward_gpu/backward_gpu read it (b[None, :, None, None] for the step before)."""

    _ptr = 0x100000

    def __init__(self, shape: tuple[int, ...], dtype: str = "f") -> None:
        Arr._ptr += 0x10000
        self.shape, self.ndim, self.dtype = shape, len(shape), numpy.dtype(dtype)
        self.data = types.SimpleNamespace(ptr=Arr._ptr)

    def __getitem__(self, key: Any) -> Arr:
        assert key == (None, slice(None), None, None) and self.ndim == 1
        return Arr((1, self.shape[0], 1, 1), self.dtype.char)


class Desc:
    def __init__(self, log: list[tuple], kind: str, *what: Any) -> None:
        self.value = 1000 + len(log)
        self.kind, self.what = kind, what
        log.append(("make", kind, *what))


class ConvFakes:
    """cupy.cudnn (and its libcudnn), cupy and chainer._cudnn_graph as convolution_2d.py calls them. `log` holds, in
    order, every descriptor made ("make", kind, ...) and every cuDNN or graph call with the descriptors passed."""

    def __init__(self, graph_takes: bool) -> None:
        self.log: list[tuple] = []
        self.graph_takes = graph_takes
        self.descs: dict[int, Desc] = {}
        self.kept_by_forward: list[str] = []
        lib = types.SimpleNamespace(getVersion=lambda: 91900)
        for name in ("CUDNN_CONVOLUTION_FWD_SPECIFY_WORKSPACE_LIMIT", "CUDNN_CONVOLUTION_BWD_FILTER_SPECIFY_WORKSPACE_"
                     "LIMIT", "CUDNN_CONVOLUTION_BWD_DATA_SPECIFY_WORKSPACE_LIMIT"):
            setattr(lib, name, 2)
        for name in ("getConvolutionForwardAlgorithm", "getConvolutionForwardWorkspaceSize",
                     "getConvolutionBackwardFilterAlgorithm", "getConvolutionBackwardFilterWorkspaceSize",
                     "getConvolutionBackwardDataAlgorithm", "getConvolutionBackwardDataWorkspaceSize"):
            setattr(lib, name, name)  # only handed on to _lg_algorithm_and_workspace (replaced below)
        for name in ("convolutionForward", "convolutionBackwardFilter_v3", "convolutionBackwardData_v3",
                     "convolutionBackwardBias"):
            setattr(lib, name, lambda *args, _name=name: self.log.append((_name, *args)))
        self.cudnn = lib
        self.cupy = types.SimpleNamespace(
            empty=lambda shape, dtype: Arr(shape, numpy.dtype(dtype).char), ascontiguousarray=lambda a: a,
            empty_like=lambda a: Arr(a.shape, a.dtype.char))

    def _desc(self, kind: str, *what: Any) -> Desc:
        desc = Desc(self.log, kind, *what)
        self.descs[desc.value] = desc
        return desc

    def get_handle(self) -> int:
        return 77

    def _lg_scalar(self, value: int, dtype: str) -> Any:
        return types.SimpleNamespace(data=("scalar", value, dtype))

    def create_tensor_descriptor(self, arr: Arr) -> Desc:
        return self._desc("tensor", arr.shape)

    def create_filter_descriptor(self, W: Arr) -> Desc:
        return self._desc("filter", W.shape)

    def create_convolution_descriptor(self, pad: tuple, stride: tuple, dtype: Any) -> Desc:
        return self._desc("conv", pad, stride, numpy.dtype(dtype).char)

    def _lg_nchw_descriptor(self, shape: tuple, dtype: Any) -> Desc:
        assert type(shape) is tuple
        return self._desc("nchw", shape, numpy.dtype(dtype).char)

    def add_tensor(self, *args: Any) -> None:
        self.log.append(("add_tensor", *args))

    def graph_forward(self, cupy: Any, version: int, handle: int, x: Arr, W: Arr, y: Arr, stride: tuple, pad: tuple,
                      limit: int) -> bool:
        self.log.append(("graph", x.shape, W.shape, y.shape, stride, pad))
        return self.graph_takes

    def algorithm_and_workspace(self, key: tuple, query: Any, size_query: Any, args: tuple, preference: int,
                                algo: Any = None) -> tuple[int, Any]:
        self.log.append(("algo", key[0], *args))
        return 1, types.SimpleNamespace(size=0, data=types.SimpleNamespace(ptr=0))

    def kinds(self, log: list[tuple] | None = None) -> list[tuple]:
        """What was made, in order: (kind, ...)."""
        return [entry[1:] for entry in (self.log if log is None else log) if entry[0] == "make"]


def load_conv(tree: Path, step: str, fakes: ConvFakes, monkeypatch: pytest.MonkeyPatch) -> dict:
    """convolution_2d.py as `step` left it, imported against `fakes` (cuDNN enabled, version 9.19)."""
    chainer = types.ModuleType("chainer")
    cuda = types.SimpleNamespace(cudnn_enabled=True, cudnn=fakes, cupy=fakes.cupy, _lg_workspace_size_set=False)
    utils = types.ModuleType("chainer.utils")
    utils.conv = types.SimpleNamespace(  # type: ignore[attr-defined]
        get_conv_outsize=lambda size, k, s, p, cover_all=False: (size + 2 * p - k) // s + 1)
    utils.type_check = types.SimpleNamespace(same_types=lambda *args: True)  # type: ignore[attr-defined]
    chainer.cuda, chainer.utils = cuda, utils  # type: ignore[attr-defined]
    chainer.function = types.SimpleNamespace(Function=object)  # type: ignore[attr-defined]
    chainer._cudnn_graph = types.SimpleNamespace(forward=fakes.graph_forward)  # type: ignore[attr-defined]
    for name, module in {"chainer": chainer, "chainer.utils": utils}.items():
        monkeypatch.setitem(sys.modules, name, module)
    namespace: dict[str, Any] = {"__name__": f"convolution_2d_at_{step.split('/')[1]}"}
    exec(compile(text_at(tree, step, CONV), CONV, "exec"), namespace)
    namespace["_lg_algorithm_and_workspace"] = fakes.algorithm_and_workspace
    return namespace


def run_conv(tree: Path, monkeypatch: pytest.MonkeyPatch, graph_takes: bool, bias: bool = True, dtype: str = "f",
             step: str = LEAN) -> tuple[ConvFakes, Any, list[tuple], tuple]:
    """One Convolution2DFunction (stride 2, pad 1) forward then backward; (fakes, function, forward's log, arrays)."""
    fakes = ConvFakes(graph_takes)
    ns = load_conv(tree, step, fakes, monkeypatch)
    x, W = Arr((2, 3, 8, 8), dtype), Arr((4, 3, 3, 3), dtype)
    inputs = (x, W, Arr((4,), dtype)) if bias else (x, W)
    f = ns["Convolution2DFunction"](stride=2, pad=1)
    (y,) = f.forward_gpu(inputs)
    assert y.shape == (2, 4, 4, 4)
    forward_log = list(fakes.log)
    fakes.kept_by_forward = [name for name in ("filter_desc", "conv_desc", "bias_desc") if hasattr(f, name)]
    f.backward_gpu(inputs, (Arr(y.shape, dtype),))
    return fakes, f, forward_log, (*inputs, y)


def calls(log: list[tuple], name: str) -> list[tuple]:
    return [entry[1:] for entry in log if entry[0] == name]


def test_lean_is_one_commit_right_after_the_graph_step(tree: Path) -> None:
    applied = [line.split("lgpatch: ", 1)[1] for line in git(tree, "log", "--reverse", "--format=%s").splitlines()
               if "lgpatch: " in line]
    assert applied.index(LEAN) == applied.index(STEP) + 1
    assert sorted(git(tree, "show", "--name-only", "--format=", commit_of(tree, LEAN)).split()) == [CONV, CUDNN]


@pytest.mark.parametrize("dtype", ["f", "d"])
def test_lean_graph_path_makes_no_legacy_descriptor_and_backward_makes_them(
        tree: Path, monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    fakes, f, forward, (_x, W, b, y) = run_conv(tree, monkeypatch, graph_takes=True, dtype=dtype)
    # forward: y's descriptor (the bias add's) and b's from the host cache by shape, nothing else; no legacy call
    assert fakes.kinds(forward) == [("tensor", y.shape), ("nchw", (1, 4, 1, 1), dtype)]
    assert not calls(forward, "convolutionForward") and not calls(forward, "algo")
    assert fakes.kept_by_forward == []
    bias_desc = next(d for d in fakes.descs.values() if d.kind == "nchw")
    y_desc = next(d for d in fakes.descs.values() if d.kind == "tensor")
    scalar = ("scalar", 1, "d" if dtype == "d" else "f")
    assert calls(forward, "add_tensor") == [(77, scalar, bias_desc.value, b.data.ptr, scalar, y_desc.value,
                                             y.data.ptr)]
    # backward: the filter, convolution and bias descriptors made once (_lg_descriptors), and used
    made = fakes.kinds(fakes.log[len(forward):])
    assert [m for m in made if m[0] in ("filter", "conv", "nchw")] == [
        ("filter", W.shape), ("conv", (1, 1), (2, 2), dtype), ("nchw", (1, 4, 1, 1), dtype)]
    assert (f.filter_desc.kind, f.conv_desc.kind, f.bias_desc.kind) == ("filter", "conv", "nchw")
    (bwd_filter,) = calls(fakes.log, "convolutionBackwardFilter_v3")
    (bwd_data,) = calls(fakes.log, "convolutionBackwardData_v3")
    (bwd_bias,) = calls(fakes.log, "convolutionBackwardBias")
    assert bwd_filter[6] == f.conv_desc.value and bwd_filter[11] == f.filter_desc.value
    assert bwd_data[2] == f.filter_desc.value and bwd_data[6] == f.conv_desc.value
    assert bwd_bias[5] == f.bias_desc.value


def test_lean_legacy_path_makes_the_descriptors_once_for_forward_and_backward(
        tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes, f, forward, (x, W, _b, y) = run_conv(tree, monkeypatch, graph_takes=False)
    assert fakes.kinds(forward) == [("tensor", y.shape), ("tensor", x.shape), ("filter", W.shape),
                                    ("conv", (1, 1), (2, 2), "f"), ("nchw", (1, 4, 1, 1), "f"),
                                    ("nchw", (1, 4, 1, 1), "f")]  # the second: the bias add's (a cache hit on GPU)
    assert fakes.kept_by_forward == ["filter_desc", "conv_desc", "bias_desc"]
    y_desc, x_desc = [d for d in fakes.descs.values() if d.kind == "tensor"][:2]  # the forward's
    (fwd,) = calls(forward, "convolutionForward")
    assert (fwd[2], fwd[3], fwd[4], fwd[5], fwd[6]) == (x_desc.value, x.data.ptr, f.filter_desc.value, W.data.ptr,
                                                        f.conv_desc.value)
    assert fwd[-2:] == (y_desc.value, y.data.ptr)
    (algo,) = calls(forward, "algo")
    assert algo == ("fwd", 77, x_desc.value, f.filter_desc.value, f.conv_desc.value, y_desc.value)
    backward_made = fakes.kinds(fakes.log[len(forward):])
    assert not [m for m in backward_made if m[0] in ("filter", "conv", "nchw")]  # the forward's are kept
    assert calls(fakes.log, "convolutionBackwardBias")[0][5] == f.bias_desc.value


@pytest.mark.parametrize("graph_takes", [True, False])
def test_lean_without_bias_no_bias_descriptor_and_no_add(tree: Path, monkeypatch: pytest.MonkeyPatch,
                                                        graph_takes: bool) -> None:
    fakes, f, _, _ = run_conv(tree, monkeypatch, graph_takes=graph_takes, bias=False)
    assert not [m for m in fakes.kinds() if m[0] == "nchw"] and not hasattr(f, "bias_desc")
    assert not calls(fakes.log, "add_tensor") and not calls(fakes.log, "convolutionBackwardBias")
    assert len(calls(fakes.log, "convolutionBackwardFilter_v3")) == 1
    assert [m[0] for m in fakes.kinds() if m[0] in ("filter", "conv")] == ["filter", "conv"]  # once, either way


def test_lean_checks_tell_the_step_before_apart(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The graph step alone made every legacy descriptor in forward and the bias's from a view: the checks above
    fail on it."""
    fakes, _, forward, (x, W, _b, y) = run_conv(tree, monkeypatch, graph_takes=True, step=STEP)
    assert fakes.kinds(forward) == [("tensor", x.shape), ("tensor", y.shape), ("filter", W.shape),
                                    ("conv", (1, 1), (2, 2), "f"), ("tensor", (1, 4, 1, 1))]


def test_nchw_descriptor_is_create_tensor_descriptors_entry(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_chainer_cudnn_host_cache import Array, Binding
    from test_chainer_cudnn_host_cache import load as load_cudnn

    new, binding = load_cudnn(tree, LEAN, monkeypatch)
    nchw = new["_lg_nchw_descriptor"]
    first = nchw((1, 64, 1, 1), numpy.dtype("f"))
    assert binding.sets() == [("setTensor4dDescriptor", Binding.CUDNN_TENSOR_NCHW, Binding.CUDNN_DATA_FLOAT,
                               1, 64, 1, 1)]
    # the entry create_tensor_descriptor finds for b[None, :, None, None], and the other way round
    assert new["create_tensor_descriptor"](Array((1, 64, 1, 1))) is first
    assert nchw((1, 64, 1, 1), numpy.dtype("f")) is first and len(binding.sets()) == 1
    view = new["create_tensor_descriptor"](Array((1, 32, 1, 1), "d"))
    assert nchw((1, 32, 1, 1), numpy.dtype("d")) is view
    other = nchw((1, 64, 1, 1), numpy.dtype("d"))
    assert other is not first and binding.sets()[-1] == ("setTensor4dDescriptor", Binding.CUDNN_TENSOR_NCHW,
                                                         Binding.CUDNN_DATA_DOUBLE, 1, 64, 1, 1)
