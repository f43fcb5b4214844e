"""chainer-cudnn-graph-conv on the real Chainer 1.24.0 sdist: it applies (strict) as one commit adding
chainer/_cudnn_graph.py and changing convolution_2d.py's cuDNN forward; and the module, run as it is in the patched
tree against a fake libcudnn that plays the backend API (descriptors, attributes, finalize, heuristics, execute),
builds one plan per problem with the legacy call's convolution (cross-correlation, pads, strides, no dilation,
alpha 1 / beta 0, the compute type of CuPy 1.24's descriptor), keeps a variant pack per set of pointers, takes the
heuristics' first engine configuration that finalizes within the workspace limit, and answers False (the legacy
call runs) wherever it does not apply; bounded, per thread, and off with CHAINER_CUDNN_GRAPH=0.

On the GPU, bench/gpu/chainer_graph_conv_check.py compares the graph path's outputs with the legacy call's and with
the im2col path for many shapes, strides, pads and dtypes, forward and backward.
"""

from __future__ import annotations

import ctypes
import json
import os
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
