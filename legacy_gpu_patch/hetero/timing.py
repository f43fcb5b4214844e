"""The real Timer of tune.py: times a SplitLayer on the real input through its own forward (and backward)."""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Optional

import torch

from legacy_gpu_patch.hetero.split import Parts

if TYPE_CHECKING:
    from legacy_gpu_patch.hetero.split import SplitLayer


class LayerTimer:
    """Median seconds per step of one share or of the whole split. A step is what a real step pays: the copies to
    and from the host, the worker hand-off, the computation (forward, plus backward when `train`) and the
    synchronisation of both devices. Gradients are taken with autograd.grad, so the layer's `.grad` stays as it was.
    """

    def __init__(self, layer: SplitLayer, x: torch.Tensor, train: bool, *, min_time_s: float = 0.03,
                 min_iters: int = 5, max_iters: int = 200, warmup: int = 2) -> None:
        self.layer = layer
        self.x = x.detach().requires_grad_(x.requires_grad and train)
        self.train = train
        self.min_time_s, self.min_iters, self.max_iters, self.warmup = min_time_s, min_iters, max_iters, warmup

    def host(self, units: int) -> float:
        return self._time(units, Parts.HOST)

    def accel(self, units: int) -> float:
        return self._time(self.layer.spec.units - units, Parts.ACCEL)

    def split(self, host_units: int) -> float:
        return self._time(host_units, Parts.BOTH)

    def work(self) -> float:
        weight = self.layer.weight
        with torch.no_grad():
            out = self.layer.run(self.x, 0, Parts.BOTH)
        macs_per_output = weight[0].numel()
        return 2.0 * out.numel() * macs_per_output * (3.0 if self.train else 1.0)

    def _step(self, host_units: int, parts: Parts) -> None:
        if not self.train:
            with torch.no_grad():
                self.layer.run(self.x, host_units, parts)
            return
        with torch.enable_grad():
            out = self.layer.run(self.x, host_units, parts)
            candidates: list[Optional[torch.Tensor]] = [self.layer.weight, self.layer.bias, self.x]
            inputs = [t for t in candidates if t is not None and t.requires_grad]
            if inputs:
                torch.autograd.grad(out, inputs, grad_outputs=torch.ones_like(out))

    def _time(self, host_units: int, parts: Parts) -> float:
        pair = self.layer.pair
        for _ in range(self.warmup):
            self._step(host_units, parts)
        pair.synchronize()
        samples: list[float] = []
        started = time.perf_counter()
        while len(samples) < self.max_iters and (len(samples) < self.min_iters
                                                 or time.perf_counter() - started < self.min_time_s):
            t0 = time.perf_counter()
            self._step(host_units, parts)
            pair.synchronize()
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples)

