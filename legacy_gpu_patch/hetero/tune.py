"""Ratio `auto`: measure, model, choose, and measure the choice — all of it reported.

The model (issue 16): with f of the work W on the host,
    step(f) ≈ max(f·W/Rc + copies + sync,  t_launch + (1−f)·W/Rg)
Each side is fitted as an affine time in its number of units, t = fixed + per_unit·n, from two measurements on the
real input (copies, the worker hand-off and the synchronisation included, since they are part of a real step). The
fit predicts every split on the grid; the endpoints (all accelerator, all host) and the best predicted splits are then
*measured*, and the fastest measured candidate wins. A split is kept only when it beats the best single device by
`min_gain`, so noise cannot talk the tuner into a split that does not pay.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Protocol


class Timer(Protocol):
    """Seconds per step for one layer; injected so the choice can be tested on synthetic timings."""

    def host(self, units: int) -> float: ...  # the host share alone, `units` units (0 < units)

    def accel(self, units: int) -> float: ...  # the accelerator share alone

    def split(self, host_units: int) -> float: ...  # the real concurrent step, host_units on the host

    def work(self) -> float: ...  # the layer's FLOPs per step (forward, or forward+backward), for the rates


@dataclass(frozen=True)
class SideModel:
    fixed_s: float  # copies of the input, launch, hand-off and sync: paid once whatever the share
    per_unit_s: float  # compute and output copy per unit

    def at(self, units: int) -> float:
        return self.fixed_s + self.per_unit_s * units if units else 0.0

    @classmethod
    def fit(cls, many: int, t_many: float, few: int, t_few: float) -> SideModel:
        # Two points; noise can make the slope negative on a tiny layer, which no device does.
        per_unit = max(0.0, (t_many - t_few) / (many - few)) if many != few else t_many / max(many, 1)
        return cls(fixed_s=max(0.0, t_many - per_unit * many), per_unit_s=per_unit)


@dataclass
class Candidate:
    host_units: int
    predicted_s: float
    measured_s: Optional[float] = None


@dataclass
class TuneResult:
    units: int
    host_units: int
    ratio: float
    host_model: SideModel
    accel_model: SideModel
    rate_host: float  # Rc, FLOP/s of the host alone on the whole layer (copies included)
    rate_accel: float  # Rg
    ideal_speedup: float  # (Rc + Rg) / max(Rc, Rg): both devices busy, no overhead
    best_single_s: float
    chosen: Candidate
    speedup: float  # best single device / chosen, both measured
    verdict: str
    candidates: list[Candidate] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def grid(units: int, model_best: float, points: int = 33) -> list[int]:
    """0 and `units`, an even grid between (every unit when there are few), and the units around the balance point
    the model predicts — the one place a split can win."""
    if units <= points:
        base = set(range(units + 1))
    else:
        base = {round(i * units / (points - 1)) for i in range(points)}
    around = {int(model_best) + d for d in (-1, 0, 1, 2)}
    return sorted(base | {k for k in around if 0 <= k <= units} | {0, units})


def balance_point(units: int, host: SideModel, accel: SideModel) -> float:
    """Where host(k) = accel(units − k): the two sides finish together."""
    slope = host.per_unit_s + accel.per_unit_s
    if slope <= 0:
        return 0.0
    return min(float(units), max(0.0, (accel.fixed_s + accel.per_unit_s * units - host.fixed_s) / slope))


def choose(units: int, timer: Timer, *, verify: int = 3, min_gain: float = 0.01) -> TuneResult:
    all_accel, all_host = timer.split(0), timer.split(units)
    few_host, few_accel = max(1, units // 4), max(1, units // 2)
    # A split at 0 or `units` runs one side alone, so the endpoints are also each side's "all units" point.
    host = SideModel.fit(units, all_host, few_host, timer.host(few_host)) if units > 1 else SideModel(0.0, all_host)
    accel = SideModel.fit(units, all_accel, few_accel, timer.accel(few_accel)) if units > 1 \
        else SideModel(0.0, all_accel)
    points = grid(units, balance_point(units, host, accel))
    candidates = {k: Candidate(k, predict(k, units, host, accel)) for k in points}
    candidates[0].measured_s, candidates[units].measured_s = all_accel, all_host
    inner = sorted((c for c in candidates.values() if 0 < c.host_units < units), key=lambda c: c.predicted_s)
    for cand in inner[:verify]:
        cand.measured_s = timer.split(cand.host_units)
    best_single = min(all_accel, all_host)
    measured = [c for c in candidates.values() if c.measured_s is not None]
    chosen = min(measured, key=lambda c: (c.measured_s, c.host_units))
    if 0 < chosen.host_units < units and chosen.measured_s > best_single * (1 - min_gain):  # type: ignore[operator]
        chosen = candidates[0] if all_accel <= all_host else candidates[units]
    work = timer.work()
    rate_host, rate_accel = work / max(all_host, 1e-12), work / max(all_accel, 1e-12)
    ideal = (rate_host + rate_accel) / max(rate_host, rate_accel)
    speedup = best_single / max(chosen.measured_s or best_single, 1e-12)
    return TuneResult(units=units, host_units=chosen.host_units, ratio=chosen.host_units / units, host_model=host,
                      accel_model=accel, rate_host=rate_host, rate_accel=rate_accel, ideal_speedup=ideal,
                      best_single_s=best_single, chosen=chosen, speedup=speedup,
                      verdict=verdict(chosen.host_units, units, all_host, all_accel, ideal),
                      candidates=sorted(candidates.values(), key=lambda c: c.host_units))


def predict(host_units: int, units: int, host: SideModel, accel: SideModel) -> float:
    return max(host.at(host_units), accel.at(units - host_units))


def verdict(host_units: int, units: int, t_host: float, t_accel: float, ideal: float) -> str:
    """Say which case the layer is in, in words a user can check against docs/hetero.md."""
    ratio = f"Rc/Rg = {t_accel / t_host:.3g}" if t_host > 0 else "Rc/Rg = ?"
    if host_units == 0:
        return (f"all accelerator: {ratio}, so the ideal combined speed-up is only {ideal:.3f}x and the host's "
                "copies and synchronisation cost more than its share saves")
    if host_units == units:
        return f"all host: {ratio}; the accelerator's launch and copies cost more than the whole layer on the host"
    return f"split: {host_units}/{units} units on the host pay ({ratio}, ideal {ideal:.3f}x)"


def choose_placement(cpu_s: float, accel_s: float, split_s: float, min_gain: float = 0.01,
                     host_shares: bool = True) -> str:
    """`auto` at the model level: the grid's endpoints for a whole model are "all on the CPU" and "all on the
    accelerator". A per-layer split keeps the model on the accelerator (each split layer merges there), so where the
    whole model is fastest on the CPU — a tiny net at batch 1, all launch floors — no per-layer ratio can reach it.
    Returns "split", "cpu" or "accel": the split only when some layer gives the host a share (`host_shares`) and it
    beats the best single device by `min_gain`. With no host share the "split" model is the accelerator model in
    wrappers; a time below the accelerator's is then noise, not a gain (the H200 showed 1.43x of it at batch 1)."""
    best_single = "cpu" if cpu_s < accel_s else "accel"
    if not host_shares:
        return best_single
    return "split" if split_s < min(cpu_s, accel_s) * (1 - min_gain) else best_single
