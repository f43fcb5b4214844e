"""`split_conv`: one Conv2d or Linear layer whose output channels are computed partly on the host, partly on the
accelerator, at the same time, from slices of the layer's own parameters.

Why slices of the original Parameter, taken anew in every forward: autograd then routes the gradients of both shares
back into that one Parameter (the backward of `split` is a concatenation), so there is one model, not two copies to
keep in step, and any optimizer built before or after the split keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Optional, Union, cast

import torch
import torch.nn.functional as F
from torch import nn

from legacy_gpu_patch.hetero.devices import DeviceLike, DevicePair, default_cpu_threads, host_pool

Ratio = Union[float, str]


class Parts(Enum):
    """Which shares a forward computes: BOTH for real use; one side alone only when the tuner times that side."""

    BOTH = "both"
    HOST = "host"
    ACCEL = "accel"


@dataclass(frozen=True)
class LayerSpec:
    """What the split needs to know of the wrapped layer. A *unit* is the smallest piece that can move: one output
    channel, or one whole group of a grouped convolution (a group's outputs need exactly its own input channels, so
    splitting inside a group would be wrong)."""

    kind: str  # "conv2d" or "linear"
    units: int
    out_per_unit: int
    in_per_unit: int  # input channels each unit reads; 0 = every unit reads the whole input
    stride: tuple[int, ...] = (1, 1)
    padding: Any = 0
    dilation: tuple[int, ...] = (1, 1)
    padding_mode: str = "zeros"
    pad_for_mode: tuple[int, ...] = ()

    @classmethod
    def of(cls, layer: nn.Module) -> LayerSpec:
        if isinstance(layer, nn.Linear):
            return cls(kind="linear", units=layer.out_features, out_per_unit=1, in_per_unit=0)
        if isinstance(layer, nn.Conv2d):
            groups = layer.groups
            grouped = groups > 1
            return cls(kind="conv2d", units=groups if grouped else layer.out_channels,
                       out_per_unit=layer.out_channels // groups if grouped else 1,
                       in_per_unit=layer.in_channels // groups if grouped else 0,
                       stride=tuple(layer.stride), padding=layer.padding, dilation=tuple(layer.dilation),
                       padding_mode=layer.padding_mode,
                       pad_for_mode=tuple(layer._reversed_padding_repeated_twice))
        raise TypeError(f"split_conv wraps nn.Conv2d or nn.Linear, not {type(layer).__name__}")

    @property
    def channel_dim(self) -> int:
        return 1 if self.kind == "conv2d" else -1

    def compute(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                n_units: int) -> torch.Tensor:
        """The layer's own operation on a share of `n_units` units (weight and bias already sliced)."""
        if self.kind == "linear":
            return F.linear(x, weight, bias)
        padding = self.padding
        if self.padding_mode != "zeros":
            x = F.pad(x, self.pad_for_mode, mode=self.padding_mode)
            padding = 0
        return F.conv2d(x, weight, bias, self.stride, padding, self.dilation, n_units if self.in_per_unit else 1)

    def input_share(self, x: torch.Tensor, first: int, count: int) -> torch.Tensor:
        """The input channels that units [first, first+count) read: all of them unless grouped."""
        if not self.in_per_unit:
            return x
        return x.narrow(1, first * self.in_per_unit, count * self.in_per_unit)


def _host_compute(spec: LayerSpec, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                  n_units: int, grad: bool, inference: bool) -> torch.Tensor:
    # Grad and inference modes are thread-local in torch: the worker must run in the caller's, or the host share
    # would silently drop out of the autograd graph (or record one under inference mode).
    with torch.inference_mode(inference), torch.set_grad_enabled(grad):
        return spec.compute(x, weight, bias, n_units)


class SplitLayer(nn.Module):
    """The wrapped layer. Its `weight` and `bias` *are* the original layer's Parameters (same objects, same
    state_dict keys); the first `host_units` units run on `pair.host`, the rest on `pair.accel`."""

    weight: nn.Parameter
    bias: Optional[nn.Parameter]

    def __init__(self, layer: nn.Module, ratio: Ratio = "auto", pair: Optional[DevicePair] = None,
                 cpu_threads: Optional[int] = None) -> None:
        super().__init__()
        self.spec = LayerSpec.of(layer)
        if isinstance(getattr(layer, "weight", None), nn.parameter.UninitializedParameter):
            raise ValueError("split_conv needs a layer with initialised parameters (run a lazy layer once first)")
        self.weight = cast(nn.Parameter, layer.weight)
        self.bias = cast(Optional[nn.Parameter], layer.bias)
        self.pair = pair or DevicePair.of()
        self.cpu_threads = cpu_threads or default_cpu_threads()
        self.auto = ratio == "auto"
        self.host_units = 0 if self.auto else units_for_ratio(ratio, self.spec.units)
        self.tuning: Any = None  # a TuneResult once `auto` has measured
        self._copies: dict[tuple[str, int, int, int], tuple[torch.Tensor, Optional[torch.Tensor]]] = {}

    @property
    def ratio(self) -> float:
        """The share of units on the host, as computed (a requested ratio is rounded to whole units)."""
        return self.host_units / self.spec.units

    def extra_repr(self) -> str:
        state = "auto (not tuned yet)" if self.auto and self.tuning is None else f"{self.ratio:.3f}"
        return (f"{self.spec.kind}, host {self.host_units}/{self.spec.units} units, ratio={state}, "
                f"{self.pair.describe()}, cpu_threads={self.cpu_threads}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.auto and self.tuning is None:
            self.tune(x)
        return self.run(x, self.host_units, Parts.BOTH)

    def tune(self, x: torch.Tensor, train: Optional[bool] = None) -> Any:
        """Measure both devices on this input and keep the fastest split (see tune.py)."""
        from legacy_gpu_patch.hetero.timing import LayerTimer
        from legacy_gpu_patch.hetero.tune import choose

        train = self.training and torch.is_grad_enabled() if train is None else train
        self.tuning = choose(self.spec.units, LayerTimer(self, x, train))
        self.host_units = self.tuning.host_units
        return self.tuning

    def run(self, x: torch.Tensor, host_units: int, parts: Parts) -> torch.Tensor:
        accel_units = self.spec.units - host_units
        w_host, b_host, w_accel, b_accel = self._slices(host_units)
        future = None
        if w_host is not None and parts is not Parts.ACCEL:
            # Copies to the host are made here, before any accelerator work of this layer is queued: a device-to-
            # host copy waits for everything queued before it on the stream.
            x_host = self.spec.input_share(x, 0, host_units).to(self.pair.host)
            w_host, b_host = self._params_on(self.pair.host, w_host, b_host, host_units)
            future = host_pool(self.cpu_threads).submit(
                _host_compute, self.spec, x_host, w_host, b_host, host_units, torch.is_grad_enabled(),
                torch.is_inference_mode_enabled())
        y_accel = None
        if w_accel is not None and parts is not Parts.HOST:
            x_accel = self.spec.input_share(x, host_units, accel_units).to(self.pair.accel, non_blocking=True)
            w_accel, b_accel = self._params_on(self.pair.accel, w_accel, b_accel, host_units)
            y_accel = self.spec.compute(x_accel, w_accel, b_accel, accel_units).to(self.pair.output)
        y_host = future.result().to(self.pair.output) if future is not None else None
        if y_host is None or y_accel is None:
            result = y_host if y_accel is None else y_accel
            assert result is not None, "a forward computes at least one share"
            return result
        return torch.cat([y_host, y_accel], dim=self.spec.channel_dim)

    def _slices(self, host_units: int) -> tuple[Optional[torch.Tensor], ...]:
        """(host weight, host bias, accel weight, accel bias). Ratio 0 and 1 use the Parameters whole: a split with
        an empty share would still cost a view per forward and a concatenation of gradients per backward."""
        if host_units == 0:
            return None, None, self.weight, self.bias
        if host_units == self.spec.units:
            return self.weight, self.bias, None, None
        sizes = [host_units * self.spec.out_per_unit, (self.spec.units - host_units) * self.spec.out_per_unit]
        w_host, w_accel = self.weight.split(sizes)
        b_host, b_accel = self.bias.split(sizes) if self.bias is not None else (None, None)
        return w_host, b_host, w_accel, b_accel

    def _params_on(self, device: torch.device, weight: torch.Tensor, bias: Optional[torch.Tensor],
                   host_units: int) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """A share's parameters on the device that computes it (the Parameters may live on either device, or on
        neither). With autograd on, a differentiable copy each forward (its backward carries the gradient home);
        without it, a cached copy reused until the Parameter changes (its version counter) or moves."""
        if self.weight.device == device or torch.is_grad_enabled():
            return weight.to(device), bias.to(device) if bias is not None else None
        version = self.weight._version + (self.bias._version if self.bias is not None else 0)
        key = (str(device), host_units, version, self.weight.data_ptr())
        cached = self._copies.get(key)
        if cached is None:
            for stale in [k for k in self._copies if k[0] == key[0]]:
                del self._copies[stale]
            cached = (weight.to(device), bias.to(device) if bias is not None else None)
            self._copies[key] = cached
        return cached


def units_for_ratio(ratio: Ratio, units: int) -> int:
    if isinstance(ratio, str) or not 0.0 <= float(ratio) <= 1.0:
        raise ValueError(f"ratio must be a number in [0, 1] or 'auto', not {ratio!r}")
    return round(float(ratio) * units)


def split_conv(layer: nn.Module, ratio: Ratio = "auto", cpu_threads: Optional[int] = None, *,
               accel: DeviceLike = "cuda", host: DeviceLike = "cpu", output: Optional[DeviceLike] = None,
               example_input: Optional[torch.Tensor] = None, train: Optional[bool] = None) -> SplitLayer:
    """Wrap `layer` (nn.Conv2d or nn.Linear) so that a `ratio` share of its output channels (or groups) runs on
    `host` and the rest on `accel`, concatenated on `output` (default: `accel`).

    ratio="auto" measures both devices on the real input: on `example_input` now, or on the first forward's input
    (timing a training step when `train`, or when that forward runs in training mode with autograd on; else a
    forward under no_grad). Tune again with `layer.tune(x, train=...)` when the shape or the mode changes.
    0 and 1 bypass the other device completely. The wrapper shares the layer's Parameters; the layer itself is not
    changed, so put the wrapper where the layer was (or use split_model).
    """
    split = SplitLayer(layer, ratio, DevicePair.of(accel=accel, host=host, output=output), cpu_threads)
    split.train(layer.training)
    if split.auto and example_input is not None:
        split.tune(example_input, train)
    return split
