"""The GPU speed bench's pure parts (bench/gpu/chainer_speed.py, _speed_table.py), which run without a GPU: the
timing loop against a step of known cost, and the before/after table with issue 17's goals."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO

BENCH = REPO / "bench" / "gpu"


@pytest.fixture
def bench_modules(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import _speed_table
    import chainer_speed
    return chainer_speed, _speed_table


def report(label: str, sum_ms: float, infer_ratio: float, startup: float) -> dict:
    return {"label": label, "copy_bandwidth_GBps": 4000.0, "split_patch": label == "after", "errors": {},
            "startup_s": {"chainer": startup, "torch": 2.0},
            "cases": {"sum_full_6.4M": {"chainer_ms": sum_ms, "torch_ms": 0.02, "ratio": round(sum_ms / 0.02, 2),
                                        "chainer_pct_copy": round(100 * 25.7 / sum_ms / 4000, 1)},
                      "inspection_infer_b1": {"chainer_ms": infer_ratio, "torch_ms": 1.0, "ratio": infer_ratio}}}


def test_time_step_measures_per_iteration_time(bench_modules) -> None:
    chainer_speed, _ = bench_modules
    calls = []

    def step() -> None:
        calls.append(1)
        time.sleep(0.002)
    per_iteration = chainer_speed.time_step(step, lambda: None, repeats=3, min_batch_ms=10)
    assert 0.0019 < per_iteration < 0.02
    assert len(calls) >= 3 + 1 + 3 * 2  # warm-up, calibration, and batches of several iterations


def test_table_has_both_builds_speed_up_and_goals(bench_modules) -> None:
    _, table = bench_modules
    text = table.render([report("before", 2.5, 2.0, 3.0), report("after", 0.05, 1.2, 2.2),
                         {"label": "after", "checks_passed": 310, "checks_failed": 0, "failures": []}])
    header = text.splitlines()[0]
    assert "before chainer ms" in header and "after chainer ms" in header and "speed-up before/after" in header
    row = next(line for line in text.splitlines() if line.startswith("| sum_full_6.4M"))
    assert row.rstrip(" |").endswith("| 50.0")  # 2.5 ms -> 0.05 ms
    assert "inspection_infer_b1 within 1.5x of torch: yes (ratio 1.2)" in text
    assert "memory-bound ops below 50% of copy bandwidth: [('sum_full_6.4M', 12.8)]" in text
    assert "start-up <= 1.2x torch: yes (ratio 1.1)" in text
    assert "reduction check after: 310 passed, 0 failed" in text


def test_goals_say_no_when_missed(bench_modules) -> None:
    _, table = bench_modules
    lines = "\n".join(table.goals(report("before", 2.5, 2.0, 3.0)))
    assert "within 1.5x of torch: no (ratio 2.0)" in lines and "start-up <= 1.2x torch: no (ratio 1.5)" in lines


def test_table_command_reads_reports(tmp_path: Path) -> None:
    paths = []
    for rep in (report("before", 2.5, 2.0, 3.0), report("after", 0.05, 1.2, 2.2)):
        path = tmp_path / f"{rep['label']}.json"
        path.write_text(json.dumps(rep))
        paths.append(str(path))
    proc = subprocess.run([sys.executable, str(BENCH / "chainer_speed.py"), "--table", *paths],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("| case | before chainer ms")
