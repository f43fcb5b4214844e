"""`lgpatch hetero-bench` as a process, on the CPU: the dry run of the same split code a GPU run takes."""

from __future__ import annotations

import json
import re

import pytest
from helpers import run_cli_subprocess

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'legacy-gpu-patch[hetero]')")

# One OpenMP thread: on a small shared CI machine a team of threads spends more time waiting for its members to be
# scheduled than computing, and these tests check the code path, not speed.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
SMALL = ["--model", "seed", "--batch", "2", "--steps", "1", "--warmup", "0", "--cpu-threads", "1"]


@pytest.mark.slow
def test_cpu_dry_run_json_training_with_the_naive_version() -> None:
    proc = run_cli_subprocess("hetero-bench", "--device", "cpu", "--json", "--mode", "train", *SMALL,
                              env=ONE_THREAD, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # stdout holds the JSON alone; progress went to stderr
    assert "hetero-bench: seed train batch 2: naive two-process version (spawn)" in proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
    assert result["dry_run"] is True and result["accel"] == "cpu" and result["torch"] == torch.__version__
    assert result["spawn"]["spawn_import_torch_s"] > result["spawn"]["spawn_s"] > 0
    (case,) = result["cases"]
    assert (case["model"], case["mode"], case["batch"]) == ("seed", "train", 2)
    for key in ("cpu_s", "accel_s", "split_s", "tune_s"):
        assert case[key] > 0, key
    assert case["best_single_s"] == min(case["cpu_s"], case["accel_s"])
    assert case["ideal_speedup"] == pytest.approx(1 + case["best_single_s"] / max(case["cpu_s"], case["accel_s"]))
    assert case["fraction_of_ideal"] == pytest.approx(case["speedup"] / case["ideal_speedup"])
    check = case["check"]  # the split against the unsplit model from the same weights, both on this CPU
    assert check["output_max_abs_diff"] <= 1e-5 * max(1.0, check["output_max_abs"])
    assert check["grad_max_abs_diff"] <= 1e-5 * max(1.0, check["grad_max_abs"])
    assert case["auto"]["placement"] in ("split", "cpu", "accel") and case["auto"]["speedup"] >= 0.99
    assert [layer["name"] for layer in case["layers"]] == ["conv1", "conv2", "fc1", "fc2", "fc3"]
    assert all(layer["tuned"] for layer in case["layers"])
    conv1 = case["tuning"]["conv1"]  # every candidate the tuner predicted, and the ones it measured
    assert [c["host_units"] for c in conv1["candidates"]] == list(range(7))
    assert conv1["candidates"][0]["measured_s"] > 0 and conv1["candidates"][6]["measured_s"] > 0
    assert case["naive"]["step_s"] > 0 and case["naive"]["batch_per_copy"] == [1, 1]
    assert case["naive"]["copies_agree"] is True  # the gradient merge kept the two copies one model


def test_cpu_dry_run_text_for_inference() -> None:
    proc = run_cli_subprocess("hetero-bench", "--device", "cpu", "--mode", "inference", "--no-naive", *SMALL,
                              env=ONE_THREAD, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("DRY RUN: --device cpu puts both shares on this CPU")
    assert lines[2].split()[:4] == ["model", "mode", "batch", "cpu"]
    assert lines[3].split()[:3] == ["seed", "inference", "2"]
    assert lines[3].endswith("all accelerator") or re.search(r"\d+/\d+$", lines[3]), lines[3]  # ratio chosen
    assert "naive" not in proc.stderr
    assert any(line.startswith("split vs unsplit on the accelerator, same weights: largest difference ")
               for line in lines)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_no_cuda_says_so_and_points_to_the_dry_run() -> None:
    proc = run_cli_subprocess("hetero-bench", "--device", "cuda:0", *SMALL, env=ONE_THREAD)
    assert proc.returncode == 12
    assert proc.stderr.startswith("lgpatch: machine not suitable: no CUDA device for --device cuda:0: torch ")
    assert "hint: `lgpatch hetero-bench --device cpu` runs the same split code" in proc.stderr
    assert proc.stdout == ""
