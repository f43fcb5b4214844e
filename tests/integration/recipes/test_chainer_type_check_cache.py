"""chainer-type-check-cache on the real Chainer 1.24.0 sdist, run on the CPU (NumPy) from the patched work tree.

A passed forward type check is remembered per (class, input arrays, instance attributes) — per (class, input
arrays) where the class's check never names its instance (chainer-call-lean); everything a check can tell apart must
give another key. Each case runs in both trees — the whole recipe, and the same ledger with this
step reverted (Chainer as it was) — and the outcomes, error messages included, must be the same; the count of
checks that actually ran (`type_check.get_types` calls) shows where the patched tree answered from its cache.
"""

from __future__ import annotations

import pytest
from helpers import Runner, git
from helpers.chainer_cpu import ChainerTrees, assert_gated_like_the_speed_steps, chainer_trees, run_chainer

pytestmark = [pytest.mark.integration]

STEP = "chainer-type-check-cache/forward-check-cache"


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> ChainerTrees:
    return chainer_trees(tmp_path_factory.mktemp("chainer-type-check"), STEP)


def both(trees: ChainerTrees, code: str, **env: str) -> tuple[dict, dict]:
    return run_chainer(trees, trees.patched, code, **env), run_chainer(trees, trees.without_step, code, **env)


def test_step_is_gated_like_the_other_speed_steps(lgpatch: Runner) -> None:
    assert_gated_like_the_speed_steps(lgpatch, STEP)


def test_applies_strictly_touching_function_py_and_its_new_module(trees: ChainerTrees) -> None:
    assert STEP in trees.applied
    commit = git(trees.patched, "log", "--format=%H", "--grep", f"lgpatch: {STEP}$")
    files = git(trees.patched, "show", "--name-only", "--format=", commit).split()
    assert sorted(files) == ["chainer/_type_check_cache.py", "chainer/function.py"]
    assert not (trees.without_step / "chainer" / "_type_check_cache.py").exists()


WRONG_AFTER_GOOD = """
x, W, b = numpy.zeros((1, 3, 5, 5), 'f'), numpy.zeros((4, 3, 3, 3), 'f'), numpy.zeros(4, 'f')
out = {"good": [checks(lambda: F.convolution_2d(x, W, b, pad=1)) for _ in range(3)]}
wrong = {"channels": (numpy.zeros((1, 2, 5, 5), 'f'), W, b), "dtype": (x.astype('d'), W, b),
         "ndim": (numpy.zeros((3, 5, 5), 'f'), W, b), "bias": (x, W, numpy.zeros(5, 'f')),
         "no_bias_channels": (numpy.zeros((1, 2, 5, 5), 'f'), W)}
for name, args in sorted(wrong.items()):
    out[name] = [checks(lambda: F.convolution_2d(*args, pad=1)) for _ in range(2)]
out["linear"] = [checks(lambda: F.linear(numpy.zeros((2, 3), 'f'), numpy.zeros((4, 3), 'f'))) for _ in range(2)]
out["linear_wrong"] = [checks(lambda: F.linear(numpy.zeros((2, 5), 'f'), numpy.zeros((4, 3), 'f')))
                       for _ in range(2)]
out["size"] = cache_size()
print(json.dumps(out))
"""


def test_wrong_input_after_a_cached_call_raises_exactly_as_before(trees: ChainerTrees) -> None:
    patched, before = both(trees, WRONG_AFTER_GOOD)
    assert [o for o, _ in patched["good"]] == ["ok"] * 3
    assert [n for _, n in patched["good"]] == [1, 0, 0], "the second and third good call should be cached"
    assert [n for _, n in before["good"]] == [1, 1, 1]
    for name in ("channels", "dtype", "ndim", "bias", "no_bias_channels", "linear_wrong"):
        messages = [o for o, _ in patched[name]]
        assert messages == [o for o, _ in before[name]], name
        assert messages[0] == messages[1] and messages[0].startswith("InvalidType: \nInvalid operation"), messages
        assert [n for _, n in patched[name]] == [1, 1], f"{name}: a failed check must never be remembered"
    assert "Convolution2DFunction (Forward)" in patched["channels"][0][0]
    assert [n for _, n in patched["linear"]] == [1, 0]
    assert patched["size"] == 2 and before["size"] is None


OTHER_CONFIGURATION = """
x = numpy.zeros((2, 3), 'f')
out = {"reshape": [checks(lambda: F.reshape(x, s)) for s in [(3, 2), (3, 2), (4, 2), (6,), (3, 2), (3, 2, 1)]],
       "sum": [checks(lambda: F.sum(x, axis=a)) for a in [1, 1, 2, -1, -3, 0]],
       "transpose": [checks(lambda: F.transpose(x, axes)) for axes in [(1, 0), (1, 0), (0, 1, 2), (0, 1)]],
       "stride": [checks(lambda: F.convolution_2d(numpy.zeros((1, 1, 6, 6), 'f'), numpy.zeros((1, 1, 2, 2), 'f'),
                                                  stride=s)) for s in [1, 2, 1, 2, 3]]}
print(json.dumps(out))
"""


def test_another_configuration_is_checked_again(trees: ChainerTrees) -> None:
    patched, before = both(trees, OTHER_CONFIGURATION)
    for case in ("reshape", "sum", "transpose", "stride"):
        assert [o for o, _ in patched[case]] == [o for o, _ in before[case]], case
    assert [o == "ok" for o, _ in patched["reshape"]] == [True, True, False, True, True, True]
    assert [n for _, n in patched["reshape"]] == [1, 0, 1, 1, 0, 1]
    assert [o == "ok" for o, _ in patched["sum"]] == [True, True, False, True, False, True]
    assert [n for _, n in patched["sum"]] == [1, 0, 1, 1, 1, 1]
    assert [o == "ok" for o, _ in patched["transpose"]] == [True, True, False, True]
    # Transpose's check reads no self (only the dtype: wrong axes fail in forward, in both trees alike), so the
    # input alone is its key.
    assert [n for _, n in patched["transpose"]] == [1, 0, 0, 0]
    # Convolution2DFunction's check never reads its instance: another stride cannot change its outcome.
    assert [n for _, n in patched["stride"]] == [1, 0, 0, 0, 0]


KEYS = """
from chainer import _type_check_cache as cache
from chainer.functions.array.expand_dims import ExpandDims
args = (numpy.zeros(2, 'f'),)


def reads_self(value):  # ExpandDims' check reads self.axis: its key holds the attributes
    f = ExpandDims(0)
    f.extra = value
    return f


values = (True, 1, 1.0, 0.0, -0.0, (1, (2.0, 'a')), (1, (2, 'a')))
keys = [cache.key(reads_self(v), args) for v in values]
out = {"keys": len(set(keys)), "none": [k is None for k in keys],
       "relu_keys": len({cache.key(F.ReLU(v), args) for v in values}),  # its check reads no self
       "dtypes": len({cache.key(F.ReLU(), (numpy.zeros(2, d),)) for d in ('l', 'q', 'f', 'd')}),
       "not_plain": [cache.key(reads_self(v), args) is None
                     for v in (numpy.float32(1), [1], {}, slice(1), (1, [2]), numpy.zeros(1), frozenset())],
       "other_arrays": [cache.key(F.ReLU(), a) is None for a in ((numpy.zeros(2, '>f4'),), (numpy.matrix([1]),),
                                                                 ([1.0],), (None,))]}
print(json.dumps(out))
"""


def test_keys_tell_apart_what_python_equates_and_refuse_other_values(trees: ChainerTrees) -> None:
    out = run_chainer(trees, trees.patched, KEYS)
    # True, 1 and 1.0 are equal keys in Python, 0.0 and -0.0 too; int64 is two dtypes ('l', 'q'); a check can
    # tell each apart (type, sign, dtype.char), so each must be its own key.
    assert out["keys"] == 7 and not any(out["none"])
    assert out["relu_keys"] == 1
    assert out["dtypes"] == 4
    assert all(out["not_plain"]), out["not_plain"]
    assert all(out["other_arrays"]), out["other_arrays"]


NOT_PLAIN = """
import chainer.function
from chainer.functions.pooling.upsampling_2d import Upsampling2D
x = numpy.zeros((1, 1, 2, 2), 'f')
out = {"upsampling": [checks(lambda: Upsampling2D(numpy.zeros(s, 'i'), 2)(x))
                      for s in [x.shape, x.shape, (1, 1, 3, 3)]],
       "get_item": [checks(lambda: F.get_item(x, s)) for s in [slice(0, 1), slice(0, 1), (0, 0, 0, 0, 0)]]}


class UserFunction(chainer.Function):  # defined outside Chainer: its check may read or write anything
    def __init__(self, n):
        self.n = n

    def check_type_forward(self, in_types):
        type_check.expect(in_types[0].shape[0] == self.n)

    def forward(self, inputs):
        return inputs[0],


class WritingCheck(UserFunction):
    def check_type_forward(self, in_types):
        self.seen = True


WritingCheck.__module__ = "chainer.functions.probe"  # as if Chainer's own, but its check changes the instance
out["user"] = [checks(lambda: UserFunction(2)(numpy.zeros(2, 'f'))) for _ in range(3)]
out["writing"] = [checks(lambda: WritingCheck(2)(numpy.zeros(2, 'f'))) for _ in range(3)]
from chainer.functions.array.expand_dims import ExpandDims
reused = ExpandDims(0)
out["reused"] = [checks(lambda: reused(numpy.zeros(3, 'f'))) for _ in range(3)]
reused_relu = F.ReLU()  # holds its inputs after a call too, but its check reads no self
out["reused_relu"] = [checks(lambda: reused_relu(numpy.zeros(3, 'f'))) for _ in range(3)]
out["size"] = cache_size()
print(json.dumps(out))
"""


def test_functions_with_other_values_are_checked_on_every_call(trees: ChainerTrees) -> None:
    patched, before = both(trees, NOT_PLAIN)
    for case in ("upsampling", "get_item", "user", "writing", "reused"):
        assert [o for o, _ in patched[case]] == [o for o, _ in before[case]], case
        assert [n for _, n in patched[case]] == [1] * len(patched[case]), f"{case} must not be cached"
    # Upsampling2D's check reads its indexes array: the same input with other indexes must still fail.
    assert [o.split(":")[0] for o, _ in patched["upsampling"]] == ["ok", "ok", "InvalidType"]
    assert patched["get_item"][2][0].startswith("InvalidType")
    # The reused ExpandDims: its first call (fresh instance, plain attributes) is remembered, later ones hold
    # `inputs`; the reused ReLU's key is its class and input, whatever it holds.
    assert [n for _, n in patched["reused_relu"]] == [1, 0, 0]
    assert patched["size"] == 2
