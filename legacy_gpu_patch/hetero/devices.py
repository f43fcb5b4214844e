"""The two devices of a split, and the worker thread that computes the host share.

The pair is a parameter rather than a constant "cpu"/"cuda" so that the very same split code runs with two CPU
"devices": that is how CI, which has no GPU, tests the split path the GPU runs.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, Union

import torch

DeviceLike = Union[str, torch.device]


@dataclass(frozen=True)
class DevicePair:
    """host: where the host share runs, on a worker thread (the CPU). accel: where the rest runs, queued from the
    calling thread (a CUDA device, or the CPU again for a dry run). output: where the halves are concatenated;
    the accelerator by default, because the next layer of a GPU model lives there."""

    host: torch.device
    accel: torch.device
    output: torch.device

    @classmethod
    def of(cls, accel: DeviceLike = "cuda", host: DeviceLike = "cpu",
           output: Optional[DeviceLike] = None) -> DevicePair:
        accel_dev = _index(torch.device(accel))
        return cls(host=torch.device(host), accel=accel_dev,
                   output=_index(torch.device(output)) if output is not None else accel_dev)

    def synchronize(self) -> None:
        """Wait for the queued work of both devices: a measurement that skips this times the launch, not the work."""
        for dev in {self.accel, self.output}:
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)

    def describe(self) -> str:
        return f"host={self.host} accel={self.accel} output={self.output}"


def _index(dev: torch.device) -> torch.device:
    # "cuda" and "cuda:0" are the same GPU; an explicit index keeps equality checks and reports unambiguous.
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
    return dev


def default_cpu_threads() -> int:
    """All cores but one: the calling thread needs a core of its own to keep launching the accelerator's kernels."""
    return max(1, min(torch.get_num_threads(), (os.cpu_count() or 2) - 1))


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def host_pool(cpu_threads: int) -> ThreadPoolExecutor:
    """One long-lived worker thread per thread count, shared by all split layers.

    torch releases the GIL inside its ops, so a thread is enough for concurrency: no processes, no spawn, no copies
    through shared memory. With the OpenMP backend torch's intra-op thread count is per calling thread, so setting it
    on the worker leaves the caller's own count alone. The pool is module state, not layer state, so a split model
    can still be deep-copied and pickled.
    """
    with _POOLS_LOCK:
        pool = _POOLS.get(cpu_threads)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"lgpatch-hetero-cpu{cpu_threads}",
                                      initializer=torch.set_num_threads, initargs=(cpu_threads,))
            _POOLS[cpu_threads] = pool
        return pool
