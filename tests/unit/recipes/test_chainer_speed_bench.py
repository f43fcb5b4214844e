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


class RecordingClient:
    """Stands in for a worker process (the transport); answers `s` per side and records the order of requests."""

    def __init__(self, label: str, seconds: dict[str, float], log: list, fail_side: str | None = None) -> None:
        self.label, self.seconds, self.log, self.fail_side = label, seconds, log, fail_side

    def ask(self, request: dict, timeout: float) -> dict:
        self.log.append((self.label, request["side"]))
        if request["side"] == self.fail_side:
            return {"error": "RuntimeError: boom"}
        return {"s": self.seconds[request["side"]], "n": 3}


@pytest.fixture
def interleave(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import _speed_interleave
    import _speed_interleaved_table
    return _speed_interleave, _speed_interleaved_table


def test_rounds_alternate_the_builds_and_keep_going_after_an_error(interleave) -> None:
    mod, _ = interleave
    log: list = []
    clients = {"before": RecordingClient("before", {"chainer": 0.002, "torch": 0.001}, log),
               "after": RecordingClient("after", {"chainer": 0.001, "torch": 0.001}, log, fail_side="torch")}
    errors: dict = {}
    row = mod.time_case(clients, "case", {"before": ("chainer", "torch"), "after": ("chainer", "torch")}, 3, 20,
                        errors)
    builds = [label for label, _ in log]
    # A B, B A, A B: the order flips every round; the failed torch side of "after" is asked once only.
    assert builds == ["before", "before", "after", "after", "after", "before", "before", "before", "before",
                      "after"]
    assert errors == {"case/after/torch": "RuntimeError: boom"}
    assert row["before"]["chainer"] == {"median_ms": 2.0, "min_ms": 2.0, "max_ms": 2.0, "spread_pct": 0.0,
                                        "samples": 3}
    assert row["after"]["chainer"]["median_ms"] == 1.0 and "torch" not in row["after"]


def test_stats_give_median_and_range(interleave) -> None:
    mod, _ = interleave
    st = mod.stats([0.001, 0.004, 0.002, 0.0021, 0.0019])
    assert (st["median_ms"], st["min_ms"], st["max_ms"], st["samples"]) == (2.0, 1.0, 4.0, 5)
    assert st["spread_pct"] == 150.0


def interleaved_report() -> dict:
    def side(median: float, low: float, high: float, pct: float | None = None) -> dict:
        st = {"median_ms": median, "min_ms": low, "max_ms": high, "spread_pct": 0.0, "samples": 5}
        if pct is not None:
            st["pct_copy"], st["GBps"] = pct, pct * 40
        return st
    return {"mode": "interleaved", "labels": ["before", "after"], "rounds": 5, "errors": {},
            "builds": {"before": {"copy_bandwidth_GBps": 4000.0, "split_patch": False, "errors": {}},
                       "after": {"copy_bandwidth_GBps": 4000.0, "split_patch": True, "errors": {}}},
            "startup_s": {"before": 1.3, "after": 1.4, "torch": 4.0},
            "cases": {
                "sum_full_64M": {"before": {"chainer": side(20.0, 19.0, 21.0, 1.0), "torch": side(0.1, 0.1, 0.1)},
                                 "after": {"chainer": side(0.2, 0.19, 0.21, 40.0),
                                           "torch": side(0.1, 0.09, 0.11)}},
                "sum_full_6.4M": {"before": {"chainer": side(2.0, 1.9, 2.1, 0.3)},
                                  "after": {"chainer": side(0.03, 0.02, 0.04, 20.0)}},
                "inspection_infer_b1": {"before": {"chainer": side(3.0, 2.0, 4.0), "torch": side(0.2, 0.2, 0.2)},
                                        "after": {"chainer": side(2.5, 2.1, 3.9), "torch": side(0.25, 0.2, 0.3)}},
            },
            "counts": {"inspection_infer_b1": {
                "after": {"kernels": 25, "memsets": 0, "memcpys": 0, "launch_api_calls": 25, "python_calls": 5000,
                          "c_calls": 3000, "chainer_functions": 11, "top_kernels": [["cupy_relu", 3]]},
                "torch": {"kernels": 12, "python_calls": 200, "c_calls": 100,
                          "gpu_activity_error": "RuntimeError: no CUPTI"}}}}


def test_interleaved_table_ranges_control_counts_and_large_input_goal(interleave) -> None:
    _, table = interleave
    text = "\n".join(table.render_interleaved(interleaved_report(), {"sum_full_64M": 2**28, "sum_full_6.4M": 2**25}))
    lines = text.splitlines()
    assert "before chainer ms [range]" in lines[0] and "torch control after/before" in lines[0]
    big = next(line for line in lines if line.startswith("| sum_full_64M"))
    # 20 ms -> 0.2 ms: speed-up 100, ranges apart, torch the same in both processes, 40% of copy.
    assert "| 20.0 [19.0–21.0] | 0.2 [0.19–0.21] | 0.1 | 0.1 | 2.0 | 100.0 | yes | 1.0 | 1600.0 | 40.0 |" in big
    infer = next(line for line in lines if line.startswith("| inspection_infer_b1 "))
    assert "| no | 1.25 |" in infer  # overlapping ranges; torch 25% slower in the after process: noise
    # Only the large input counts for the bandwidth goal (the 6.4M case fits in L2).
    assert "on large inputs (>= 256 MB moved) below 50% of copy bandwidth: [('sum_full_64M', 40.0)]" in text
    assert "inspection_infer_b1 within 1.5x of torch: no (ratio 10.0)" in text
    assert "start-up <= 1.2x torch: yes (ratio 0.35)" in text
    row = next(line for line in lines if line.startswith("| inspection_infer_b1 | after"))
    assert "| 2.5 | 25 | 0 | 0 | 25 | 5000 | 3000 | 11 | 100.0 | 0.5 |" in row  # µs per kernel, per Python call
    torch_row = next(line for line in lines if line.startswith("| inspection_infer_b1 | torch"))
    assert "| 0.2 | 12 |" in torch_row  # torch's time from the first build's process
    assert "no CUPTI" in text and "cupy_relu" in text


def test_launch_counters_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import _speed_launches

    def step() -> None:
        for _ in range(7):
            len(helper())

    def helper() -> list:
        return []
    counts = _speed_launches.python_calls(step)
    assert counts["python_calls"] == 1 + 7 and counts["c_calls"] >= 7
    got = _speed_launches.classify(["cupy_add", "Memset (Device)", "Memcpy DtoD (Device -> Device)", "cupy_add",
                                    "sm90_xmma_fprop"])
    assert (got["kernels"], got["memsets"], got["memcpys"]) == (3, 1, 1)
    assert got["top_kernels"][0] == ("cupy_add", 2)


def test_interleave_without_chainer_reports_the_worker_error(tmp_path: Path) -> None:
    """Real worker processes on build folders that hold no CuPy: every answer is the worker's start error, the
    report and the table still come."""
    import importlib.util
    if importlib.util.find_spec("cupy"):
        pytest.skip("a CuPy is importable here")
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(BENCH / "chainer_speed.py"), "--interleave", f"before={empty}",
                           f"after={empty}", "--starts", "0", "--json", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["mode"] == "interleaved" and data["cases"] == {}
    assert "No module named 'cupy'" in data["builds"]["before"]["error"]
    table = subprocess.run([sys.executable, str(BENCH / "chainer_speed.py"), "--table", str(out)],
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    assert "Goals (after" in table.stdout
