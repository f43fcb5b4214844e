"""chainer-call-overhead on the real Chainer 1.24.0 sdist, run on the CPU (NumPy) from the patched work tree.

Every case runs in both trees — the whole recipe, and the same ledger with this step reverted (Chainer as it was) —
and what it prints must be the same: trained weights to the bit, every hook call in order, debug mode's NaN error,
volatile and no-backprop graphs, flag identities and errors. The Python-call count per inference shows the step
did something (a count, not a time).
"""

from __future__ import annotations

import pytest
from helpers import Runner, git
from helpers.chainer_cpu import ChainerTrees, assert_gated_like_the_speed_steps, chainer_trees, run_chainer

pytestmark = [pytest.mark.integration]

STEP = "chainer-call-overhead/call-fast-paths"


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> ChainerTrees:
    return chainer_trees(tmp_path_factory.mktemp("chainer-call"), STEP)


def same_in_both(trees: ChainerTrees, code: str) -> dict:
    patched = run_chainer(trees, trees.patched, code)
    before = run_chainer(trees, trees.without_step, code)
    assert patched == before
    return patched


def test_step_is_gated_like_the_other_speed_steps(lgpatch: Runner) -> None:
    assert_gated_like_the_speed_steps(lgpatch, STEP)


def test_applies_strictly_after_the_type_check_cache_touching_flag_and_function(trees: ChainerTrees) -> None:
    applied = list(trees.applied)
    assert applied.index(STEP) == applied.index("chainer-type-check-cache/forward-check-cache") + 1
    assert applied[-6:] == ["cupy-reduction-grid/reduction-split-grid", "cupy-reduction-layout/reduction-layout",
                            "cupy-reduction-odometer/reduction-odometer",
                            "cupy-reduction-odometer/reduction-split-waves", "chainer-layer-lean/layer-lean",
                            "chainer-host-inline/host-inline"]
    commit = git(trees.patched, "log", "--format=%H", "--grep", f"lgpatch: {STEP}$")
    files = git(trees.patched, "show", "--name-only", "--format=", commit).split()
    assert sorted(files) == ["chainer/flag.py", "chainer/function.py"]


# A small CNN (conv, relu, max-pool, linear, softmax cross-entropy) trained three MomentumSGD steps; printed are
# the loss bits, every parameter's and gradient's bytes (hex digests) and the graph's creators.
TRAIN = """
import hashlib
import chainer.links as L
from chainer import optimizers


class Net(chainer.Chain):
    def __init__(self):
        super(Net, self).__init__(conv=L.Convolution2D(3, 4, 3, pad=1), fc=L.Linear(4 * 3 * 3, 5))

    def __call__(self, x):
        return self.fc(F.max_pooling_2d(F.relu(self.conv(x)), 2))


numpy.random.seed(3)
model = Net()
opt = optimizers.MomentumSGD(lr=0.1)
opt.setup(model)
x = numpy.random.randn(4, 3, 6, 6).astype('f')
t = numpy.array([0, 3, 1, 4], 'i')
out = {"loss": [], "creators": []}
for step in range(3):
    model.cleargrads()
    loss = F.softmax_cross_entropy(model(chainer.Variable(x)), t)
    node, names = loss, []
    while node.creator is not None:
        names.append(type(node.creator).__name__)
        node = node.creator.inputs[0]
    out["creators"].append(names)
    loss.backward()
    out["loss"].append(float(loss.data).hex())
    out["grads_%d" % step] = sorted((p.name, hashlib.sha256(p.grad.tobytes()).hexdigest()) for p in model.params())
    opt.update()
out["params"] = sorted((p.name, hashlib.sha256(p.data.tobytes()).hexdigest()) for p in model.params())
print(json.dumps(out))
"""


def test_training_steps_are_bit_identical(trees: ChainerTrees) -> None:
    out = same_in_both(trees, TRAIN)
    assert len(set(out["loss"])) == 3, "the optimizer steps should change the loss"
    assert out["creators"][0] == ["SoftmaxCrossEntropy", "LinearFunction", "MaxPooling2D", "ReLU",
                                  "Convolution2DFunction"]


# A FunctionHook subclass recording every call, registered globally (`with`) and locally (add_hook); and a user
# Function whose forward registers a global hook itself: the hook's forward_postprocess must still see that call.
HOOKS = """
events = []


class Recorder(chainer.function.FunctionHook):
    def __init__(self, name):
        self.name = name

    def forward_preprocess(self, function, in_data):
        events.append([self.name, 'fwd-pre', type(function).__name__, len(in_data)])

    def forward_postprocess(self, function, in_data):
        events.append([self.name, 'fwd-post', type(function).__name__, len(in_data)])

    def backward_preprocess(self, function, in_data, out_grad):
        events.append([self.name, 'bwd-pre', type(function).__name__, len(out_grad)])

    def backward_postprocess(self, function, in_data, out_grad):
        events.append([self.name, 'bwd-post', type(function).__name__, len(out_grad)])


late = Recorder('late')


class RegistersDuringForward(chainer.Function):
    def forward(self, inputs):
        late.__enter__()
        return inputs[0] * 2,


x = chainer.Variable(numpy.arange(6, dtype='f').reshape(2, 3))
with Recorder('global'):
    y = F.sum(F.relu(x) * 3)
    y.backward()
local = Recorder('local')
f = F.activation.relu.ReLU()
f.add_hook(local)
z = F.sum(f(x))
z.backward()
events.append('none registered')
F.sum(F.tanh(x)).backward()
w = RegistersDuringForward()(x)
late.__exit__()
F.exp(x)
print(json.dumps({"events": events, "hooks_left": len(chainer.get_function_hooks())}))
"""


def test_function_hooks_see_every_call_as_before(trees: ChainerTrees) -> None:
    out = same_in_both(trees, HOOKS)
    events = out["events"]
    assert ["global", "fwd-pre", "ReLU", 1] in events and ["global", "bwd-post", "Sum", 1] in events
    assert ["local", "fwd-post", "ReLU", 1] in events and ["local", "bwd-pre", "ReLU", 1] in events
    after = events[events.index("none registered") + 1:]
    assert after == [["late", "fwd-post", "RegistersDuringForward", 1]], after
    assert out["hooks_left"] == 0


DEBUG = """
out = {}
chainer.set_debug(True)
nan = numpy.array([1.0, float('nan')], 'f')
out["nan"] = outcome(lambda: F.identity(nan))
out["finite"] = outcome(lambda: F.identity(numpy.ones(2, 'f')))
f = F.math.identity.Identity()
f(numpy.ones(2, 'f'))
out["stack"] = f.stack is not None
chainer.set_debug(False)
out["nan_off"] = outcome(lambda: F.identity(nan))
g = F.math.identity.Identity()
g(numpy.ones(2, 'f'))
out["stack_off"] = g.stack is None
print(json.dumps(out))
"""


def test_debug_mode_still_raises_on_nan(trees: ChainerTrees) -> None:
    out = same_in_both(trees, DEBUG)
    assert out == {"nan": "RuntimeError: NaN is detected on forward computation", "finite": "ok", "stack": True,
                   "nan_off": "ok", "stack_off": True}


VOLATILE = """
from chainer import flag
a = numpy.ones((2, 2), 'f')
out = {}
for name, volatile in (('on', 'on'), ('off', 'off'), ('auto', 'auto'), ('ON', flag.ON), ('True', True),
                       ('None', None)):
    y = F.exp(chainer.Variable(a, volatile=volatile))
    out[name] = [repr(y.volatile), y.creator is not None]
with chainer.no_backprop_mode():
    y = F.exp(chainer.Variable(a, volatile='auto'))
    out["no_backprop_auto"] = [repr(y.volatile), y.creator is not None]
    y = F.exp(chainer.Variable(a, volatile='off'))
    out["no_backprop_off"] = [repr(y.volatile), y.creator is not None]
with chainer.force_backprop_mode():
    y = F.exp(chainer.Variable(a, volatile='auto'))
    out["force_backprop_auto"] = [repr(y.volatile), y.creator is not None]
out["plain_array_input"] = repr(F.exp(a).volatile)
on, off, auto = (chainer.Variable(a, volatile=v) for v in ('on', 'off', 'auto'))
out["mixed"] = outcome(lambda: on + off)
out["on_auto"] = repr((on + auto).volatile)
out["off_auto"] = repr((auto + off).volatile)
out["auto_auto"] = repr((auto + auto).volatile)


def gen(*flags):
    return (f for f in flags)


aggregate = {}
for name, flags in (("list_on_off", [flag.ON, flag.OFF]), ("tuple_off_on", (flag.OFF, flag.ON)),
                    ("gen_off_on", gen(flag.OFF, flag.ON)), ("gen_on_off", gen(flag.ON, flag.OFF)),
                    ("gen_off", gen(flag.OFF)), ("list_auto", [flag.AUTO]), ("empty", []),
                    ("strings", ['on', 'off']), ("list_off", [flag.AUTO, flag.OFF])):
    aggregate[name] = outcome(lambda: aggregate.__setitem__(name + "_value", repr(flag.aggregate_flags(flags))))
out["aggregate"] = aggregate
out["identities"] = [flag.Flag(v) is flag.Flag(w) for v, w in
                     ((flag.ON, 'on'), (flag.OFF, False), (flag.AUTO, None), ('ON', True), ('auto', flag.AUTO))]
out["equal"] = [flag.ON == 'on', flag.ON == True, flag.OFF == 'on', flag.AUTO == None, flag.ON != flag.OFF]
import copy, pickle
out["copies"] = [copy.copy(flag.ON) is flag.ON, pickle.loads(pickle.dumps(flag.AUTO)) is flag.AUTO]
out["bad"] = [outcome(lambda: flag.Flag('maybe')), outcome(lambda: bool(flag.AUTO)),
              outcome(lambda: chainer.Variable(a, volatile=2))]
print(json.dumps(out))
"""


def test_volatile_flags_and_backprop_modes_as_before(trees: ChainerTrees) -> None:
    out = same_in_both(trees, VOLATILE)
    assert out["on"] == ["ON", False] and out["off"] == ["OFF", True] and out["auto"] == ["AUTO", True]
    assert out["no_backprop_auto"] == ["AUTO", False] and out["no_backprop_off"] == ["OFF", True]
    assert out["mixed"] == "ValueError: ON and OFF flags cannot be mixed."
    assert out["aggregate"]["gen_off_on"] == "ok" and out["aggregate"]["list_on_off"].startswith("ValueError")
    assert out["aggregate"]["gen_off_on_value"] == "ON", "a generator is read as before: off seen, then gone"
    assert out["identities"] == [True] * 5 and out["copies"] == [True, True]
    assert out["bad"][0] == "KeyError: 'maybe'"


# forward's dispatch with a user Function that overrides nothing, called directly with a generator: forward_cpu
# gets what any() left of it, as before.
DISPATCH = """
seen = []


class Recording(chainer.Function):
    def forward_cpu(self, inputs):
        seen.append([type(inputs).__name__, len(list(inputs))])
        return numpy.zeros(1, 'f'),


a = numpy.ones(2, 'f')
Recording().forward((a, a))
Recording().forward(x for x in (a, a, a))
Recording()(a, a)
print(json.dumps({"seen": seen}))
"""


def test_forward_dispatch_reads_its_inputs_as_before(trees: ChainerTrees) -> None:
    assert same_in_both(trees, DISPATCH)["seen"] == [["tuple", 2], ["generator", 0], ["tuple", 2]]


CALLS = """
import chainer.links as L
numpy.random.seed(0)
conv, fc = L.Convolution2D(3, 4, 3, pad=1), L.Linear(4, 2)
x = numpy.random.rand(1, 3, 4, 4).astype('f')


def infer():
    h = F.max_pooling_2d(F.relu(conv(chainer.Variable(x, volatile='on'))), 2)
    return fc(F.average_pooling_2d(h, 2))


first = infer().data
calls = [0]


def count(frame, event, arg):
    if event == 'call':
        calls[0] += 1


sys.setprofile(count)
for _ in range(5):
    y = infer()
sys.setprofile(None)
print(json.dumps({"calls": calls[0] / 5.0, "same": bool((y.data == first).all()), "out": y.data.tolist()}))
"""


def test_fewer_python_calls_per_inference(trees: ChainerTrees) -> None:
    patched = run_chainer(trees, trees.patched, CALLS)
    before = run_chainer(trees, trees.without_step, CALLS)
    assert patched["same"] and patched["out"] == before["out"]
    # Five Functions: each saves at least Flag's nested __new__/__hash__/__eq__ calls and two six.itervalues.
    assert patched["calls"] <= before["calls"] - 5 * 8, (patched["calls"], before["calls"])
