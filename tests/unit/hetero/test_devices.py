"""The device pair and the host worker thread."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'legacy-gpu-patch[hetero]')")

from legacy_gpu_patch.hetero.devices import DevicePair, host_pool  # noqa: E402


def test_pair_defaults_output_to_the_accelerator_with_an_index() -> None:
    pair = DevicePair.of(accel="cuda")
    assert (pair.host, pair.accel, pair.output) == (torch.device("cpu"), torch.device("cuda", pair.accel.index),
                                                    pair.accel)
    assert pair.accel.index is not None
    assert DevicePair.of(accel="cpu", output="cpu").describe() == "host=cpu accel=cpu output=cpu"


def test_worker_threads_are_shared_and_set_only_their_own_thread_count() -> None:
    before = torch.get_num_threads()
    pool = host_pool(1)
    assert host_pool(1) is pool and host_pool(2) is not pool
    assert pool.submit(torch.get_num_threads).result() == 1
    assert host_pool(2).submit(torch.get_num_threads).result() == 2
    assert torch.get_num_threads() == before  # the caller's intra-op thread count is left alone
