"""chainer-call-lean on the real Chainer 1.24.0 sdist, on the CPU (NumPy) from the patched work tree.

call-lean (Function.__call__, Variable.__init__, the type-check key, pooling's _pair): every case of
chainer-call-overhead's tests, and the cases below that aim at what this step reads in place, run in the whole
recipe and in the same ledger with this step reverted, and must print the same. cudnn-lean (cupy/cudnn.py's table
getter and scalars, _cudnn_graph.forward's alignments): chainer-cudnn-host-cache's and chainer-cudnn-graph-conv's
fake-binding tests run again on the module as this step left it.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any, Callable

import pytest
import test_chainer_call_overhead as overhead
import test_chainer_cudnn_graph_conv as graph
import test_chainer_cudnn_host_cache as host_cache
from helpers import Runner, git
from helpers.chainer_cpu import ChainerTrees, assert_gated_like_the_speed_steps, chainer_trees, run_chainer
from helpers.reduction_template import applied_in_order, commit_of

pytestmark = [pytest.mark.integration]

STEP = "chainer-call-lean/call-lean"
CUDNN_STEP = "chainer-call-lean/cudnn-lean"
AFTER = "chainer-linear-cublas/linear-cublas"


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> ChainerTrees:
    return chainer_trees(tmp_path_factory.mktemp("chainer-call-lean"), STEP)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "cudnn-lean", "chainer-call-overhead/call-fast-paths",
                            "chainer-cudnn-host-cache/cudnn-host-cache", AFTER, STEP, CUDNN_STEP)


def same_in_both(trees: ChainerTrees, code: str) -> dict:
    patched = run_chainer(trees, trees.patched, code)
    assert patched == run_chainer(trees, trees.without_step, code)
    return patched


def test_call_lean_is_gated_like_the_other_speed_steps(lgpatch: Runner) -> None:
    assert_gated_like_the_speed_steps(lgpatch, STEP)


def test_cudnn_lean_comes_with_the_graph_convolution(lgpatch: Runner) -> None:
    for cuda, cudnn, selected in (("13.0", "true", True), ("11.0", "true", True), ("10.2", "true", False),
                                  ("13.0", "false", False)):
        r = lgpatch("show", "chainer-1.24", "--cuda", cuda, "--python", "3.12", "--param", f"cudnn={cudnn}",
                    "--json")
        assert r.code == 0, r.err
        steps = {s["step"]: s["selected"] for s in json.loads(r.out)["steps"]}
        assert steps[CUDNN_STEP] is selected, (cuda, cudnn)
        assert steps["chainer-cudnn-graph-conv/graph-conv"] is selected, (cuda, cudnn)


def test_both_steps_right_after_the_linear_step_each_on_its_own_files(trees: ChainerTrees) -> None:
    applied = list(trees.applied)
    assert applied.index(STEP) == applied.index(AFTER) + 1 and applied.index(CUDNN_STEP) == applied.index(STEP) + 1
    touched = {}
    for step in (STEP, CUDNN_STEP):
        commit = commit_of(trees.patched, step)
        touched[step] = sorted(git(trees.patched, "show", "--name-only", "--format=", commit).split())
    assert touched[STEP] == ["chainer/_type_check_cache.py", "chainer/function.py",
                             "chainer/functions/pooling/pooling_2d.py", "chainer/variable.py"]
    assert touched[CUDNN_STEP] == ["chainer/_cudnn_graph.py", "cupy/cudnn.py"]


@pytest.mark.parametrize("case", ["TRAIN", "HOOKS", "DEBUG", "VOLATILE", "DISPATCH"])
def test_chainer_call_overheads_cases_print_the_same(trees: ChainerTrees, case: str) -> None:
    same_in_both(trees, getattr(overhead, case))


# What call-lean reads in place, each where it could differ: debug mode switched on inside a forward (the second
# read), a Variable subclass whose volatile property is its own, hooks of another thread, local hooks added and
# deleted, a remembered check against a failing one, a user subclass's check, the cache and checks switched off,
# pooling arguments of every kind _pair sees.
LEAN = """
import threading
from chainer import flag
out = {}


class TurnsDebugOn(chainer.Function):
    def forward(self, inputs):
        chainer.set_debug(True)
        return numpy.array([float('nan')], 'f'),


out["debug_inside"] = outcome(lambda: TurnsDebugOn()(numpy.ones(1, 'f')))
chainer.set_debug(False)


class AlwaysOn(chainer.Variable):
    @property
    def volatile(self):
        return flag.ON


y = F.exp(AlwaysOn(numpy.ones(2, 'f'), volatile='off'))
out["subclass_volatile"] = [repr(y.volatile), y.creator is None]
out["mixed_subclass"] = outcome(lambda: AlwaysOn(numpy.ones(2, 'f')) + chainer.Variable(numpy.ones(2, 'f')))


class Recorder(chainer.function.FunctionHook):
    name = 'recorder'

    def __init__(self):
        self.seen = []

    def forward_preprocess(self, function, in_data):
        self.seen.append(type(function).__name__)


main_hook, thread_hook = Recorder(), Recorder()


def in_thread():
    with thread_hook:
        F.tanh(numpy.ones(1, 'f'))


with main_hook:
    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    F.exp(numpy.ones(1, 'f'))
out["threads"] = [main_hook.seen, thread_hook.seen]
local, f = Recorder(), F.activation.relu.ReLU()
f.add_hook(local)
f(numpy.ones(1, 'f'))
f.delete_hook('recorder')
f(numpy.ones(1, 'f'))
out["local"] = local.seen

ints, floats = numpy.ones((2, 3), 'i'), numpy.ones((2, 3), 'f')
out["checks"] = [checks(lambda: F.relu(floats)), checks(lambda: F.relu(floats)), checks(lambda: F.relu(ints)),
                 checks(lambda: F.relu(ints)), checks(lambda: F.relu(floats.reshape(3, 2)))]


class MyReLU(F.activation.relu.ReLU):
    pass


out["user_subclass"] = [checks(lambda: MyReLU()(floats)) for _ in range(3)]
chainer.Function.type_check_cache_enable = False
out["cache_off"] = [checks(lambda: F.relu(floats)) for _ in range(2)]
chainer.Function.type_check_cache_enable = True
chainer.Function.type_check_enable = False
out["checks_off"] = [checks(lambda: F.relu(ints)) for _ in range(2)]
chainer.Function.type_check_enable = True

from chainer.functions.pooling import max_pooling_2d
x = numpy.arange(2 * 3 * 6 * 6, dtype='f').reshape(2, 3, 6, 6)
pools = {}
for name, ksize in (('int', 2), ('tuple', (2, 3)), ('list', [3, 2]), ('int64', numpy.int64(2)), ('bool', True)):
    p = max_pooling_2d.MaxPooling2D(ksize, stride=ksize, pad=0)
    pools[name] = [repr(v) for v in (p.kh, p.kw, p.sy, p.sx, p.ph, p.pw)]
    outputs = []
    pools[name + "_out"] = [outcome(lambda: outputs.append(F.max_pooling_2d(x, ksize).data.tolist())),
                            outputs]
out["pools"] = pools
out["bad_pool"] = outcome(lambda: max_pooling_2d.MaxPooling2D(None))
print(json.dumps(out))
"""


def test_what_call_lean_reads_in_place_behaves_as_before(trees: ChainerTrees) -> None:
    out = same_in_both(trees, LEAN)
    assert out["debug_inside"] == "RuntimeError: NaN is detected on forward computation"
    assert out["subclass_volatile"] == ["ON", True], "the subclass's own volatile property decides"
    assert out["mixed_subclass"] == "ValueError: ON and OFF flags cannot be mixed."
    assert out["threads"] == [["Exp"], ["Tanh"]] and out["local"] == ["ReLU"]
    ran, failed = [n for _, n in out["checks"]], [r for r, _ in out["checks"]]
    assert ran == [1, 0, 1, 1, 1] and failed[2].startswith("InvalidType") and failed[3] == failed[2]
    assert [n for _, n in out["user_subclass"]] == [1, 1, 1] and [n for _, n in out["cache_off"]] == [1, 1]
    assert out["checks_off"] == [["ok", 0], ["ok", 0]]
    assert out["pools"]["int"][:2] == ["2", "2"] and out["pools"]["list"][:2] == ["3", "2"]
    assert out["pools"]["int_out"][0] == "ok" and out["pools"]["int64_out"][0] == "ok"


# _never_names_its_instance on checks that read their instance in every way a function can, and on ones that
# do not; the classes Chainer's own inference uses; a class whose check is replaced is looked at again.
SCAN = """
from chainer import _type_check_cache as cache
from chainer.functions.activation.relu import ReLU
from chainer.functions.array.reshape import Reshape
import sys as system


def plain(self, in_types):
    type_check.expect(in_types.size() == 1, in_types[0].ndim == 4)


def direct(self, in_types):
    type_check.expect(in_types[0].ndim == self.ndim)


def stored(self, in_types):
    self = None
    return in_types


def deleted(self, in_types):
    del self


def closure(self, in_types):
    return (lambda: self)()


def comprehension(self, in_types):
    return [self for _ in in_types]


class Base(object):
    def check_type_forward(self, in_types):
        return in_types


class Sub(Base):
    def check_type_forward(self, in_types):
        super().check_type_forward(in_types)


def frame_locals(self, in_types):
    return locals()


def frame_vars(self, in_types):
    return vars()


def by_eval(self, in_types):
    return eval('in_types')


def by_frame(self, in_types):
    return sys._getframe()


def attribute_named_eval(self, in_types):
    return in_types.eval()


cases = {name: cache._never_names_its_instance(f) for name, f in (
    ("plain", plain), ("direct", direct), ("stored", stored), ("deleted", deleted), ("closure", closure),
    ("comprehension", comprehension), ("super", Sub.check_type_forward), ("locals", frame_locals),
    ("vars", frame_vars), ("eval", by_eval), ("frame", by_frame), ("attribute_named_eval", attribute_named_eval),
    ("builtin", len))}
x = numpy.zeros((2, 3), 'f')
forms = [len(cache.key(ReLU(), (x,))), len(cache.key(Reshape((3, 2)), (x,)))]
original = ReLU.check_type_forward
try:
    ReLU.check_type_forward = direct
    forms.append(len(cache.key(ReLU(), (x,))))
finally:
    ReLU.check_type_forward = original
forms.append(len(cache.key(ReLU(), (x,))))
print(json.dumps({"cases": cases, "forms": forms}))
"""


def test_a_check_that_never_names_its_instance_is_keyed_by_its_inputs_alone(trees: ChainerTrees) -> None:
    out = run_chainer(trees, trees.patched, SCAN)
    assert out["cases"] == {"plain": True, "direct": False, "stored": False, "deleted": False, "closure": False,
                            "comprehension": False, "super": False, "locals": False, "vars": False, "eval": False,
                            "frame": False, "attribute_named_eval": True, "builtin": False}
    # ReLU: class and inputs; Reshape's check reads self.shape (a tuple: the pair form); a replaced check is read
    # again (self.ndim: the fast form), and the original once more.
    assert out["forms"] == [2, 3, 5, 2]


def test_a_remembered_check_still_tells_attributes_apart_where_it_reads_them(trees: ChainerTrees) -> None:
    code = """
    from chainer.functions.array.expand_dims import ExpandDims
    x = numpy.zeros((2, 3), 'f')
    out = {"expand": [checks(lambda: F.expand_dims(x, 2)), checks(lambda: F.expand_dims(x, 2)),
                      checks(lambda: F.expand_dims(x, 4)), checks(lambda: F.expand_dims(x, 4))],
           "reshape": [checks(lambda: F.reshape(x, (6,))), checks(lambda: F.reshape(x, (6,))),
                       checks(lambda: F.reshape(x, (7,)))]}
    print(json.dumps(out))
    """
    out = same_in_both(trees, code)
    assert [n for _, n in out["expand"]] == [1, 0, 1, 1] and out["expand"][2][0].startswith("InvalidType")
    assert [n for _, n in out["reshape"]] == [1, 0, 1] and out["reshape"][2][0].startswith("InvalidType")


def test_fewer_python_calls_per_inference(trees: ChainerTrees) -> None:
    patched = run_chainer(trees, trees.patched, overhead.CALLS)
    before = run_chainer(trees, trees.without_step, overhead.CALLS)
    assert patched["same"] and patched["out"] == before["out"]
    # Five Functions: each saves at least the two is_debug() calls, get_function_hooks(), the hooks property,
    # get_device_from_array and three of the remembered check's four calls.
    assert patched["calls"] <= before["calls"] - 5 * 8, (patched["calls"], before["calls"])


HOST_CACHE_CASES: list[Callable[..., None]] = [
    host_cache.test_each_descriptor_is_set_as_before_and_made_once,
    host_cache.test_shape_dtype_format_and_parameters_are_all_part_of_the_key,
    host_cache.test_non_contiguous_arrays_are_refused_on_every_call,
    host_cache.test_bounded_and_a_held_descriptor_outlives_the_table,
    host_cache.test_each_thread_has_its_own_descriptors,
    host_cache.test_activation_descriptor_is_made_once_per_mode,
]


@pytest.mark.parametrize("case", HOST_CACHE_CASES, ids=lambda case: case.__name__)
def test_the_host_cache_cases_hold_after_cudnn_lean(tree: Path, monkeypatch: pytest.MonkeyPatch,
                                                    case: Callable[..., None]) -> None:
    monkeypatch.setattr(host_cache, "STEP", CUDNN_STEP)
    case(tree, monkeypatch)


@pytest.mark.parametrize(("dtype", "ctype"), [("f", ctypes.c_float), ("d", ctypes.c_double)])
def test_scalars_carry_their_address_as_a_plain_int(tree: Path, monkeypatch: pytest.MonkeyPatch, dtype: str,
                                                    ctype: Any) -> None:
    old, _ = host_cache.load(tree, AFTER, monkeypatch)
    new, _ = host_cache.load(tree, CUDNN_STEP, monkeypatch)
    for value in (1, 0):
        scalar = new["_lg_scalar"](value, dtype)
        assert type(scalar.data) is int and ctype.from_address(scalar.data).value == float(value)
        assert new["_lg_scalar"](value, dtype) is scalar and scalar.data == scalar.array.ctypes.data
        assert ctype.from_address(old["_lg_scalar"](value, dtype).data).value == float(value)
    assert not hasattr(scalar, "__dict__"), "slots only: nothing else to read or set"


GRAPH_CASES: list[tuple[Callable[..., None], tuple]] = [
    (graph.test_one_plan_per_problem_and_a_pack_per_set_of_pointers, ()),
    (graph.test_the_graph_is_the_legacy_calls_convolution, ("f", 0, 0, 4)),  # alignments 16, 4, 16 checked
    (graph.test_the_graph_is_the_legacy_calls_convolution, ("d", 1, 1, 5)),
    (graph.test_declines_where_it_does_not_apply_and_remembers, ()),
    (graph.test_an_execution_that_fails_sends_the_problem_to_the_legacy_call, ()),
    (graph.test_bounded_and_plans_go_only_after_the_device_finished, ()),
    (graph.test_each_thread_has_its_own_plans, ()),
]


@pytest.mark.parametrize(("case", "args"), GRAPH_CASES, ids=lambda item: getattr(item, "__name__", str(item)))
def test_the_graph_conv_cases_hold_after_cudnn_lean(tree: Path, monkeypatch: pytest.MonkeyPatch,
                                                    case: Callable[..., None], args: tuple) -> None:
    monkeypatch.setattr(graph, "STEP", CUDNN_STEP)
    case(tree, monkeypatch, *args)
