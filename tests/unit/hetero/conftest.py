"""Fixtures of the CPU/GPU split tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """One intra-op thread: on a small shared machine an OpenMP team waits on its members more than it computes;
    these tests check results, not speed. (torch is imported here, not at collection: test_import.py runs
    without it.)"""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
