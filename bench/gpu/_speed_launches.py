"""What one iteration of a case costs on the host: kernel launches, Python calls, Chainer Function applications.

Issue 17's batch-1 gap is host-side: the GPU work of the inspection CNN at batch 1 is tens of microseconds, the
wall time milliseconds. These counters turn that into numbers per iteration, so the table can say how many
kernels an inference launches, how many Python calls it makes, and how many microseconds of wall time each costs:

- GPU activity through torch's profiler (CUPTI): every kernel, memset and memcpy the process puts on the GPU,
  whoever launched it: CuPy's own kernels (cuLaunchKernel through the driver API), cuDNN's, cuBLAS's, torch's.
  CuPy 1.24's Function and Module are Cython extension types whose methods cannot be wrapped from Python, so a
  Python-level launch counter is not possible without patching CuPy; CUPTI sees below all of them. The kernel
  names come with the counts, so a reader can check that CuPy's kernels (cupy_*) are among them.
- Python-level calls: a sys.setprofile hook counts Python function calls ("call") and calls of C functions from
  Python ("c_call") during the iteration; Cython-to-Cython calls inside CuPy are not seen (they cost no
  interpreter time either).
- Chainer Function applications: chainer.function.Function.__call__ wrapped for the iteration (a pure Python
  class in 1.24), then restored.
"""

from __future__ import annotations

import collections
import sys
from typing import Any, Callable


def python_calls(step: Callable[[], Any]) -> dict[str, int]:
    counts = {"call": 0, "c_call": 0}

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event in counts:
            counts[event] += 1
    sys.setprofile(hook)
    try:
        step()
    finally:
        sys.setprofile(None)
    return {"python_calls": counts["call"], "c_calls": counts["c_call"]}


def chainer_function_calls(step: Callable[[], Any]) -> int:
    import chainer.function

    cls = chainer.function.Function
    original = cls.__call__
    count = [0]

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(self, *args, **kwargs)
    cls.__call__ = counting
    try:
        step()
    finally:
        cls.__call__ = original
    return count[0]


def classify(names: list[str]) -> dict[str, Any]:
    """GPU activity names (one per event) into kernels, memsets and memcpys, with the most frequent kernels."""
    kinds: collections.Counter = collections.Counter()
    kernels: collections.Counter = collections.Counter()
    for name in names:
        low = name.lower()
        if low.startswith("memset"):
            kinds["memsets"] += 1
        elif low.startswith("memcpy"):
            kinds["memcpys"] += 1
        else:
            kinds["kernels"] += 1
            kernels[name[:60]] += 1
    return {"kernels": kinds["kernels"], "memsets": kinds["memsets"], "memcpys": kinds["memcpys"],
            "top_kernels": kernels.most_common(8)}


def gpu_activity(step: Callable[[], Any], sync: Callable[[], None]) -> dict[str, Any]:
    """Kernels, memsets and memcpys of one iteration on the GPU, and the host's launch API calls, via CUPTI."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        sync()
    device_names, launch_calls = [], 0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            device_names.append(event.name)
        elif "LaunchKernel" in event.name:
            launch_calls += 1
    result = classify(device_names)
    result["launch_api_calls"] = launch_calls
    return result


def count_all(step: Callable[[], Any], sync: Callable[[], None], chainer_side: bool) -> dict[str, Any]:
    """Every counter for one iteration (after a warm-up iteration, so nothing is compiled or cached inside)."""
    step()
    sync()
    out: dict[str, Any] = {}
    out.update(python_calls(step))
    sync()
    if chainer_side:
        out["chainer_functions"] = chainer_function_calls(step)
        sync()
    try:
        out.update(gpu_activity(step, sync))
    except Exception as exc:  # the other counters still come
        out["gpu_activity_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return out
