"""chainer-type-check-cache in use, on the CPU with the real Chainer 1.24.0: a small CNN trains to the same bits with
and without the step, the cache stays bounded, and Chainer's switches (CHAINER_TYPE_CHECK, the new
CHAINER_TYPE_CHECK_CACHE and Function.type_check_cache_enable) behave as documented.
"""

from __future__ import annotations

from pathlib import Path

import numpy
import pytest
from helpers.chainer_cpu import ChainerTrees, chainer_trees, run_chainer

pytestmark = [pytest.mark.integration]

STEP = "chainer-type-check-cache/forward-check-cache"


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> ChainerTrees:
    return chainer_trees(tmp_path_factory.mktemp("chainer-type-check-run"), STEP)


# conv, relu, max_pooling, linear, softmax_cross_entropy; weights, inputs and labels from a seeded RandomState;
# three steps of forward, backward and a plain SGD update (later steps see other weights, the same shapes).
CNN = """
import chainer.links as L
rng = numpy.random.RandomState(0)
c1, c2, fc = L.Convolution2D(3, 4, 3, pad=1), L.Convolution2D(4, 6, 3, stride=2), L.Linear(6 * 2 * 2, 5)
params = [c1.W, c1.b, c2.W, c2.b, fc.W, fc.b]
for p in params:
    p.data[...] = rng.standard_normal(p.data.shape).astype('f')
saved, calls = {}, []
for step in range(3):
    x = chainer.Variable(rng.standard_normal((2, 3, 12, 12)).astype('f'))
    t = rng.randint(0, 5, 2).astype('i')
    h = F.max_pooling_2d(F.relu(c1(x)), 2)
    y = fc(F.relu(c2(h)))
    loss = F.softmax_cross_entropy(y, t)
    for p in params:
        p.zerograd()
    loss.backward()
    saved.update({"loss%d" % step: loss.data, "y%d" % step: y.data, "gx%d" % step: x.grad})
    saved.update({"g%d_%d" % (step, i): p.grad for i, p in enumerate(params)})
    for p in params:
        p.data -= 0.1 * p.grad
    calls.append(get_types_calls[0])
numpy.savez(OUT, **saved)
print(json.dumps({"checks_after_step": calls, "size": cache_size()}))
"""


def _cnn(trees: ChainerTrees, tree: Path, out: Path, **env: str) -> tuple[dict, dict[str, numpy.ndarray]]:
    report = run_chainer(trees, tree, f"OUT = {str(out)!r}\n" + CNN, **env)
    with numpy.load(out) as saved:
        return report, {k: saved[k] for k in saved.files}


def test_small_cnn_trains_to_the_same_bits_with_and_without_the_step(trees: ChainerTrees, tmp_path: Path) -> None:
    patched, patched_arrays = _cnn(trees, trees.patched, tmp_path / "patched.npz")
    before, before_arrays = _cnn(trees, trees.without_step, tmp_path / "before.npz")
    off, off_arrays = _cnn(trees, trees.patched, tmp_path / "off.npz", CHAINER_TYPE_CHECK_CACHE="0")
    assert sorted(patched_arrays) == sorted(before_arrays) == sorted(off_arrays)
    assert len(patched_arrays) == 3 * 9
    for name, want in before_arrays.items():
        for got in (patched_arrays[name], off_arrays[name]):
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert got.tobytes() == want.tobytes(), f"{name} differs"
    # Each step applies the same 7 Functions (conv with bias x2, relu x2, max-pool, linear, softmax CE), checked
    # on every step before; the patched tree checks in the first step only and keeps one key per Function.
    per_step = before["checks_after_step"][0]
    assert per_step == 7
    assert before["checks_after_step"] == [per_step, 2 * per_step, 3 * per_step]
    assert patched["checks_after_step"] == [per_step] * 3
    assert patched["size"] == per_step
    assert off["checks_after_step"] == before["checks_after_step"] and off["size"] == 0


BOUNDED = """
from chainer import _type_check_cache as cache
limit = cache.MAX_ENTRIES
out = {"limit": limit, "first": checks(lambda: F.relu(numpy.zeros((1, 1), 'f')))[1]}
for n in range(2, limit + 101):
    F.relu(numpy.zeros((1, n), 'f'))
out["size"] = cache.size()
out["newest_again"] = checks(lambda: F.relu(numpy.zeros((1, limit + 100), 'f')))[1]
out["oldest_again"] = checks(lambda: F.relu(numpy.zeros((1, 1), 'f')))[1]
out["size_after"] = cache.size()
cache.MAX_ENTRIES = 8  # read on every insert: a smaller bound takes effect on the next one
cache.clear()
for n in range(1, 11):
    F.relu(numpy.zeros((n,), 'f'))
out["small"] = [cache.size()] + [checks(lambda: F.relu(numpy.zeros((n,), 'f')))[1] for n in (10, 3, 1)]
print(json.dumps(out))
"""


def test_cache_stays_bounded_dropping_the_oldest(trees: ChainerTrees) -> None:
    out = run_chainer(trees, trees.patched, BOUNDED)
    assert out["limit"] == 4096
    assert out["first"] == 1
    assert out["size"] == out["size_after"] == 4096
    assert out["newest_again"] == 0, "the newest key must still be there"
    assert out["oldest_again"] == 1, "the oldest key must have been dropped (and its check runs again)"
    # 10 shapes into 8 places: 1 and 2 dropped; 10 and 3 kept; 1 checked again (and 3 dropped for it).
    assert out["small"] == [8, 0, 0, 1]


SWITCHES = """
x, W = numpy.zeros((2, 3), 'f'), numpy.zeros((4, 3), 'f')
out = {"good": [checks(lambda: F.linear(x, W))[1] for _ in range(3)],
       "wrong": checks(lambda: F.linear(numpy.zeros((2, 5), 'f'), W)), "size": cache_size()}
if _type_check_cache is not None:
    chainer.Function.type_check_cache_enable = False
    _type_check_cache.clear()
    out["class_switch"] = [checks(lambda: F.linear(x, W))[1] for _ in range(2)] + [cache_size()]
print(json.dumps(out))
"""


def test_switches_turn_checking_or_only_the_cache_off(trees: ChainerTrees) -> None:
    no_check = run_chainer(trees, trees.patched, SWITCHES, CHAINER_TYPE_CHECK="0")
    no_check_before = run_chainer(trees, trees.without_step, SWITCHES, CHAINER_TYPE_CHECK="0")
    assert no_check["good"] == [0, 0, 0] and no_check["size"] == 0
    assert no_check["wrong"] == no_check_before["wrong"] and not no_check["wrong"][0].startswith("InvalidType")
    no_cache = run_chainer(trees, trees.patched, SWITCHES, CHAINER_TYPE_CHECK_CACHE="0")
    assert no_cache["good"] == [1, 1, 1] and no_cache["size"] == 0
    assert no_cache["wrong"][0].startswith("InvalidType")
    default = run_chainer(trees, trees.patched, SWITCHES)
    assert default["good"] == [1, 0, 0] and default["size"] == 1
    assert default["class_switch"] == [1, 1, 0]
