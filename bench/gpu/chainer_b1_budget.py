#!/usr/bin/env python3
"""Where the host time of a batch-1 inference goes: the inspection CNN, layer by layer, each layer split in parts.

    PYTHONPATH=DIR python3 bench/gpu/chainer_b1_budget.py [--rounds 7] [--iters 300] [--json FILE]
    python3 bench/gpu/chainer_b1_budget.py --torch [--json FILE]     # the same layers in torch (no DIR)

DIR is a `pip install --target` folder of a Chainer 1.24 wheel built by lgpatch. Everything is timed as enqueue
throughput in one process (no synchronisation inside a loop of --iters calls: at batch 1 the kernels finish before
the host issues the next, so the time per call is the host's), the median of --rounds loops, in µs per call:

1. `inference`: the whole inference as chainer_speed.py's `inspection_infer_b1` runs it (and with type checks off).
2. Per layer (the 11 Function applications of one inference, on the inputs that layer sees in it):
   - `layer`: the call as the model makes it (link or `F.*` wrapper, the Function made and applied);
   - `machinery`: the same call with the Function class's `forward` replaced by one returning the output it
     computed before: everything but the forward body (the wrapper, the Function's construction, the argument
     type check, `Function.__call__`'s bookkeeping, the output Variable);
   - `machinery_no_check`: the same with `Function.type_check_enable` off;
   - `forward`: `layer` - `machinery`, the forward body (CuPy, cuDNN, cuBLAS calls and their Python).
3. Library parts, alone: what each forward body calls (`cupy.empty`, the cuDNN descriptors as the forward asks for
   them, the graph-API convolution, cudnnAddTensor, cudnnActivationForward, cudnnPoolingForward, the linear layer's
   `dot` and bias add), and pieces of the machinery (a Variable, the type-check key, the device context).
4. `--torch` (its own process): the torch model's layers under `torch.no_grad()` (as the bench's torch side), so
   each Chainer layer has its torch counterpart in the same units. A pure-Python loop is timed in both processes
   (`host_python_loop`): it shows whether the two processes ran on an equally fast host.

Writes a JSON report (--json) and prints one line per row. About 20 s on an H200 host.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chainer_cudnn_probe import _median_ms  # enqueue throughput, timed as the probe times it

Row = dict[str, Any]


def _median_us(step: Callable[[], object], sync: Callable[[], None], iters: int, rounds: int) -> float:
    return round(_median_ms(step, sync, iters, rounds, sync_each=False) * 1e3, 2)


def _python_loop() -> None:
    total = 0
    for i in range(200):
        total += i
    {"a": total}.get("a")


class _Timer:
    def __init__(self, sync: Callable[[], None], iters: int, rounds: int) -> None:
        self.sync, self.iters, self.rounds, self.rows = sync, iters, rounds, []

    def row(self, group: str, name: str, step: Callable[[], object], **extra: Any) -> float:
        try:
            us = _median_us(step, self.sync, self.iters, self.rounds)
        except Exception as exc:  # one failing part must not cost the rest of the call
            self.rows.append({"group": group, "name": name, "error": repr(exc)[:300]})
            print(json.dumps(self.rows[-1]), flush=True)
            return float("nan")
        self.rows.append({"group": group, "name": name, "us": us, **extra})
        print(json.dumps(self.rows[-1]), flush=True)
        return us


def _record_applications(model: Any, x: Any) -> list[tuple[Any, tuple, tuple]]:
    """Runs the model once and returns each Function applied: (class, input Variables, output arrays)."""
    from chainer import function

    seen: list[tuple[Any, tuple, tuple]] = []
    original = function.Function.__call__

    def recording(self: Any, *inputs: Any) -> Any:
        out = original(self, *inputs)
        outs = out if isinstance(out, tuple) else (out,)
        seen.append((type(self), inputs, tuple(o.data for o in outs)))
        return out

    function.Function.__call__ = recording
    try:
        model(x)
    finally:
        function.Function.__call__ = original
    return seen


def _layer_steps(model: Any, F: Any) -> list[tuple[str, Callable[[Any], object]]]:
    steps: list[tuple[str, Callable[[Any], object]]] = []
    for i, conv in enumerate((model.c1, model.c2, model.c3), start=1):
        steps += [(f"conv{i}", conv), (f"relu{i}", F.relu), (f"max_pool{i}", lambda v: F.max_pooling_2d(v, 2))]
    steps += [("average_pool", lambda v: F.average_pooling_2d(v, v.shape[2])), ("linear", model.fc)]
    return steps


def _time_layers(timer: _Timer, model: Any, x: Any) -> None:
    import chainer
    import chainer.functions as F

    applied = _record_applications(model, x)
    steps = _layer_steps(model, F)
    assert len(applied) == len(steps), (len(applied), len(steps))
    for (name, call), (cls, inputs, outputs) in zip(steps, applied):
        def step(call: Callable[[Any], object] = call, v: Any = inputs[0]) -> object:
            return call(v)
        layer = timer.row("layer", name, step, function=cls.__name__, input_shape=list(inputs[0].data.shape))
        saved = cls.__dict__.get("forward")
        cls.forward = lambda self, in_data, _o=outputs: _o
        try:
            machinery = timer.row("machinery", name, step)
            chainer.Function.type_check_enable = False
            timer.row("machinery_no_check", name, step)
        finally:
            chainer.Function.type_check_enable = True
            if saved is None:
                del cls.forward
            else:
                cls.forward = saved
        timer.rows.append({"group": "forward", "name": name, "us": round(layer - machinery, 2)})
        print(json.dumps(timer.rows[-1]), flush=True)


def _time_library(timer: _Timer, model: Any, x: Any) -> None:
    from chainer import _type_check_cache, cuda, variable
    from chainer.functions.activation import relu as relu_module
    from chainer.functions.connection import convolution_2d as conv_module
    from chainer.functions.pooling import max_pooling_2d as pool_module
    from cupy import cudnn

    cupy = cuda.cupy
    applied = _record_applications(model, x)
    conv_in = applied[3][1][0].data  # conv2's input: 1x32x112x112
    conv_out = applied[3][2][0]
    W, b = model.c2.W.data, model.c2.b.data
    handle = cudnn.get_handle()
    one = cudnn._lg_scalar(1, "f")
    y_desc = cudnn.create_tensor_descriptor(conv_out)
    bias_desc = cudnn.create_tensor_descriptor(b[None, :, None, None])
    limit = conv_module._lg_workspace_limit()
    graph = getattr(conv_module, "_cudnn_graph", None)
    timer.row("library", "conv2 cupy.empty(y)", lambda: cupy.empty(conv_out.shape, dtype=conv_out.dtype))
    timer.row("library", "conv2 ascontiguousarray x, W, b",
              lambda: (cupy.ascontiguousarray(conv_in), cupy.ascontiguousarray(W), cupy.ascontiguousarray(b)))
    timer.row("library", "conv2 five descriptors as forward_gpu asks",
              lambda: (cudnn.create_tensor_descriptor(conv_in), cudnn.create_tensor_descriptor(conv_out),
                       cudnn.create_filter_descriptor(W),
                       cudnn.create_convolution_descriptor((1, 1), (1, 1), conv_in.dtype),
                       cudnn.create_tensor_descriptor(b[None, :, None, None])))
    timer.row("library", "conv2 workspace limit", conv_module._lg_workspace_limit)
    if graph is not None:
        timer.row("library", "conv2 _cudnn_graph.forward",
                  lambda: graph.forward(cupy, conv_module._cudnn_version, handle, conv_in, W, conv_out, (1, 1),
                                        (1, 1), limit))
    timer.row("library", "conv2 cudnn.add_tensor (bias)",
              lambda: cudnn.add_tensor(handle, one.data, bias_desc.value, b.data.ptr, one.data, y_desc.value,
                                       conv_out.data.ptr))
    relu_in = applied[1][1][0].data
    timer.row("library", "relu1 cudnn.activation_forward",
              lambda: cudnn.activation_forward(relu_in, relu_module._mode))
    timer.row("library", "relu1 cupy.empty_like", lambda: cupy.empty_like(relu_in))
    timer.row("library", "relu1 cupy.maximum(x, 0)", lambda: cupy.maximum(relu_in, 0))
    pool_in = applied[2][1][0].data
    pool = pool_module.MaxPooling2D(2)
    timer.row("library", "max_pool1 MaxPooling2D.forward_gpu (one instance)", lambda: pool.forward_gpu((pool_in,)))
    timer.row("library", "max_pool1 create_pool_desc", pool.create_pool_desc)
    fc_in = applied[10][1][0].data
    fc_x = fc_in.reshape(len(fc_in), -1)
    fc_W, fc_b = model.fc.W.data, model.fc.b.data
    fc_y = fc_x.dot(fc_W.T)
    timer.row("library", "linear x.dot(W.T)", lambda: fc_x.dot(fc_W.T))
    timer.row("library", "linear y += b", lambda: fc_y.__iadd__(fc_b))
    timer.row("library", "linear x.reshape(n, -1)", lambda: fc_in.reshape(len(fc_in), -1))
    relu_fn = relu_module.ReLU()
    in_data = (relu_in,)
    timer.row("machinery part", "Variable(y, volatile=on)", lambda: variable.Variable(relu_in, volatile="on"))
    timer.row("machinery part", "type-check key (ReLU)", lambda: _type_check_cache.key(relu_fn, in_data))
    timer.row("machinery part", "ReLU() construction", relu_module.ReLU)

    def device_context() -> None:
        with cuda.get_device_from_array(relu_in):
            pass
    timer.row("machinery part", "with get_device_from_array(x)", device_context)
    timer.row("machinery part", "host_python_loop", _python_loop)


def _time_switches(timer: _Timer, model: Any, x: Any) -> None:
    """The inference and the layer a step changes, with the step's run-time switch off and on, where the build has
    the step (chainer-linear-cublas: `_lg_enabled`; chainer-cudnn-graph-conv: `enabled`)."""
    import importlib

    fc_in = _record_applications(model, x)[10][1][0]
    switches = [("chainer.functions.connection.linear", "_lg_enabled", "linear", lambda: model.fc(fc_in)),
                ("chainer._cudnn_graph", "enabled", "conv1", lambda: model.c1(x))]
    for module_name, flag, label, layer in switches:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if not hasattr(module, flag):
            continue
        for value in (False, True):
            setattr(module, flag, value)
            timer.row("switch", f"{module_name}.{flag}={value}: inference", lambda: model(x))
            timer.row("switch", f"{module_name}.{flag}={value}: {label}", layer)
        setattr(module, flag, True)


def chainer_budget(iters: int, rounds: int, on_cpu: bool = False) -> list[Row]:
    import chainer
    import numpy
    from _speed_workloads import chainer_models
    from chainer import cuda

    Inspection, _ = chainer_models()
    model = Inspection()
    rng = numpy.random.RandomState(0)
    x0 = rng.randn(1, 3, 224, 224).astype("f")
    if on_cpu:  # a dry run of the layer split on NumPy (no GPU): the script's own check, not a figure
        timer = _Timer(lambda: None, iters, rounds)
        x = chainer.Variable(x0[:, :, :32, :32], volatile="on")
        _time_layers(timer, model, x)
        return timer.rows
    model.to_gpu()
    x = chainer.Variable(cuda.to_gpu(x0), volatile="on")
    timer = _Timer(cuda.Stream.null.synchronize, iters, rounds)
    timer.row("inference", "inspection_infer_b1", lambda: model(x))
    chainer.Function.type_check_enable = False
    timer.row("inference", "inspection_infer_b1 type checks off", lambda: model(x))
    chainer.Function.type_check_enable = True
    _time_layers(timer, model, x)
    _time_library(timer, model, x)
    _time_switches(timer, model, x)
    return timer.rows


def torch_budget(iters: int, rounds: int) -> list[Row]:
    import numpy
    import torch
    import torch.nn.functional as tf
    from _speed_workloads import torch_cases

    rng = numpy.random.RandomState(0)
    infer = torch_cases(rng)["inspection_infer_b1"]()
    timer = _Timer(torch.cuda.synchronize, iters, rounds)
    timer.row("inference", "inspection_infer_b1 (torch)", infer)
    gen = torch.Generator(device="cuda").manual_seed(0)
    convs = [torch.nn.Conv2d(i, o, 3, padding=1).cuda() for i, o in ((3, 32), (32, 64), (64, 128))]
    fc = torch.nn.Linear(128, 2).cuda()
    h = torch.randn(1, 3, 224, 224, device="cuda", generator=gen)
    with torch.no_grad():
        for i, conv in enumerate(convs, start=1):
            x_in = h
            timer.row("layer", f"conv{i}", lambda c=conv, v=x_in: c(v))
            h = conv(h)
            y = h
            timer.row("layer", f"relu{i}", lambda v=y: tf.relu(v))
            h = tf.relu(h)
            r = h
            timer.row("layer", f"max_pool{i}", lambda v=r: tf.max_pool2d(v, 2))
            h = tf.max_pool2d(h, 2)
        p = h
        timer.row("layer", "average_pool", lambda: tf.avg_pool2d(p, p.shape[2]))
        flat = tf.avg_pool2d(p, p.shape[2]).flatten(1)
        timer.row("layer", "linear", lambda: fc(flat))
    timer.row("machinery part", "host_python_loop", _python_loop)
    return timer.rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--torch", action="store_true", help="time the torch model's layers instead")
    parser.add_argument("--cpu", action="store_true", help="a dry run of the layer split on NumPy (no GPU)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.torch:
        rows = torch_budget(args.iters, args.rounds)
    else:
        rows = chainer_budget(args.iters, args.rounds, on_cpu=args.cpu)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
