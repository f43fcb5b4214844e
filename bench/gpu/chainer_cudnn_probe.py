#!/usr/bin/env python3
"""Chainer 1.24's cuDNN knobs on the GPU machine: the workspace limit's effect, and each layer's host cost at batch 1.

    PYTHONPATH=DIR python bench/gpu/chainer_cudnn_probe.py [--workspaces-mib 8 32 128 512] [--json FILE]

DIR is a `pip install --target` folder of the patched Chainer wheel. Parts:

1. Workspace: `chainer.cuda.set_max_workspace_size` is the one cuDNN setting Chainer 1.24 has (no autotune: it asks
   cuDNN's heuristics for the fastest algorithm that fits the limit; the default is 8 MiB). For each limit, the
   inspection CNN's inference at batch 1 and 32 and the seed's 7x7 conv step (medians of --rounds timed batches)
   and the forward algorithm each convolution got (chainer-cudnn-algo-cache's table, keyed by the limit).
2. Host cost per layer at batch 1: each layer of the inspection CNN alone, with and without cuDNN where Chainer
   1.24 offers both (`use_cudnn=`), timed as enqueue throughput (no synchronisation inside the loop: kernels this
   small finish before the host issues the next, so the wall time per call is the host's).
3. One batch-1 convolution's host time split: Chainer's whole call, the four descriptors, cuDNN's
   convolutionForward and addTensor alone.
4. `--parts algos`: every cuDNN forward algorithm (0-7) on the inspection CNN's three convolutions at batch 1
   and 32: workspace, host (enqueue) and synchronized µs per call, and the output's difference from algorithm 1's.
5. `--parts torch` (a process of its own, without DIR on PYTHONPATH: torch and CuPy 1.24 each load their own
   CUDA libraries): the same batch-1 layers in torch, timed the same way, i.e. the host floor torch's dispatcher
   and cuDNN frontend reach for the same kernels.

`--parts` picks among workspace, layers, conv, algos, torch (default: the first three).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _speed_workloads import chainer_cases

MIB = 2**20


def _median_ms(step, sync, iters: int, rounds: int, sync_each: bool) -> float:
    for _ in range(10):
        step()
    sync()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iters):
            step()
            if sync_each:
                sync()
        sync()
        times.append((time.perf_counter() - start) / iters * 1e3)
    return statistics.median(times)


def _timed_row(label, steps: dict, sync, rounds: int) -> dict:
    """Median ms of each inference (batch 1 synchronized every iteration, as chainer_speed.py times it)."""
    row: dict = {"workspace_mib": label}
    for name, step in steps.items():
        b1 = name.endswith("b1")
        row[name] = round(_median_ms(step, sync, 200 if b1 else 40, rounds, sync_each=b1), 4)
    return row


def workspace_sweep(limits_mib: list[int], rounds: int) -> list[dict]:
    import numpy
    from chainer import cuda
    from chainer.functions.connection import convolution_2d

    sync = cuda.Stream.null.synchronize
    cases = chainer_cases(numpy.random.RandomState(0))
    steps = {name: cases[name]() for name in ("inspection_infer_b1", "inspection_infer_b32")}
    rows = []
    if hasattr(cuda, "_lg_workspace_size_set"):  # chainer-cudnn-workspace: its default, before any set call
        rows.append(_timed_row("default", steps, sync, rounds))
        rows[-1]["workspace_bytes"] = sorted(f"x{list(key[2])} {key[1]} algo {key[-1]}: {size}"
                                             for key, size in convolution_2d._lg_workspace_sizes.items())
        print(json.dumps(rows[-1]), flush=True)
    for limit in limits_mib:
        cuda.set_max_workspace_size(limit * MIB)
        rows.append(_timed_row(limit, steps, sync, rounds))
        rows[-1]["forward_algorithms"] = sorted(
            f"x{list(key[2])} W{list(key[3])}: algo {algo}"
            for key, algo in convolution_2d._lg_algorithms.items()
            if key[1] == "fwd" and key[-1] == limit * MIB)
        print(json.dumps(rows[-1]), flush=True)
    cuda.set_max_workspace_size(8 * MIB)
    return rows


def layer_host_costs(rounds: int) -> list[dict]:
    import chainer
    import chainer.functions as F
    import chainer.links as L
    import numpy
    from chainer import cuda

    sync = cuda.Stream.null.synchronize
    rng = numpy.random.RandomState(0)
    x = chainer.Variable(cuda.to_gpu(rng.randn(1, 32, 224, 224).astype("f")), volatile="on")
    conv_cudnn = L.Convolution2D(32, 64, 3, pad=1)
    conv_cudnn.to_gpu()
    conv_im2col = L.Convolution2D(32, 64, 3, pad=1, use_cudnn=False)
    conv_im2col.to_gpu()
    small = chainer.Variable(cuda.to_gpu(rng.randn(1, 128, 28, 28).astype("f")), volatile="on")
    layers = {
        "conv3x3 32->64 224x224 cuDNN": lambda: conv_cudnn(x),
        "conv3x3 32->64 224x224 im2col": lambda: conv_im2col(x),
        "relu 1x32x224x224 cuDNN": lambda: F.relu(x),
        "relu 1x32x224x224 CuPy": lambda: F.relu(x, use_cudnn=False),
        "max_pool 2 1x32x224x224 cuDNN": lambda: F.max_pooling_2d(x, 2),
        "max_pool 2 1x32x224x224 CuPy": lambda: F.max_pooling_2d(x, 2, use_cudnn=False),
        "relu 1x128x28x28 cuDNN": lambda: F.relu(small),
        "relu 1x128x28x28 CuPy": lambda: F.relu(small, use_cudnn=False),
        "max_pool 2 1x128x28x28 cuDNN": lambda: F.max_pooling_2d(small, 2),
        "max_pool 2 1x128x28x28 CuPy": lambda: F.max_pooling_2d(small, 2, use_cudnn=False),
        "average_pool 28 1x128x28x28 cuDNN": lambda: F.average_pooling_2d(small, 28),
        "average_pool 28 1x128x28x28 CuPy": lambda: F.average_pooling_2d(small, 28, use_cudnn=False),
        "cupy.empty 1x64x224x224": lambda: cuda.cupy.empty((1, 64, 224, 224), dtype="f"),
    }
    rows = []
    for name, step in layers.items():
        enqueue = _median_ms(step, sync, 300, rounds, sync_each=False)
        synced = _median_ms(step, sync, 300, rounds, sync_each=True)
        rows.append({"layer": name, "enqueue_us": round(enqueue * 1e3, 1), "synchronized_us": round(synced * 1e3, 1)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def conv_call_parts(rounds: int) -> list[dict]:
    """Where one batch-1 cuDNN convolution's host time goes: Chainer's whole call, then its parts alone (the four
    descriptors, cuDNN's convolutionForward, cuDNN's addTensor for the bias), as enqueue throughput."""
    import chainer
    import chainer.links as L
    import numpy
    from chainer import cuda
    from cupy import cudnn

    libcudnn = cudnn.cudnn
    sync = cuda.Stream.null.synchronize
    rng = numpy.random.RandomState(0)
    x = cuda.to_gpu(rng.randn(1, 32, 112, 112).astype("f"))
    conv = L.Convolution2D(32, 64, 3, pad=1)
    conv.to_gpu()
    vx = chainer.Variable(x, volatile="on")
    y = conv(vx).data
    handle = cudnn.get_handle()
    descs = {"x": cudnn.create_tensor_descriptor(x), "y": cudnn.create_tensor_descriptor(y),
             "W": cudnn.create_filter_descriptor(conv.W.data),
             "conv": cudnn.create_convolution_descriptor((1, 1), (1, 1), x.dtype),
             "b": cudnn.create_tensor_descriptor(conv.b.data[None, :, None, None])}
    one, zero = numpy.array(1, dtype="f").ctypes, numpy.array(0, dtype="f").ctypes
    workspace = cuda.cupy.empty((8 << 20,), dtype="b")

    def forward():
        libcudnn.convolutionForward(handle, one.data, descs["x"].value, x.data.ptr, descs["W"].value,
                                    conv.W.data.data.ptr, descs["conv"].value, 1, workspace.data.ptr, 8 << 20,
                                    zero.data, descs["y"].value, y.data.ptr)

    def bias():
        cudnn.add_tensor(handle, one.data, descs["b"].value, conv.b.data.data.ptr, one.data, descs["y"].value,
                         y.data.ptr)

    def descriptors():
        cudnn.create_tensor_descriptor(x), cudnn.create_tensor_descriptor(y)
        cudnn.create_filter_descriptor(conv.W.data), cudnn.create_convolution_descriptor((1, 1), (1, 1), x.dtype)

    parts = {"Chainer L.Convolution2D call": lambda: conv(vx), "four descriptors made and freed": descriptors,
             "cudnnConvolutionForward (algo 1) alone": forward, "cudnnAddTensor (bias) alone": bias}
    rows = []
    for name, step in parts.items():
        rows.append({"part": name, "enqueue_us": round(_median_ms(step, sync, 500, rounds, sync_each=False) * 1e3, 1)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


INSPECTION_CONVS = ((3, 32, 224), (32, 64, 112), (64, 128, 56))  # (in, out, side) of its three 3x3 convolutions


def _algo_row(libcudnn, handle, tensors: dict, descs: dict, algo: int, rounds: int) -> dict:
    """One forward algorithm on one problem: its workspace, host (enqueue) and synchronized µs, its output's
    largest difference from algorithm 1's (Chainer's usual heuristic answer on the H200)."""
    from chainer import cuda

    x, w, y = tensors["x"], tensors["W"], tensors["y"]
    args = (handle, descs["x"].value, descs["W"].value, descs["conv"].value, descs["y"].value)
    try:
        size = libcudnn.getConvolutionForwardWorkspaceSize(*args, algo)
    except Exception as exc:  # cuDNN answers NOT_SUPPORTED for algorithms that do not take this problem
        return {"algo": algo, "error": type(exc).__name__ + ": " + str(exc)[:80]}
    workspace = cuda.cupy.empty((max(size, 1),), dtype="b")
    one, zero = tensors["one"], tensors["zero"]

    def forward():
        libcudnn.convolutionForward(handle, one.data, descs["x"].value, x.data.ptr, descs["W"].value, w.data.ptr,
                                    descs["conv"].value, algo, workspace.data.ptr, size, zero.data,
                                    descs["y"].value, y.data.ptr)

    sync = cuda.Stream.null.synchronize
    try:
        enqueue = _median_ms(forward, sync, 300, rounds, sync_each=False)
        synced = _median_ms(forward, sync, 300, rounds, sync_each=True)
        forward()
    except Exception as exc:  # some algorithms report a workspace size and then refuse the problem
        return {"algo": algo, "workspace_bytes": int(size), "error": type(exc).__name__ + ": " + str(exc)[:80]}
    diff = float(abs(y - tensors["reference"]).max()) if "reference" in tensors else 0.0
    return {"algo": algo, "workspace_bytes": int(size), "enqueue_us": round(enqueue * 1e3, 1),
            "synchronized_us": round(synced * 1e3, 1), "max_abs_diff_vs_algo1": diff}


def forward_algorithms(rounds: int, batches: tuple[int, ...] = (1, 32)) -> list[dict]:
    """Every cuDNN forward algorithm on the inspection CNN's convolutions: whether a cheaper host call exists for
    the same GPU work (cuDNN 9 runs the legacy API through its graph engine, ~50 µs of host time per call)."""
    import numpy
    from chainer import cuda
    from cupy import cudnn

    libcudnn, handle = cudnn.cudnn, cudnn.get_handle()
    rng = numpy.random.RandomState(0)
    rows = []
    for batch in batches:
        for cin, cout, side in INSPECTION_CONVS:
            tensors = {"x": cuda.to_gpu(rng.randn(batch, cin, side, side).astype("f")),
                       "W": cuda.to_gpu(rng.randn(cout, cin, 3, 3).astype("f")),
                       "y": cuda.cupy.empty((batch, cout, side, side), dtype="f"),
                       "one": numpy.array(1, dtype="f").ctypes, "zero": numpy.array(0, dtype="f").ctypes}
            descs = {"x": cudnn.create_tensor_descriptor(tensors["x"]),
                     "y": cudnn.create_tensor_descriptor(tensors["y"]),
                     "W": cudnn.create_filter_descriptor(tensors["W"]),
                     "conv": cudnn.create_convolution_descriptor((1, 1), (1, 1), numpy.dtype("f"))}
            problem = f"b{batch} {cin}->{cout} {side}x{side}"
            first = _algo_row(libcudnn, handle, tensors, descs, 1, rounds)
            tensors["reference"] = tensors["y"].copy()
            for algo in range(8):
                row = first if algo == 1 else _algo_row(libcudnn, handle, tensors, descs, algo, rounds)
                rows.append({"problem": problem, **row})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def torch_layer_host_costs(rounds: int) -> list[dict]:
    """Part 1's batch-1 layers in torch (inference mode, the image's torch), as enqueue throughput."""
    import torch
    import torch.nn.functional as tf

    sync = torch.cuda.synchronize
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(1, 32, 224, 224, device="cuda", generator=gen)
    small = torch.randn(1, 128, 28, 28, device="cuda", generator=gen)
    conv = torch.nn.Conv2d(32, 64, 3, padding=1).cuda()
    layers = {
        "conv3x3 32->64 224x224 torch": lambda: conv(x),
        "relu 1x32x224x224 torch": lambda: tf.relu(x),
        "max_pool 2 1x32x224x224 torch": lambda: tf.max_pool2d(x, 2),
        "relu 1x128x28x28 torch": lambda: tf.relu(small),
        "max_pool 2 1x128x28x28 torch": lambda: tf.max_pool2d(small, 2),
        "average_pool 28 1x128x28x28 torch": lambda: tf.avg_pool2d(small, 28),
        "torch.empty 1x64x224x224": lambda: torch.empty((1, 64, 224, 224), device="cuda"),
    }
    rows = []
    with torch.inference_mode():
        for name, step in layers.items():
            enqueue = _median_ms(step, sync, 300, rounds, sync_each=False)
            synced = _median_ms(step, sync, 300, rounds, sync_each=True)
            rows.append({"layer": name, "enqueue_us": round(enqueue * 1e3, 1),
                         "synchronized_us": round(synced * 1e3, 1)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workspaces-mib", type=int, nargs="+", default=[8, 32, 128, 512, 2048])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parts", nargs="+", choices=["workspace", "layers", "conv", "algos", "torch"],
                        default=["workspace", "layers", "conv"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    parts = {"workspace": lambda: workspace_sweep(args.workspaces_mib, args.rounds),
             "layers": lambda: layer_host_costs(args.rounds), "conv": lambda: conv_call_parts(args.rounds),
             "algos": lambda: forward_algorithms(args.rounds),
             "torch": lambda: torch_layer_host_costs(args.rounds)}
    report = {name: parts[name]() for name in args.parts}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
