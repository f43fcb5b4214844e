"""bench/chainer_type_check_bench.py's pure parts, without Chainer: the summary's ratios and differences from
known per-round samples, the table, and the refusal of a tree whose ledger lacks the step."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from helpers import REPO
from helpers.chainer_cpu import assert_bench_refuses_a_tree_without

BENCH = REPO / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import chainer_type_check_bench
    return chainer_type_check_bench


def samples() -> dict[str, list[float]]:
    # Three rounds; round 2 on a host twice as busy for both processes.
    return {"without step: check": [1.0, 2.0, 1.0], "without step: no_check": [0.4, 0.8, 0.4],
            "with step: cache_on": [0.5, 1.0, 0.45], "with step: cache_off": [1.0, 2.0, 0.9],
            "with step: no_check": [0.4, 0.8, 0.4], "checks": [11.0, 0.0, 0.0, 11.0, 0.0]}


def test_summary_takes_medians_of_per_round_ratios_and_differences(bench) -> None:
    summary = bench.summarize(samples())
    assert summary["with_over_without"] == pytest.approx(0.5)
    assert summary["cache_on_over_cache_off"] == pytest.approx(0.5)
    assert summary["floor_control"] == pytest.approx(1.0)
    assert summary["type_check_ms_without_step"] == pytest.approx(0.6)
    assert summary["type_check_ms_cache_off"] == pytest.approx(0.6)
    assert summary["type_check_ms_cache_on"] == pytest.approx(0.1)
    row = summary["variants"]["with step: cache_on"]
    assert (row["median_ms"], row["min_ms"], row["max_ms"], row["checks_per_inference"]) == (0.5, 0.45, 1.0, 0.0)
    assert summary["variants"]["with step: cache_off"]["checks_per_inference"] == 11.0


def test_table_prints_every_mode_and_the_ratios(bench, capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(rounds=3, blocks=30, block=100)
    info = {"python": "3.11", "numpy": "2.4", "platform": "Linux", "cpus": 2, "load_average": [1.0]}
    bench.print_table(bench.summarize(samples()), args, info)
    out = capsys.readouterr().out
    for name in samples():
        if name != "checks":
            assert name in out
    assert "with step / without step: 0.500x" in out and "0.1000 ms cache on" in out


def test_a_tree_without_the_step_is_refused(tmp_path: Path) -> None:
    assert_bench_refuses_a_tree_without(tmp_path, "chainer_type_check_bench.py",
                                        "chainer-type-check-cache/forward-check-cache")
