"""The auto tuner's choice on synthetic timings: the physics of issue 16 written as a Timer."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'legacy-gpu-patch[hetero]')")

from legacy_gpu_patch.hetero.tune import SideModel, balance_point, choose, choose_placement, grid


@dataclass
class Physics:
    """step(k) = max(host fixed + k·host per unit, accel fixed + (units−k)·accel per unit) + overlap cost."""

    units: int
    host_fixed: float
    host_per_unit: float
    accel_fixed: float
    accel_per_unit: float
    overlap: float = 0.0  # what running both at once costs beyond the max (hand-off, contention)
    inner_split_s: float = 0.0  # when set: what every split strictly between the endpoints measures
    calls: list[tuple[str, int]] = field(default_factory=list)

    def host(self, units: int) -> float:
        self.calls.append(("host", units))
        return self.host_fixed + units * self.host_per_unit

    def accel(self, units: int) -> float:
        self.calls.append(("accel", units))
        return self.accel_fixed + units * self.accel_per_unit

    def split(self, host_units: int) -> float:
        self.calls.append(("split", host_units))
        if host_units == 0:
            return self.accel(self.units)
        if host_units == self.units:
            return self.host(self.units)
        both = max(self.host(host_units), self.accel(self.units - host_units))
        return self.inner_split_s or both + self.overlap

    def work(self) -> float:
        return 1e9


def test_big_gpu_takes_everything() -> None:
    # H200-like at batch 64: Rc/Rg ≈ 0.01, and the host pays a copy of the input first.
    timer = Physics(units=64, host_fixed=120e-6, host_per_unit=40e-6, accel_fixed=18e-6, accel_per_unit=0.4e-6,
                    overlap=10e-6)
    result = choose(64, timer)
    assert result.host_units == 0 and result.ratio == 0.0
    assert result.verdict.startswith("all accelerator")
    assert result.ideal_speedup == pytest.approx(1 + timer.split(0) / timer.split(64))
    assert result.speedup == pytest.approx(1.0)


def test_weak_gpu_gets_a_balanced_split() -> None:
    # The seed's consumer card: both devices about as fast; the best split gives each half.
    timer = Physics(units=6, host_fixed=20e-6, host_per_unit=100e-6, accel_fixed=20e-6, accel_per_unit=100e-6,
                    overlap=5e-6)
    result = choose(6, timer)
    assert result.host_units == 3
    assert result.chosen.measured_s == pytest.approx(20e-6 + 300e-6 + 5e-6)
    assert result.chosen.predicted_s == pytest.approx(20e-6 + 300e-6)
    assert result.speedup == pytest.approx(620e-6 / 325e-6)
    assert result.verdict.startswith("split: 3/6")


def test_uneven_devices_get_an_uneven_split_near_the_balance_point() -> None:
    timer = Physics(units=512, host_fixed=50e-6, host_per_unit=3e-6, accel_fixed=20e-6, accel_per_unit=1e-6)
    result = choose(512, timer)
    # host(k) = accel(512 − k)  →  k = (20 + 512 − 50) / 4 = 120.5
    assert balance_point(512, result.host_model, result.accel_model) == pytest.approx(120.5)
    assert result.host_units in (120, 121)


def test_launch_floor_makes_the_host_win_a_tiny_layer() -> None:
    timer = Physics(units=6, host_fixed=2e-6, host_per_unit=0.5e-6, accel_fixed=120e-6, accel_per_unit=0.1e-6)
    result = choose(6, timer)
    assert result.host_units == 6 and result.verdict.startswith("all host")


def test_a_split_within_noise_of_the_best_device_is_not_taken() -> None:
    # All accelerator takes 8 µs; every split measures 0.5 % faster: below min_gain (1 %), so it is noise.
    timer = Physics(units=8, host_fixed=0.0, host_per_unit=10e-6, accel_fixed=0.0, accel_per_unit=1e-6,
                    inner_split_s=8e-6 * 0.995)
    result = choose(8, timer)
    assert result.host_units == 0 and result.speedup == 1.0
    timer.inner_split_s = 8e-6 * 0.9  # 10 % faster: real, and taken
    assert 0 < choose(8, timer).host_units < 8


def test_only_the_best_predicted_splits_are_measured() -> None:
    timer = Physics(units=64, host_fixed=1e-6, host_per_unit=1e-6, accel_fixed=1e-6, accel_per_unit=1e-6)
    result = choose(64, timer, verify=3)
    measured_inner = [c for c in result.candidates if c.measured_s is not None and 0 < c.host_units < 64]
    assert len(measured_inner) == 3
    assert result.host_units == 32
    assert all(c.predicted_s > 0 for c in result.candidates)


def test_grid_holds_the_endpoints_and_the_balance_point() -> None:
    points = grid(1000, 123.4)
    assert points[0] == 0 and points[-1] == 1000
    assert {122, 123, 124, 125} <= set(points)
    assert len(points) < 40
    assert grid(5, 2.0) == [0, 1, 2, 3, 4, 5]


def test_side_model_fit_never_has_a_negative_slope() -> None:
    model = SideModel.fit(8, 1.0e-3, 2, 1.1e-3)  # noise: more units measured faster
    assert model.per_unit_s == 0.0 and model.fixed_s == pytest.approx(1.0e-3)
    assert SideModel.fit(8, 9e-6, 2, 3e-6).at(4) == pytest.approx(5e-6)


def test_single_unit_layer() -> None:
    timer = Physics(units=1, host_fixed=1e-6, host_per_unit=1e-6, accel_fixed=5e-6, accel_per_unit=1e-6)
    result = choose(1, timer)
    assert result.host_units == 1
    assert result.to_json()["chosen"]["host_units"] == 1


def test_model_level_placement_keeps_a_split_only_when_it_beats_both_devices() -> None:
    assert choose_placement(cpu_s=2.0, accel_s=1.0, split_s=0.8) == "split"
    assert choose_placement(cpu_s=2.0, accel_s=1.0, split_s=0.995) == "accel"  # within min_gain: noise
    assert choose_placement(cpu_s=0.5, accel_s=1.0, split_s=0.9) == "cpu"  # a tiny net at batch 1
    assert choose_placement(cpu_s=0.5, accel_s=1.0, split_s=0.4) == "split"


def test_a_split_without_any_host_share_is_never_chosen() -> None:
    # every layer all on the accelerator: the "split" is the accelerator model, so a faster time is noise
    assert choose_placement(cpu_s=1.2, accel_s=0.40, split_s=0.28, host_shares=False) == "accel"
    assert choose_placement(cpu_s=0.3, accel_s=0.40, split_s=0.28, host_shares=False) == "cpu"
    assert choose_placement(cpu_s=1.2, accel_s=0.40, split_s=0.28, host_shares=True) == "split"
