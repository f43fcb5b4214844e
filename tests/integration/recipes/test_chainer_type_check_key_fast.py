"""chainer-type-check-cache's key on the real Chainer 1.24.0 sdist, run on the CPU (NumPy) from the patched tree.

The key of a function whose attributes are all None, bool, int or str (every Chainer function's) is made from their
names, types and values (session 13), not from one (name, (type, value)) pair per attribute as the step first made
it; and where a class's check never names its instance (chainer-call-lean), from the class and inputs alone. What
must hold: two calls get equal keys exactly where the pair-per-attribute keys were equal, or for such a class where
(class, inputs) were (the cache passes and checks the same calls), a key is None exactly where that key was None,
and each form is the one taken where it applies. test_chainer_type_check_cache.py checks the cache's behaviour
against Chainer as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from helpers.chainer_cpu import ChainerTrees, chainer_trees, run_chainer

pytestmark = [pytest.mark.integration]

STEP = "chainer-type-check-cache/forward-check-cache"

# Function instances of every kind of attribute value the old key distinguished: True, 1 and 1.0 (equal in Python,
# not to a check), 0.0 and -0.0, None, strings, tuples, nested tuples, an array (no key), a subclass of int (no key
# on the fast path: its type is not one of the four), and the classes of the inspection CNN with their defaults.
KEYS = """
from chainer import _type_check_cache as cache
from chainer.functions.activation.relu import ReLU
from chainer.functions.array.expand_dims import ExpandDims
from chainer.functions.connection.convolution_2d import Convolution2DFunction
from chainer.functions.connection.linear import LinearFunction
from chainer.functions.pooling.max_pooling_2d import MaxPooling2D
import enum


class Small(enum.IntEnum):
    ONE = 1


values = [True, False, 1, 0, 1.0, 0.0, -0.0, None, "on", "", (1, 2), (1, (2, 3)), (True,), Small.ONE,
          numpy.zeros(2), 2 ** 70]
functions = [ReLU(), ReLU(use_cudnn=False), Convolution2DFunction(1, 1), Convolution2DFunction(2, 0, cover_all=True),
             MaxPooling2D(2), MaxPooling2D(3, 1, 1), LinearFunction()]
for a in values:
    for b in values[:8]:
        f = ExpandDims(0)  # its check reads self.axis: the key holds the attributes
        f.use_cudnn, f.extra = a, b
        functions.append(f)
odd = ReLU()
odd.extra = numpy.zeros(2)  # no key from the attributes; ReLU's check never reads them
functions.append(odd)
inputs = [(numpy.zeros((1, 3, 4, 4), "f"),), (numpy.zeros((1, 3, 4, 4), "d"),), (numpy.zeros((2, 3), "f"),)]
calls = [(f, x) for f in functions for x in inputs]


def old_key(function, in_data):
    # the key as forward-check-cache made it: (class, arrays, ((name, (type, value)), ...))
    if not type(function).__module__.startswith("chainer."):
        return None
    try:
        state = tuple([(n, cache._plain(v)) for n, v in function.__dict__.items()])
    except cache._NotPlain:
        return None
    arrays = tuple((type(x), x.shape, x.dtype.char) for x in in_data)
    return type(function), arrays, state


def expected_key(function, in_data):
    if cache._never_names_its_instance(type(function).check_type_forward):
        return type(function), tuple((type(x), x.shape, x.dtype.char) for x in in_data)
    return old_key(function, in_data)


new = [cache.key(f, x) for f, x in calls]
old = [expected_key(f, x) for f, x in calls]
same_none = all((a is None) == (b is None) for a, b in zip(new, old))
n = len(calls)
same_classes = all((new[i] == new[j]) == (old[i] == old[j])
                   for i in range(n) for j in range(n) if new[i] is not None and new[j] is not None)
fast = sum(1 for k in new if k is not None and len(k) == 5)
short = sum(1 for k in new if k is not None and len(k) == 2)
print(json.dumps({"same_none": same_none, "same_classes": same_classes, "fast": fast, "short": short,
                  "keys": sum(k is not None for k in new), "calls": n}))
"""


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> ChainerTrees:
    return chainer_trees(tmp_path_factory.mktemp("chainer-key"), STEP)


def test_equal_keys_exactly_where_the_old_keys_were_equal(trees: ChainerTrees) -> None:
    got = run_chainer(trees, trees.patched, KEYS)
    assert got["same_none"] and got["same_classes"], got
    assert got["fast"] > 50 and got["keys"] > got["fast"] + got["short"], got  # all three forms were exercised
    assert got["short"] == 8 * 3, got  # ReLU, the convolutions, the poolings, LinearFunction: their checks read no self



def test_batch1_budget_splits_every_layer_on_the_cpu(trees: ChainerTrees, tmp_path: Path) -> None:
    """bench/gpu/chainer_b1_budget.py's dry run on NumPy: the 11 layers of the inference, each timed whole, without
    its forward body and without the type check, no part failing."""
    paths = [str(trees.patched), *([str(trees.deps)] if trees.deps else [])]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINER_")}
    env["PYTHONPATH"] = os.pathsep.join(paths)
    out = tmp_path / "budget.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu" / "chainer_b1_budget.py"), "--cpu", "--iters",
                           "5", "--rounds", "1", "--json", str(out)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    layers = [r["name"] for r in rows if r["group"] == "layer"]
    assert layers == ["conv1", "relu1", "max_pool1", "conv2", "relu2", "max_pool2", "conv3", "relu3", "max_pool3",
                      "average_pool", "linear"]
    assert {r["group"] for r in rows} == {"layer", "machinery", "machinery_no_check", "forward"}
    assert not any("error" in r for r in rows)
