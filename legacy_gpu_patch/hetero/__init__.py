"""Run one model's conv and linear layers on the CPU and a GPU at once (the third seed system, issue 16).

`split_conv` wraps an existing ``nn.Conv2d`` or ``nn.Linear`` so that its output channels are divided between a
host device (the CPU, on a worker thread) and an accelerator (a CUDA device, asynchronous), using slices of the
*same* parameters; `split_model` does it for every eligible layer of a model. docs/hetero.md explains when a split can
pay and how the `auto` ratio is chosen.

This package needs PyTorch, an optional extra of lgpatch; the rest of lgpatch never imports it.
"""

from __future__ import annotations

EXTRA_HINT = "pip install 'legacy-gpu-patch[hetero]'"

try:
    import torch  # noqa: F401
except ImportError:
    # One line, naming the extra: the chained "No module named torch" adds nothing a user can act on.
    raise ImportError(f"legacy_gpu_patch.hetero needs PyTorch, which is not installed: {EXTRA_HINT}") from None

from legacy_gpu_patch.hetero.devices import DevicePair  # noqa: E402
from legacy_gpu_patch.hetero.model import LayerDecision, SplitReport, split_model  # noqa: E402
from legacy_gpu_patch.hetero.split import SplitLayer, split_conv  # noqa: E402
from legacy_gpu_patch.hetero.tune import TuneResult  # noqa: E402

__all__ = ["EXTRA_HINT", "DevicePair", "LayerDecision", "SplitLayer", "SplitReport", "TuneResult", "split_conv",
           "split_model"]
