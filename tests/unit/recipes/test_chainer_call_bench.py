"""bench/chainer_call_bench.py's pure parts, without Chainer: the summary's per-mode ratios, savings and call counts
from known per-round samples, the table, and the refusal of a tree whose ledger lacks the step."""

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
    import chainer_call_bench
    return chainer_call_bench


def samples() -> dict:
    # Three rounds; round 2 on a host twice as busy for both processes.
    return {"ms": {"without step: cache_on": [0.6, 1.2, 0.6], "without step: no_check": [0.5, 1.0, 0.5],
                   "with step: cache_on": [0.54, 1.08, 0.48], "with step: no_check": [0.45, 0.9, 0.45]},
            "python_calls": {"without step: cache_on": 959.0, "without step: no_check": 848.0,
                             "with step: cache_on": 801.0, "with step: no_check": 690.0}}


def test_summary_takes_medians_of_per_round_ratios_and_differences(bench) -> None:
    summary = bench.summarize(samples())
    assert summary["modes"]["cache_on"]["with_over_without"] == pytest.approx(0.9)
    assert summary["modes"]["cache_on"]["saved_ms"] == pytest.approx(0.12)  # diffs 0.06, 0.12, 0.12
    assert summary["modes"]["cache_on"]["python_calls_saved"] == 158.0
    assert summary["modes"]["no_check"]["with_over_without"] == pytest.approx(0.9)
    assert summary["modes"]["no_check"]["saved_ms"] == pytest.approx(0.05)
    row = summary["variants"]["with step: cache_on"]
    assert (row["median_ms"], row["min_ms"], row["max_ms"], row["python_calls_per_inference"]) == (
        0.54, 0.48, 1.08, 801.0)


def test_table_prints_every_mode_and_the_ratios(bench, capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(rounds=3, blocks=30, block=100)
    info = {"python": "3.11", "numpy": "2.4", "platform": "Linux", "cpus": 2, "load_average": [1.0]}
    bench.print_table(bench.summarize(samples()), args, info)
    out = capsys.readouterr().out
    for name in samples()["ms"]:
        assert name in out
    assert "cache_on: with step / without step 0.900x, saved 0.1200 ms and 158.0 Python calls" in out


def test_a_tree_without_the_step_is_refused(tmp_path: Path) -> None:
    assert_bench_refuses_a_tree_without(tmp_path, "chainer_call_bench.py", "chainer-call-overhead/call-fast-paths")



def test_step_option_names_the_step_the_other_tree_lacks(tmp_path: Path) -> None:
    step = "chainer-call-lean/call-lean"
    assert_bench_refuses_a_tree_without(tmp_path, "chainer_call_bench.py", step, "--step", step)


def test_step_option_takes_only_the_steps_it_knows(bench, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--step", "chainer-call-overhead/nope"])
    assert "invalid choice" in capsys.readouterr().err
