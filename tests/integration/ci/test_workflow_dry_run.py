"""A local dry run of docs/ci/nightly.yml: plan → the matrix jobs → the GPU smoke job → the summary, executing the
`run:` commands of its steps exactly as written (bash -eo pipefail, GitHub's ${{ }} values, $GITHUB_OUTPUT,
$GITHUB_ENV, $GITHUB_STEP_SUMMARY), on a tiny fixture recipe swept over two values. Artifacts and the summary's
cache are emulated by copying folders (upload-/download-artifact, cache/restore and cache/save, with restore-keys as
prefixes); the other actions (checkout, setup-python, the build caches) have nothing to do here, and the `install*`
steps are skipped because lgpatch is already installed in this environment. So the template and the commands
cannot drift apart: a renamed option or output breaks this test.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO
from helpers.ci_projects import tiny_upstream, write_tiny_recipe

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKFLOW = REPO / "docs" / "ci" / "nightly.yml"
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class DryRun:
    def __init__(self, root: Path, inputs: dict[str, Any], run_id: str = "1") -> None:
        self.wf = yaml.safe_load(WORKFLOW.read_text())
        self.root = root
        self.inputs = inputs
        self.run_id = run_id
        self.caches = root.parent / "actions-cache"  # outlives a run, as the Actions cache does
        self.artifacts = root / "artifacts"
        self.summary = root / "step_summary.md"
        self.outputs: dict[str, dict[str, str]] = {}  # job → its outputs
        self.log: list[str] = []

    def value(self, expr: str, ctx: dict[str, Any]) -> str:
        """The subset of GitHub's expression language the template uses in run/env: a || b, 'literal', contexts."""
        for alt in (a.strip() for a in expr.split("||")):
            if alt.startswith("'") and alt.endswith("'"):
                got = alt[1:-1]
            else:
                node: Any = ctx
                for part in alt.split("."):
                    if not isinstance(node, dict):
                        raise AssertionError(f"unsupported expression {expr!r}")
                    node = node.get(part, "")
                got = "" if node is None else (json.dumps(node) if isinstance(node, (dict, list)) else str(node))
                if isinstance(node, bool):
                    got = "true" if node else "false"
            if got:
                return got
        return ""

    def render(self, text: str, ctx: dict[str, Any]) -> str:
        return _EXPR.sub(lambda m: self.value(m.group(1), ctx), str(text))

    def run_job(self, name: str, matrix: dict[str, Any] | None = None) -> dict[str, str]:
        job = self.wf["jobs"][name]
        ws = self.root / "ws" / (name + ("-" + matrix["job"] if matrix else ""))
        ws.mkdir(parents=True)
        ctx: dict[str, Any] = {"inputs": self.inputs, "matrix": matrix or {}, "steps": {},
                               "needs": {n: {"outputs": self.outputs.get(n, {})} for n in self.wf["jobs"]},
                               "github": {"workspace": str(ws), "run_id": self.run_id}, "runner": {"temp": str(ws)},
                               "vars": {}}
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(ws),
               "GITHUB_STEP_SUMMARY": str(self.summary)}
        ctx["env"] = {}
        for key, val in {**self.wf.get("env", {}), **job.get("env", {})}.items():
            env[key] = ctx["env"][key] = self.render(val, ctx)
        for i, step in enumerate(job["steps"]):
            sid = step.get("id", f"step{i}")
            if "uses" in step:
                self._action(step, ws, ctx)
                continue
            if sid.startswith("install"):
                self.log.append(f"{name}: skipped {sid} (lgpatch is installed here)")
                continue
            out, genv = ws / f".out-{i}", ws / f".env-{i}"
            out.touch()
            genv.touch()
            step_env = {**env, "GITHUB_OUTPUT": str(out), "GITHUB_ENV": str(genv)}
            step_env.update({k: self.render(v, ctx) for k, v in step.get("env", {}).items()})
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                                   self.render(step["run"], ctx)], cwd=ws, env=step_env, capture_output=True,
                                  text=True, timeout=900)
            self.log.append(f"{name}/{sid}: exit {proc.returncode}")
            assert proc.returncode == 0, f"{name}/{sid} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            ctx["steps"][sid] = {"outputs": dict(line.split("=", 1) for line in out.read_text().splitlines()
                                                 if "=" in line)}
            env.update(dict(line.split("=", 1) for line in genv.read_text().splitlines() if "=" in line))
        self.outputs[name] = {k: self.render(v, ctx) for k, v in job.get("outputs", {}).items()}
        return self.outputs[name]

    def _action(self, step: dict[str, Any], ws: Path, ctx: dict[str, Any]) -> None:
        uses = step["uses"]
        if not uses.startswith(("actions/upload-artifact", "actions/download-artifact", "actions/cache/")):
            self.log.append(f"skipped action {uses}")
            return
        args = {k: self.render(v, ctx) for k, v in step.get("with", {}).items()}
        if uses.startswith("actions/cache/save"):
            shutil.copytree(ws / args["path"], self.caches / args["key"])
        elif uses.startswith("actions/cache/restore"):
            prefixes = [args["key"], *args.get("restore-keys", "").split()]
            hits = [c for p in prefixes for c in sorted(self.caches.glob("*"), reverse=True) if c.name.startswith(p)]
            if hits:
                shutil.copytree(hits[0], ws / args["path"])
        elif uses.startswith("actions/upload-artifact"):
            src = ws / args["path"]
            if not src.exists() or not any(src.iterdir()):
                assert args.get("if-no-files-found") == "ignore", f"nothing to upload at {src}"
                return
            shutil.copytree(src, self.artifacts / args["name"])
        else:
            dest = ws / args["path"]
            if "name" in args:
                shutil.copytree(self.artifacts / args["name"], dest)
            else:
                for art in sorted(self.artifacts.iterdir()):
                    if fnmatch.fnmatch(art.name, args["pattern"]):
                        shutil.copytree(art, dest / art.name)


def test_plan_two_matrix_jobs_gpu_smoke_and_merge(tmp_path: Path) -> None:
    recipe = write_tiny_recipe(tmp_path / "recipes", tiny_upstream(tmp_path / "upstream"))
    run = DryRun(tmp_path / "run", {"recipes": str(recipe), "params": "flavor=plain,fancy", "gpu_smoke": True})
    plan = run.run_job("plan")
    assert plan["count"] == "2"
    entries = json.loads(plan["matrix"])["include"]
    assert [e["flavor"] for e in entries] == ["plain", "fancy"]
    for entry in entries:
        run.run_job("build", entry)
    for entry in entries:
        run.run_job("gpu", entry)
    run.run_job("summary")
    arts = sorted(p.name for p in run.artifacts.iterdir())
    assert arts == sorted(["summary"] + [f"{kind}-{e['job']}{suffix}" for e in entries
                                          for kind, suffix in (("wheel", ""), ("report", ""), ("report", "-gpu"))])
    assert [w.name for w in (run.artifacts / "wheel-tiny-flavorfancy").iterdir()] == [
        "tinypkg-1.0.0+lgpatch-py2.py3-none-any.whl"]
    merged = json.loads((run.artifacts / "summary" / "summary.json").read_text())
    assert merged["counts"] == {"jobs": 4, "ok": 4, "failed": 0}
    assert {j["job"] for j in merged["jobs"]} == {"tiny-flavorplain", "tiny-flavorfancy", "tiny-flavorplain-gpu",
                                                  "tiny-flavorfancy-gpu"}
    text = run.summary.read_text()
    assert "## lgpatch nightly: 4 of 4 job(s) ok, 0 failed" in text  # the run summary of the last job
    assert "lgpatch ci tiny-flavorplain: ok" in text  # each matrix job's step summary
    assert "vs last run" not in text  # the first night has no previous summary

    # The next night: its summary job finds this night's summary in the cache and compares.
    second = DryRun(tmp_path / "run2", run.inputs, run_id="2")
    second.artifacts.mkdir(parents=True)
    for art in run.artifacts.glob("report-*"):
        shutil.copytree(art, second.artifacts / art.name)
    second.run_job("summary")
    again = json.loads((second.artifacts / "summary" / "summary.json").read_text())
    assert {j["change"] for j in again["jobs"]} == {"ok (same wheel)"}
    assert "| vs last run |" in second.summary.read_text()
