"""The bench behind `lgpatch hetero-bench`: CPU only, accelerator only, split (`auto`) and the seed's naive
two-process version, for inference and a training step, on synthetic data that starts in host memory (as a
DataLoader's batches do)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn

from legacy_gpu_patch.hetero import naive, nets
from legacy_gpu_patch.hetero.devices import DevicePair
from legacy_gpu_patch.hetero.model import split_model
from legacy_gpu_patch.hetero.tune import choose_placement

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BenchOptions:
    models: tuple[str, ...] = ("seed", "resnet18-like")
    batches: tuple[int, ...] = (1, 16, 256)
    modes: tuple[str, ...] = ("inference", "train")
    accel: str = "cuda:0"
    steps: int = 10
    warmup: int = 3
    naive: bool = True
    cpu_threads: Optional[int] = None


def make_step(model: nn.Module, train: bool, x: torch.Tensor, y: torch.Tensor,
              input_device: torch.device) -> Callable[[], None]:
    """One step as a user runs it: the batch's copy to where the model reads it is part of the step."""
    model.train(train)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if train else None

    def step() -> None:
        # non_blocking as SplitLayer copies its accelerator share: a blocking copy also waits for the stream, and
        # the baseline must not pay a synchronisation the split does not (on the H200 that alone was 0.1 ms a step)
        inputs = x.to(input_device, non_blocking=True)
        if opt is None:
            with torch.no_grad():
                model(inputs)
            return
        opt.zero_grad(set_to_none=True)
        out = model(inputs)
        F.cross_entropy(out, y.to(out.device)).backward()
        opt.step()

    return step


def time_interleaved(runs: dict[str, Callable[[], None]], pair: DevicePair, steps: int,
                     warmup: int) -> dict[str, float]:
    """Median seconds per step of each run, the runs taking turns step by step (the order rotating each round):
    timed one after the other, a later run would meet a warmer (or a throttled) machine than an earlier one, and
    the difference would read as a speed-up. Each step is synchronised (a GPU step otherwise times its launches)."""
    names = list(runs)
    for name in names:
        for _ in range(warmup):
            runs[name]()
    pair.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(steps):
        for name in names[i % len(names):] + names[:i % len(names)]:
            t0 = time.perf_counter()
            runs[name]()
            pair.synchronize()
            samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(times) for name, times in samples.items()}


def run_case(name: str, mode: str, batch: int, opts: BenchOptions, progress: Progress) -> dict[str, Any]:
    pair = DevicePair.of(accel=opts.accel)
    train = mode == "train"
    gen = torch.Generator().manual_seed(batch)
    x = torch.randn(batch, *nets.INPUT_SHAPE, generator=gen)
    y = torch.randint(0, nets.CLASSES, (batch,), generator=gen)
    label = f"{name} {mode} batch {batch}"
    progress(f"{label}: split, tuning every layer on its real input")
    model = nets.build(name).to(pair.accel).train(train)
    t0 = time.perf_counter()
    report = split_model(model, "auto", accel=pair.accel, host=pair.host, cpu_threads=opts.cpu_threads,
                         example_input=x, train=train)
    tune_s = time.perf_counter() - t0
    check = compare_with_unsplit(model, name, train, x, y, pair)
    progress(f"{label}: host only, accelerator only and split, in turns")
    times = time_interleaved({
        "cpu": make_step(nets.build(name).to(pair.host), train, x, y, pair.host),
        "accel": make_step(nets.build(name).to(pair.accel), train, x, y, pair.accel),
        # The first layer is a SplitLayer, which reads the batch where it lies: in host memory.
        "split": make_step(model, train, x, y, pair.host)}, pair, opts.steps, opts.warmup)
    cpu_s, accel_s, split_s = times["cpu"], times["accel"], times["split"]
    split_json = report.to_json()
    result = summarise(cpu_s, accel_s, split_s, host_shares=any(d["host_units"] for d in split_json["layers"]))
    result.update(model=name, mode=mode, batch=batch, tune_s=tune_s, check=check, layers=split_json["layers"],
                  ratio_chosen=chosen_ratios(split_json["layers"]), tuning=split_json["tuning"])
    if opts.naive:
        progress(f"{label}: naive two-process version (spawn)")
        result["naive"] = naive.run(name, train, batch, pair, opts.steps, opts.warmup)
        result["naive"]["vs_best_single"] = result["best_single_s"] / result["naive"]["step_s"]
    return result


def compare_with_unsplit(split: nn.Module, name: str, train: bool, x: torch.Tensor, y: torch.Tensor,
                         pair: DevicePair) -> dict[str, float]:
    """The split against the same network unsplit on the accelerator, from the same weights: the largest difference
    of the outputs and, for a training step, of every parameter's gradient. On a GPU, expect TF32-sized differences
    (cuDNN convolutions use TF32 by default), not exact equality."""
    reference = nets.build(name).to(pair.accel).train(train)
    reference.load_state_dict(split.state_dict())
    with torch.set_grad_enabled(train):
        out_split, out_ref = split(x), reference(x.to(pair.accel))
    diffs = {"output_max_abs_diff": float((out_split.to(pair.accel) - out_ref).detach().abs().max()),
             "output_max_abs": float(out_ref.detach().abs().max())}
    if train:
        loss_split = F.cross_entropy(out_split, y.to(out_split.device))
        grads_split = torch.autograd.grad(loss_split, list(split.parameters()))
        grads_ref = torch.autograd.grad(F.cross_entropy(out_ref, y.to(pair.accel)), list(reference.parameters()))
        pairs = zip(grads_split, grads_ref)
        diffs["grad_max_abs_diff"] = max(float((a.to(pair.accel) - b).abs().max()) for a, b in pairs)
        diffs["grad_max_abs"] = max(float(b.abs().max()) for b in grads_ref)
    return diffs


def summarise(cpu_s: float, accel_s: float, split_s: float, host_shares: bool = True) -> dict[str, Any]:
    best = min(cpu_s, accel_s)
    rc_over_rg = accel_s / cpu_s  # rates are 1/time: Rc/Rg = t_accel / t_cpu
    ideal = 1.0 + min(cpu_s, accel_s) / max(cpu_s, accel_s)  # both busy, no overhead: (Rc + Rg) / max(Rc, Rg)
    speedup = best / split_s
    placement = choose_placement(cpu_s, accel_s, split_s, host_shares=host_shares)
    auto_s = {"split": split_s, "cpu": cpu_s, "accel": accel_s}[placement]
    return {"cpu_s": cpu_s, "accel_s": accel_s, "split_s": split_s, "best_single": "cpu" if cpu_s < accel_s
            else "accel", "best_single_s": best, "speedup": speedup, "rc_over_rg": rc_over_rg,
            "ideal_speedup": ideal, "fraction_of_ideal": speedup / ideal,
            "auto": {"placement": placement, "step_s": auto_s, "speedup": best / auto_s}}


def chosen_ratios(layers: list[dict[str, Any]]) -> str:
    shared = [f"{d['name']} {d['host_units']}/{d['units']}" for d in layers if d["host_units"]]
    return ", ".join(shared) if shared else "all accelerator"


def run(opts: BenchOptions, progress: Progress) -> dict[str, Any]:
    pair = DevicePair.of(accel=opts.accel)
    out: dict[str, Any] = {
        "torch": torch.__version__, "accel": str(pair.accel), "host": str(pair.host),
        "accel_name": torch.cuda.get_device_name(pair.accel) if pair.accel.type == "cuda" else "cpu",
        "dry_run": pair.accel.type == "cpu", "host_cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "cases": []}
    if opts.naive:
        progress("measuring spawn start-up")
        out["spawn"] = naive.spawn_cost()
    for name in opts.models:
        for mode in opts.modes:
            for batch in opts.batches:
                out["cases"].append(run_case(name, mode, batch, opts, progress))
    return out
