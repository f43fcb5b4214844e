"""`lgpatch ci chainer-1.24` end to end on the real Chainer 1.24.0 sdist from PyPI: apply (strict), build with
CUDA 13, the wheel repaired (only `$ORIGIN`-relative run paths, the CUDA libraries left to their wheels) and
labelled `1.24.0+lgpatch.cu130`, installed into a fresh venv where it imports and runs a tiny op on the CPU (with
the driver stub: this machine has no GPU), and the reports. One real run: ~5-40 minutes on a shared 2-core machine,
~1.2 GB of CUDA wheels on the first run (pip's cache keeps them).

LGPATCH_CHAINER_BUILD_PYTHON names an existing build interpreter (as in tests/integration/recipes); LGPATCH_CI_OUT
names a folder a finished `lgpatch ci chainer-1.24 --out DIR` left, to check it again without rebuilding.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import remove_venv, requires_nvcc, run_cli_subprocess

pytestmark = [pytest.mark.integration, pytest.mark.network, pytest.mark.slow, requires_nvcc]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, str]]:
    reuse = os.environ.get("LGPATCH_CI_OUT")
    if reuse:
        yield Path(reuse), 0, "(reused)"
        return
    root = tmp_path_factory.mktemp("ci-chainer")
    python = os.environ.get("LGPATCH_CHAINER_BUILD_PYTHON")
    if not python:
        subprocess.run([sys.executable, "-m", "venv", str(root / "build-venv")], check=True)
        python = str(root / "build-venv" / "bin" / "python")
    env = {"LGPATCH_CACHE": str(root / "cache"), "MAX_JOBS": "2"}
    proc = run_cli_subprocess("ci", "chainer-1.24", "--cuda", "13.0", "--out", root / "job", "--build-python",
                              python, "-j", "2", "--quiet", env=env, timeout=5400)
    yield root / "job", proc.returncode, proc.stdout + proc.stderr
    remove_venv(root / "build-venv")
    remove_venv(root / "job" / "smoke-venv")


def test_ci_job_succeeds_with_a_labelled_repaired_wheel(job: tuple[Path, int, str]) -> None:
    out, code, log = job
    assert code == 0, log[-6000:]
    wheels = sorted((out / "wheels").glob("*.whl"))
    assert len(wheels) == 1 and wheels[0].name.startswith("chainer-1.24.0+lgpatch.cu130-cp"), wheels
    report = json.loads((out / "reports" / "ci.json").read_text())
    assert report["status"] == "ok" and report["wheel"]["version"] == "1.24.0+lgpatch.cu130"
    runpaths = report["wheel"]["runpaths"]
    assert len(runpaths) >= 15  # every CuPy extension module
    for member, entries in runpaths.items():
        assert entries and all(e.startswith("$ORIGIN") for e in entries), (member, entries)
        assert "$ORIGIN/../../nvidia/cu13/lib" in entries
    with zipfile.ZipFile(wheels[0]) as zf:
        names = zf.namelist()
        assert not any("libcublas" in n or "libcudart" in n for n in names)  # left to their wheels
        ledger = json.loads(zf.read("chainer-1.24.0+lgpatch.cu130.dist-info/LGPATCH.json"))
    assert ledger["recipe"] == "chainer-1.24" and any(s["step"].startswith("cupy-cuda13-wheels/")
                                                      for s in ledger["steps"])


def test_smoke_test_imported_and_ran_on_the_cpu(job: tuple[Path, int, str]) -> None:
    out, code, log = job
    assert code == 0, log[-3000:]
    report = json.loads((out / "reports" / "ci.json").read_text())
    cases = {c["name"]: c for c in report["smoke"]["cases"]}
    assert cases["install"]["status"] == "passed" and cases["cpu"]["status"] == "passed", cases
    assert "cpu ok" in cases["cpu"]["detail"]
    assert cases["gpu"]["status"] == ("passed" if not report["smoke"]["gpu"].startswith("no GPU") else "skipped")
    # the smoke venv's chainer is the labelled wheel, installed the normal way
    py = Path(report["smoke"]["venv"]) / "bin" / "python"
    shown = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('chainer'))"],
                           capture_output=True, text=True)
    assert shown.stdout.strip() == "1.24.0+lgpatch.cu130", shown.stderr


def test_reports_are_written(job: tuple[Path, int, str]) -> None:
    out, _, _ = job
    reports = out / "reports"
    suite = ET.parse(reports / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert {c.get("name") for c in suite.iter("testcase")} >= {"apply", "build", "repair", "smoke", "smoke-cpu"}
    assert (reports / "build" / "build.log").stat().st_size > 0
    assert "lgpatch ci chainer-1.24" in (reports / "summary.md").read_text()
    assert json.loads((reports / "ci.json").read_text())["compiler_cache"]["kind"] in ("ccache", "sccache", "none")
