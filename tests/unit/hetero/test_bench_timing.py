"""The bench's timing: runs take turns step by step, in an order that rotates each round, so that no run is
always measured first (on a colder machine) or last; warm-up steps are not timed; medians per run."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'legacy-gpu-patch[hetero]')")

from legacy_gpu_patch.hetero import bench


class CountingPair:
    def __init__(self) -> None:
        self.syncs = 0

    def synchronize(self) -> None:
        self.syncs += 1


def test_runs_take_turns_in_a_rotating_order_after_their_warmups() -> None:
    calls: list[str] = []
    runs = {name: (lambda n=name: calls.append(n)) for name in ("cpu", "accel", "split")}
    pair = CountingPair()
    medians = bench.time_interleaved(runs, pair, steps=4, warmup=2)
    assert calls[:6] == ["cpu", "cpu", "accel", "accel", "split", "split"]  # warm-ups, untimed
    assert calls[6:] == ["cpu", "accel", "split", "accel", "split", "cpu", "split", "cpu", "accel",
                         "cpu", "accel", "split"]
    assert set(medians) == {"cpu", "accel", "split"}
    assert pair.syncs == 1 + 12  # after the warm-ups, then after every timed step


def test_medians_belong_to_their_own_run() -> None:
    def sleeper(seconds: float):
        return lambda: time.sleep(seconds)

    medians = bench.time_interleaved({"slow": sleeper(0.02), "fast": sleeper(0.001)}, CountingPair(),
                                     steps=5, warmup=0)
    assert medians["slow"] > 0.015 > medians["fast"]
    assert bench.time_interleaved({"one": sleeper(0.002)}, CountingPair(), steps=3, warmup=1)["one"] >= 0.002
