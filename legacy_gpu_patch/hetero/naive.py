"""The seed's naive version, kept for comparison: two full model copies, one per device, one process each (spawn),
each on half the batch, merged through shared memory and held in lock-step by a barrier.

Training averages the two copies' gradients through a shared CPU buffer each step, so they stay one model (the
seed's copies drifted apart); batch-norm statistics are not merged. At batch 1 each copy gets one sample.
"""

from __future__ import annotations

import os
import queue as queue_mod
import statistics
import time
from typing import Any

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

from legacy_gpu_patch.hetero import nets
from legacy_gpu_patch.hetero.devices import DevicePair, default_cpu_threads

_TIMEOUT_S = 300.0


def _ready(q: Any) -> None:
    # Reached only after the child imported torch (this module imports it). perf_counter is CLOCK_MONOTONIC on
    # Linux, one clock for all processes, so the parent can compare it with its own.
    q.put(time.perf_counter())


def spawn_cost() -> dict[str, float]:
    """Seconds from Process.start() to a running child: bare, and having imported torch (what every spawned CUDA
    worker pays before it does anything)."""
    ctx = mp.get_context("spawn")
    t0 = time.perf_counter()
    bare = ctx.Process(target=os.getpid)
    bare.start()
    bare.join()
    bare_s = time.perf_counter() - t0
    q = ctx.Queue()
    t0 = time.perf_counter()
    child = ctx.Process(target=_ready, args=(q,))
    child.start()
    q.get(timeout=_TIMEOUT_S)
    torch_s = time.perf_counter() - t0
    child.join()
    return {"spawn_s": bare_s, "spawn_import_torch_s": torch_s}


def _share_sizes(batch: int) -> list[int]:
    return [max(1, batch // 2), max(1, batch - batch // 2)]


def _grads(params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    return [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]


def _worker(rank: int, device: str, name: str, train: bool, batch: int, steps: int, warmup: int, barrier: Any,
            grads: torch.Tensor, q: Any) -> None:
    dev = torch.device(device)
    torch.set_num_threads(default_cpu_threads() if dev.type == "cpu" else 1)
    model = nets.build(name).to(dev).train(train)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    gen = torch.Generator().manual_seed(batch)
    x = torch.randn(batch, *nets.INPUT_SHAPE, generator=gen)
    y = torch.randint(0, nets.CLASSES, (batch,), generator=gen)
    size = _share_sizes(batch)[rank]
    start = 0 if rank == 0 or batch == 1 else batch - size
    x, y = x[start:start + size], y[start:start + size]
    pair = DevicePair.of(accel=dev)
    q.put(("ready", rank, time.perf_counter()))
    times = []
    for i in range(warmup + steps):
        barrier.wait(_TIMEOUT_S)
        t0 = time.perf_counter()
        if train:
            opt.zero_grad(set_to_none=True)
            out = model(x.to(dev))
            F.cross_entropy(out, y.to(dev)).backward()
            grads[rank].copy_(torch.nn.utils.parameters_to_vector(_grads(params)).cpu())
            barrier.wait(_TIMEOUT_S)  # both halves merged in shared memory
            mean = grads.mean(0).to(dev)
            torch.nn.utils.vector_to_parameters(mean, _grads(params))
            opt.step()
        else:
            with torch.no_grad():
                model(x.to(dev)).cpu()
        pair.synchronize()
        barrier.wait(_TIMEOUT_S)  # lock-step: the next step starts when both copies are done
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    # A checksum of the final weights: equal on both ranks when the gradient merge kept the copies one model.
    checksum = float(torch.nn.utils.parameters_to_vector(params).detach().double().sum())
    q.put(("done", rank, (statistics.median(times), checksum)))


def run(name: str, train: bool, batch: int, pair: DevicePair, steps: int, warmup: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")  # fork cannot carry an initialised CUDA context into a child (docs/hetero.md)
    barrier, q = ctx.Barrier(2), ctx.Queue()
    n_params = sum(p.numel() for p in nets.build(name).parameters())
    grads = torch.zeros(2, n_params).share_memory_()
    t0 = time.perf_counter()
    procs = [ctx.Process(target=_worker, args=(rank, str(dev), name, train, batch, steps, warmup, barrier, grads, q))
             for rank, dev in enumerate((pair.host, pair.accel))]
    for proc in procs:
        proc.start()
    messages: dict[tuple[str, int], Any] = {}
    try:
        while len(messages) < 4:
            kind, rank, value = q.get(timeout=_TIMEOUT_S)
            messages[(kind, rank)] = value - t0 if kind == "ready" else value
    except queue_mod.Empty:
        raise RuntimeError(f"naive two-process run stopped: exit codes {[p.exitcode for p in procs]}") from None
    finally:
        for proc in procs:
            proc.join(_TIMEOUT_S)
    (step0, sum0), (step1, sum1) = messages[("done", 0)], messages[("done", 1)]
    return {"step_s": max(step0, step1), "startup_s": max(messages[("ready", 0)], messages[("ready", 1)]),
            "batch_per_copy": _share_sizes(batch), "weights_checksums": [sum0, sum1],
            "copies_agree": abs(sum0 - sum1) <= 1e-5 * max(1.0, abs(sum0))}
