"""`lgpatch build --baseline GREEN_LOG` end to end: a tiny real make/gcc project in a real work tree builds green
(its optional-header probe fails, as configure probes do, and make ignores it), then a commit breaks the build
with a compiler error. With the green build's log as baseline only the new error is reported, in the JSON report,
in the text summary and in the report files; without it the probe's error is reported too. A missing or
unreadable baseline is a CONFIG error (exit 3) named before anything is built."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from legacy_gpu_patch.errors import ExitCode

CC = shutil.which("cc")
MAKE = shutil.which("make")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CC is None or MAKE is None, reason="needs cc and make"),
]

RECIPE = """\
name: baseline-demo
description: A tiny make project whose build has an optional-header probe that fails.
source:
  sdist: {url: "https://example.invalid/baseline-demo-1.0.tar.gz", sha256: "%s"}
steps:
  - id: nothing-yet
    insert: {file: NOTES, text: "demo\\n", at: end}
ignore: ["*.o"]
build:
  commands:
    - name: compile
      phase: build
      argv: [make]
""" % ("0" * 64)

MAKEFILE = """\
all: probe.o main.o
probe.o: probe.c
\t-cc -c probe.c -o probe.o
main.o: main.c
\tcc -Wall -c main.c -o main.o
"""
PROBE = "#include <lgpatch_optional_feature.h>\nint probe;\n"
GREEN_MAIN = "int main(void) {\n  int unused_value;\n  return 0;\n}\n"
BROKEN_MAIN = "int main(void) {\n  int unused_value;\n  uint8_t y = 0;\n  return y;\n}\n"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t", "LC_ALL": "C"}


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=tree, check=True, env=ENV, capture_output=True, text=True).stdout


def _work_tree(tmp_path: Path) -> Path:
    from legacy_gpu_patch.ledger.worktree import State, WorkTree

    tree = tmp_path / "tree"
    tree.mkdir()
    for name, text in (("Makefile", MAKEFILE), ("probe.c", PROBE), ("main.c", GREEN_MAIN)):
        (tree / name).write_text(text, encoding="utf-8")
    recipe = tmp_path / "baseline-demo.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "pristine")
    WorkTree.create(tree, State(recipe="baseline-demo", recipe_file=str(recipe), params={}, source="test fixture",
                                baseline=_git(tree, "rev-parse", "HEAD").strip()), ignore=("*.o",))
    return tree


def _build(tree: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "legacy_gpu_patch", "build", "--workdir", str(tree), *map(str, args)],
                          cwd=tree, env=ENV, capture_output=True, text=True, timeout=300)


def _green_log(tree: Path, tmp_path: Path) -> Path:
    green = _build(tree, "--format", "json")
    assert green.returncode == 0, green.stderr
    # the green build's own findings: the failed probe (an error line that does not fail the build)
    assert "lgpatch_optional_feature.h" in json.dumps(json.loads(green.stdout)["findings"])
    log = tmp_path / "green.log"
    shutil.copy(tree / ".git" / "lgpatch" / "build" / "build.log", log)
    (tree / "main.c").write_text(BROKEN_MAIN, encoding="utf-8")
    _git(tree, "commit", "-q", "-am", "use uint8_t without its header")
    return log


def test_build_with_a_baseline_reports_only_the_new_findings(tmp_path: Path) -> None:
    tree = _work_tree(tmp_path)
    green = _green_log(tree, tmp_path)

    plain = _build(tree, "--format", "json")
    assert plain.returncode == int(ExitCode.BUILD), plain.stderr
    everything = [(f["rule"], f["message"]) for f in json.loads(plain.stdout)["findings"]]
    known = [(rule, msg) for rule, msg in everything if "lgpatch_optional_feature.h" in msg]
    assert known  # without a baseline, the probe's error is reported too
    new = [(rule, msg) for rule, msg in everything if (rule, msg) not in known]
    assert any("uint8_t" in msg for _, msg in new)

    diffed = _build(tree, "--format", "json", "--baseline", green)
    assert diffed.returncode == int(ExitCode.BUILD), diffed.stderr
    findings = json.loads(diffed.stdout)["findings"]
    assert [(f["rule"], f["message"]) for f in findings] == new
    # the reports written for the run are the diffed ones too
    written = json.loads((tree / ".git" / "lgpatch" / "build" / "report.json").read_text(encoding="utf-8"))
    assert [(f["rule"], f["message"]) for f in written["findings"]] == new

    human = _build(tree, "--baseline", green)
    assert human.returncode == int(ExitCode.BUILD)
    summary = human.stderr[human.stderr.index("error finding"):]  # after the build's own output
    assert "uint8_t" in summary
    assert "lgpatch_optional_feature.h" not in summary


@pytest.mark.parametrize("problem", ["missing", "unreadable"])
def test_a_bad_baseline_is_a_config_error_before_anything_is_built(tmp_path: Path, problem: str) -> None:
    tree = _work_tree(tmp_path)
    baseline = tmp_path / "green.log"
    if problem == "unreadable":
        baseline.write_bytes(b"\x1f\x8b not really gzip")  # gzip's magic, then garbage: it cannot be read
    proc = _build(tree, "--baseline", baseline)
    assert proc.returncode == int(ExitCode.CONFIG), proc.stderr
    expected = "no such baseline log" if problem == "missing" else "cannot read baseline log"
    assert expected in proc.stderr and str(baseline) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tree / ".git" / "lgpatch" / "build" / "build.log").exists()  # nothing was built
    assert not list(tree.glob("*.o"))
