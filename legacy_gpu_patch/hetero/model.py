"""`split_model`: put a SplitLayer in place of every eligible Conv2d and Linear of a model, and say what it did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from torch import nn

from legacy_gpu_patch.hetero.devices import DeviceLike, DevicePair
from legacy_gpu_patch.hetero.split import LayerSpec, Ratio, SplitLayer


@dataclass(frozen=True)
class LayerDecision:
    name: str
    kind: str
    units: int
    host_units: int
    tuned: bool
    verdict: str
    predicted_s: Optional[float]
    measured_s: Optional[float]
    speedup: Optional[float]

    def line(self) -> str:
        timing = ""
        if self.measured_s is not None and self.predicted_s is not None and self.speedup is not None:
            timing = (f"  predicted {self.predicted_s * 1e6:.0f} µs, measured {self.measured_s * 1e6:.0f} µs, "
                      f"{self.speedup:.2f}x vs best single device")
        return f"{self.name}: {self.kind}, {self.host_units}/{self.units} units on the host — {self.verdict}{timing}"


@dataclass
class SplitReport:
    """The layers split and the layers left alone, with why. Built from the live layers, so a report taken after
    the first forward of a lazily tuned (`auto`) model shows the tuning."""

    pair: DevicePair
    layers: list[tuple[str, SplitLayer]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def decisions(self) -> list[LayerDecision]:
        return [_decision(name, layer) for name, layer in self.layers]

    def to_json(self) -> dict[str, Any]:
        return {"devices": self.pair.describe(), "layers": [d.__dict__ for d in self.decisions()],
                "tuning": {name: layer.tuning.to_json() for name, layer in self.layers if layer.tuning},
                "skipped": [{"name": n, "reason": r} for n, r in self.skipped]}

    def format(self) -> str:
        lines = [d.line() for d in self.decisions()]
        lines += [f"{name}: left alone — {reason}" for name, reason in self.skipped]
        return "\n".join(lines)


def _decision(name: str, layer: SplitLayer) -> LayerDecision:
    tuning = layer.tuning
    if tuning is None:
        verdict = "auto: tuned at the first forward" if layer.auto else f"fixed ratio {layer.ratio:.3f}"
        return LayerDecision(name, layer.spec.kind, layer.spec.units, layer.host_units, False, verdict, None, None,
                             None)
    return LayerDecision(name, layer.spec.kind, layer.spec.units, layer.host_units, True, tuning.verdict,
                         tuning.chosen.predicted_s, tuning.chosen.measured_s, tuning.speedup)


def _skip_reason(module: nn.Module) -> Optional[str]:
    if isinstance(getattr(module, "weight", None), nn.parameter.UninitializedParameter):
        return "lazy layer not initialised yet (run one forward first)"
    if LayerSpec.of(module).units < 2:
        return "a single output unit cannot be split"
    return None


def split_model(model: nn.Module, ratio: Ratio = "auto", *, accel: DeviceLike = "cuda", host: DeviceLike = "cpu",
                output: Optional[DeviceLike] = None, cpu_threads: Optional[int] = None,
                example_input: Optional[torch.Tensor] = None, train: Optional[bool] = None) -> SplitReport:
    """Replace, in place, every nn.Conv2d and nn.Linear of `model` by a SplitLayer sharing its Parameters.

    Every split layer hands its result to `output` (default: the accelerator), so the rest of the model — batch
    norm, activations, the layers left alone — must live there: move the model to the accelerator first.

    With ratio="auto" and `example_input`, one forward of the model tunes every layer on its real input (in the
    model's training mode unless `train` says otherwise; batch-norm statistics are restored afterwards). Without
    `example_input`, each layer tunes itself at the first real forward.
    """
    pair = DevicePair.of(accel=accel, host=host, output=output)
    report = SplitReport(pair)
    # named_modules walks in definition order, so the report lists the layers as the model runs them.
    targets = [(name, module) for name, module in model.named_modules()
               if isinstance(module, (nn.Conv2d, nn.Linear)) and not isinstance(module, SplitLayer)]
    for name, module in targets:
        reason = "the model itself is one layer: use split_conv" if not name else _skip_reason(module)
        if reason:
            report.skipped.append((name or type(module).__name__, reason))
            continue
        parent_name, _, child_name = name.rpartition(".")
        layer = SplitLayer(module, ratio, pair, cpu_threads)
        layer.train(module.training)
        setattr(model.get_submodule(parent_name) if parent_name else model, child_name, layer)
        report.layers.append((name, layer))
    if ratio == "auto" and example_input is not None:
        _tune_in_place(model, example_input, model.training if train is None else train)
    return report


def _tune_in_place(model: nn.Module, example_input: torch.Tensor, train: bool) -> None:
    was_training = model.training
    saved = {name: buf.detach().clone() for name, buf in model.named_buffers()}
    model.train(train)
    try:
        with torch.set_grad_enabled(train):
            model(example_input)
    finally:
        model.train(was_training)
        with torch.no_grad():
            for name, buf in model.named_buffers():
                buf.copy_(saved[name])
