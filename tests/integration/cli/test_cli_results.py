"""What commands hand to scripts, on real git work trees: `revert --json` and `export --json` parse as JSON; `export`
refuses a folder with files it did not write and replaces only its own earlier series; `status` puts its result on
stdout; `build` exits 9 and 10 through BuildError and InterruptedBuild."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    LAUNCH_CHECK_STEPS,
    Runner,
    Upstream,
    git,
    git_recipe,
    run_cli_subprocess,
    write_patchset,
    write_recipe,
)

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration

STEPS = """\
  - kernel-launch-check
  - id: rename
    when: {arch: ">=sm_80"}
    regex: {files: ["**/*.h"], exclude: ["c10/macros/*"], pattern: CAFFE2_API, replace: TORCH_API}
"""


@pytest.fixture
def recipes(tmp_path: Path, upstream: Upstream) -> Path:
    d = tmp_path / "recipes"
    write_patchset(d, "kernel-launch-check",
                   "name: kernel-launch-check\ndescription: Define the launch check.\n" + LAUNCH_CHECK_STEPS)
    write_recipe(d, git_recipe("demo", "A fixture recipe.", upstream, STEPS,
                               parameters="  arch: {type: arch, default: sm_86}\n"))
    return d


def applied(lgpatch: Runner, recipes: Path, wt: Path, *args: str) -> Path:
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt, *args)
    assert r.code == 0, r.err
    return wt


def test_revert_json(lgpatch: Runner, recipes: Path, tmp_path: Path, upstream: Upstream) -> None:
    wt = applied(lgpatch, recipes, tmp_path / "wt")
    r = lgpatch("revert", "-C", wt, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["baseline"] == upstream.commit and data["recipe"] == "demo" and data["workdir"] == str(wt)
    assert data["tree"] == git(upstream.path, "rev-parse", "v1.0^{tree}") == git(wt, "rev-parse", "HEAD^{tree}")
    assert data["stashed"] is False
    assert "back at the pristine baseline" in r.err  # the human line stays on stderr


def test_status_result_on_stdout_warnings_on_stderr(lgpatch: Runner, recipes: Path, tmp_path: Path) -> None:
    wt = applied(lgpatch, recipes, tmp_path / "wt")
    git(wt, "commit", "-q", "--allow-empty", "-m", "mine")
    r = lgpatch("--recipe-path", recipes, "status", "-C", wt)
    assert r.code == 0, r.err
    assert "applied  kernel-launch-check/define" in r.out and "clean: no uncommitted edits" in r.out
    assert "1 commit(s) on top not made by lgpatch" in r.err and "kernel-launch-check" not in r.err
    for i in range(7):
        (wt / f"mine-{i}.txt").write_text("x\n")
    r = lgpatch("--recipe-path", recipes, "status", "-C", wt)
    assert "dirty: 7 uncommitted path(s): " in r.out and all(f"mine-{i}.txt" in r.out for i in range(7))
    assert "…" not in r.out  # not a terminal: every path, nothing cut


def test_export_json_then_replaces_its_own_series(lgpatch: Runner, recipes: Path, tmp_path: Path) -> None:
    wt = applied(lgpatch, recipes, tmp_path / "wt")
    dest = tmp_path / "series"
    r = lgpatch("export", dest, "-C", wt, "--json")
    assert r.code == 0, r.err
    first = json.loads(r.out)
    assert len(first["patches"]) == 2 and first["replaced"] == [] and first["removed"] == []
    assert (dest / "series").read_text().split() == first["patches"]
    assert sorted(p.name for p in dest.iterdir()) == sorted([*first["patches"], "series", ".lgpatch-export.json"])
    # One step fewer (rename needs sm_80+): the second export replaces the first, leaving no stale patch behind.
    applied(lgpatch, recipes, wt, "--arch", "sm_75")
    r = lgpatch("export", dest, "-C", wt, "--json")
    assert r.code == 0, r.err
    second = json.loads(r.out)
    assert len(second["patches"]) == 1 and sorted(second["replaced"]) == sorted([*first["patches"], "series"])
    assert second["removed"] == [first["patches"][1]]
    assert sorted(p.name for p in dest.iterdir()) == sorted([*second["patches"], "series", ".lgpatch-export.json"])
    assert not list(tmp_path.glob(".series.lgpatch-export-*"))  # the scratch folder is gone


def test_export_refuses_a_folder_with_foreign_or_edited_files(lgpatch: Runner, recipes: Path,
                                                               tmp_path: Path) -> None:
    wt = applied(lgpatch, recipes, tmp_path / "wt")
    dest = tmp_path / "out"
    dest.mkdir()
    stale = dest / "0009-someone-elses.patch"
    stale.write_text("old\n")
    r = lgpatch("export", dest, "-C", wt)
    assert r.code == ExitCode.STATE, r.err
    assert "0009-someone-elses.patch" in r.err and "nothing was written" in r.err
    assert [p.name for p in dest.iterdir()] == [stale.name] and stale.read_text() == "old\n"
    # An export of lgpatch whose patch the user edited afterwards is the user's now: refused too.
    mine = tmp_path / "mine"
    assert lgpatch("export", mine, "-C", wt).code == 0
    patch = sorted(mine.glob("0001-*.patch"))[0]
    patch.write_text(patch.read_text() + "-- edited by hand\n")
    r = lgpatch("export", mine, "-C", wt)
    assert r.code == ExitCode.STATE and f"edited since the last export: {patch.name}" in r.err
    assert patch.read_text().endswith("-- edited by hand\n")


# --------------------------------------------------------------------------------------------- build: 9 and 10

SHA256_NOT_USED = "0" * 64  # the tree is made by the test; the recipe's sdist is never downloaded

BUILD_RECIPE = """\
name: shell-demo
description: A build that runs one shell command.
source:
  sdist: {url: "https://example.invalid/shell-demo-1.0.tar.gz", sha256: "SHA256"}
steps:
  - id: nothing-yet
    insert: {file: NOTES, text: "demo\\n", at: end}
build:
  commands:
    - name: compile
      phase: build
      argv: [sh, -c, SCRIPT]
"""


def build_tree(tmp_path: Path, script: str) -> Path:
    from legacy_gpu_patch.ledger.worktree import State, WorkTree

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "main.c").write_text("int main(void) { return 0; }\n")
    recipe = tmp_path / "shell-demo.yaml"
    recipe.write_text(BUILD_RECIPE.replace("SHA256", SHA256_NOT_USED).replace("SCRIPT", json.dumps(script)))
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "pristine")
    WorkTree.create(tree, State(recipe="shell-demo", recipe_file=str(recipe), params={}, source="test fixture",
                                baseline=git(tree, "rev-parse", "HEAD")), ignore=())
    return tree


def test_failed_build_exits_9_from_build_error(tmp_path: Path) -> None:
    tree = build_tree(tmp_path, "echo 'main.c:1:1: fatal error: boom.h: No such file or directory' >&2; exit 3")
    proc = run_cli_subprocess("build", "-C", tree, "--format", "json")
    assert proc.returncode == ExitCode.BUILD, proc.stderr
    assert json.loads(proc.stdout)["status"] == "failed"
    assert "lgpatch: build failed: compile: exit 3" in proc.stderr


def test_interrupted_build_exits_10_from_interrupted_build(tmp_path: Path) -> None:
    tree = build_tree(tmp_path, "touch started; sleep 60")
    proc = subprocess.Popen([sys.executable, "-m", "legacy_gpu_patch", "build", "-C", str(tree), "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tree / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED, err
    assert json.loads(out)["status"] == "interrupted"
    assert "lgpatch: build interrupted: the report was written to" in err
