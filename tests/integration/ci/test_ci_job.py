"""`lgpatch ci` on a tiny pure-Python fixture project (real git, real pip wheel, real venv): the reports, the local
label, and the exit code of each failure class — a build that fails because the recipe misses a step (9) and a
wheel that builds but fails its smoke test (13)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import requires_nvcc, run_cli_subprocess
from helpers.ci_projects import DRIFTED_STEP, tiny_upstream, write_tiny_recipe

pytestmark = [pytest.mark.integration]


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    up = tiny_upstream(tmp_path / "upstream")
    folder = tmp_path / "recipes"
    write_tiny_recipe(folder, up)
    write_tiny_recipe(folder, up, name="tinynobuild", leave_out="py3-print")
    write_tiny_recipe(folder, up, name="tinynosmoke", leave_out="collections-abc")
    write_tiny_recipe(folder, up, name="tinycuda", cuda=True)
    write_tiny_recipe(folder, up, name="tinydrift", extra_step=DRIFTED_STEP)
    return folder


def _ci(recipe: Path, out: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli_subprocess("ci", recipe, "--out", out, *args, env=env, timeout=600)


def test_a_good_job_gives_a_labelled_wheel_that_installs_and_reports(recipes: Path, tmp_path: Path) -> None:
    out = tmp_path / "job"
    proc = _ci(recipes / "tiny.yaml", out, "--param", "flavor=fancy")
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheels = list((out / "wheels").glob("*.whl"))
    assert [w.name for w in wheels] == ["tinypkg-1.0.0+lgpatch-py2.py3-none-any.whl"]
    report = json.loads((out / "reports" / "ci.json").read_text())
    assert report["status"] == "ok" and report["exit_code"] == 0 and report["job"] == "tiny-flavorfancy"
    assert [s["status"] for s in report["stages"]] == ["passed"] * 4
    assert report["apply"]["applied"] == ["tiny-fixes/py3-print", "tiny-fixes/collections-abc", "tiny-fixes/flavor"]
    assert report["wheel"]["built_as"] == "tinypkg-1.0.0-py2.py3-none-any.whl"
    assert report["wheel"]["version"] == "1.0.0+lgpatch"
    assert {c["name"]: c["status"] for c in report["smoke"]["cases"]} == {"install": "passed", "cpu": "passed",
                                                                          "gpu": "skipped"}
    assert (out / "reports" / "build" / "report.json").is_file()  # the build's own reports beside it
    suite = ET.parse(out / "reports" / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    # the smoke venv really has the labelled wheel, with the patched flavor
    py = out / "smoke-venv" / "bin" / "python"
    shown = subprocess.run([py, "-c", "import tinypkg, importlib.metadata as m; "
                            "print(tinypkg.FLAVOR, m.version('tinypkg'))"], capture_output=True, text=True,
                           cwd=tmp_path)
    assert shown.stdout.split() == ["fancy", "1.0.0+lgpatch"], shown.stderr


def test_a_recipe_missing_a_step_fails_the_build_with_exit_9(recipes: Path, tmp_path: Path) -> None:
    out = tmp_path / "job"
    proc = _ci(recipes / "tinynobuild.yaml", out)
    assert proc.returncode == 9, proc.stderr[-3000:]
    assert "lgpatch: build failed: build command compile failed" in proc.stderr
    report = json.loads((out / "reports" / "ci.json").read_text())
    assert report["failure_class"] == "BUILD" and report["failed_stage"] == "build"
    assert [s["status"] for s in report["stages"]] == ["passed", "failed", "not-run", "not-run"]
    cause = report["build"]["first_finding"]
    assert cause["where"] == "tinypkg/legacy.py:2" and "print" in cause["message"]
    assert report["wheel"] is None and not list(out.glob("wheels/*.whl"))


def test_a_wheel_that_does_not_import_fails_the_smoke_test_with_exit_13(recipes: Path, tmp_path: Path) -> None:
    out = tmp_path / "job"
    proc = _ci(recipes / "tinynosmoke.yaml", out)
    assert proc.returncode == 13, proc.stderr[-3000:]
    report = json.loads((out / "reports" / "ci.json").read_text())
    assert report["failure_class"] == "VERIFY" and report["failed_stage"] == "smoke"
    cpu = next(c for c in report["smoke"]["cases"] if c["name"] == "cpu")
    assert cpu["status"] == "failed" and "cannot import name 'Mapping' from 'collections'" in cpu["detail"]
    assert cpu["code"].startswith("import tinypkg")
    assert report["wheel"]["name"].startswith("tinypkg-1.0.0+lgpatch-")  # built and repaired, then refused


def test_on_github_actions_annotations_and_step_summary(recipes: Path, tmp_path: Path) -> None:
    summary = tmp_path / "step_summary.md"
    proc = _ci(recipes / "tinynobuild.yaml", tmp_path / "job",
               env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 9
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error")]
    assert 1 <= len(errors) <= 10
    assert any("file=tinypkg/legacy.py,line=2" in e for e in errors), errors  # the build's finding
    assert any("lgpatch ci tinynobuild%3A BUILD in build" in e for e in errors), errors  # the job's own
    assert "lgpatch ci tinynobuild: failed" in summary.read_text()


@requires_nvcc
def test_the_label_records_the_cuda_version(recipes: Path, tmp_path: Path) -> None:
    out = tmp_path / "job"
    proc = _ci(recipes / "tinycuda.yaml", out, "--cuda", "13.0", "--compiler-cache", "none")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [w.name for w in (out / "wheels").glob("*.whl")] == ["tinypkg-1.0.0+lgpatch.cu130-py2.py3-none-any.whl"]
    report = json.loads((out / "reports" / "ci.json").read_text())
    assert report["compiler_cache"]["kind"] == "none"


def test_a_rerun_into_the_same_folder_is_up_to_date(recipes: Path, tmp_path: Path) -> None:
    out = tmp_path / "job"
    assert _ci(recipes / "tiny.yaml", out).returncode == 0
    again = _ci(recipes / "tiny.yaml", out, "--format", "json")
    assert again.returncode == 0, again.stderr[-2000:]
    report = json.loads(again.stdout)
    assert report["apply"]["applied"] == [] and report["apply"]["unchanged"] == 3
    assert len(list((out / "wheels").glob("*.whl"))) == 1


def test_a_step_that_does_not_apply_stops_the_job_with_exit_5(recipes: Path, tmp_path: Path) -> None:
    out = tmp_path / "job"
    proc = _ci(recipes / "tinydrift.yaml", out)
    assert proc.returncode == 5, proc.stderr[-3000:]
    assert "tinydrift-fixes/drifted" in proc.stderr
    report = json.loads((out / "reports" / "ci.json").read_text())
    assert report["failure_class"] == "PATCH" and report["failed_stage"] == "apply"
    assert [s["status"] for s in report["stages"]] == ["failed", "not-run", "not-run", "not-run"]


def test_no_toolkit_for_the_jobs_cuda_is_exit_14(recipes: Path, tmp_path: Path) -> None:
    if Path("/usr/local/cuda-11.2").exists():
        pytest.skip("this machine has CUDA 11.2")
    proc = _ci(recipes / "tinycuda.yaml", tmp_path / "job", "--cuda", "11.2")
    assert proc.returncode == 14, proc.stderr[-3000:]
    assert "no CUDA 11.2 toolkit found" in proc.stderr
    report = json.loads((tmp_path / "job" / "reports" / "ci.json").read_text())
    assert report["failure_class"] == "TOOL" and report["failed_stage"] == "build"


def test_a_bad_parameter_is_exit_3_before_anything_runs(recipes: Path, tmp_path: Path) -> None:
    proc = _ci(recipes / "tiny.yaml", tmp_path / "job", "--param", "flavor=spicy")
    assert proc.returncode == 3 and "'spicy' is not one of plain, fancy" in proc.stderr
    assert not (tmp_path / "job").exists()
