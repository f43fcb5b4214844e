"""Racing lgpatch processes: two applies into a workdir that does not exist yet, and lock errors that name the
live holder. Real child processes, real git; no timing asserts (who wins is up to the scheduler)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TORCHLIKE, git, git_recipe, make_upstream, run_cli_subprocess, write_recipe

from legacy_gpu_patch.errors import ExitCode
from legacy_gpu_patch.ledger.worktree import WorkTree

pytestmark = pytest.mark.integration

STEPS = "".join(f"  - id: s{i}\n    insert: {{file: README.md, at: end, text: 'line {i}'}}\n" for i in range(6))


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    files = {**TORCHLIKE, **{f"src/f{i}.h": f"int f{i};\n" * 50 for i in range(300)}}
    up = make_upstream(tmp_path / "up", files)
    d = tmp_path / "recipes"
    write_recipe(d, git_recipe("race", "race fixture", up, STEPS), "race.yaml")
    return d


def _start(recipes: Path, wt: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "legacy_gpu_patch", "--recipe-path", str(recipes), "apply",
                             "race", "--workdir", str(wt)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ})


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_racing_applies_into_a_new_workdir(recipes: Path, tmp_path: Path, round_: int) -> None:
    ref = tmp_path / "reference"
    assert run_cli_subprocess("--recipe-path", recipes, "apply", "race", "--workdir", ref).returncode == 0
    wt = tmp_path / "new" / "wt"  # neither it nor its parent exists yet
    if round_ == 2:  # the other way in: an empty folder the user made
        wt.mkdir(parents=True)
    children = [_start(recipes, wt) for _ in range(3)]
    results = [(c.pid, *c.communicate(timeout=300), c.returncode) for c in children]
    pids = {pid for pid, *_ in results}
    codes = [code for *_, code in results]
    for pid, _out, err, code in results:
        assert "Traceback" not in err and "internal error" not in err and "Errno" not in err, err
        assert code in (0, ExitCode.STATE), err
        if code == ExitCode.STATE:
            assert "another lgpatch process (pid " in err, err
            named = int(err.split("another lgpatch process (pid ", 1)[1].split(")", 1)[0].split(",")[0])
            assert named in pids - {pid}, err  # a live rival, never itself or a dead pid
    assert codes.count(0) >= 1
    # The winner's tree is whole: the reference tree, clean, nothing half-made beside it.
    assert git(wt, "rev-parse", "HEAD^{tree}") == git(ref, "rev-parse", "HEAD^{tree}")
    assert git(wt, "status", "--porcelain", "--untracked-files=all") == ""
    assert [p.name for p in wt.parent.iterdir()] == ["wt"]
    assert run_cli_subprocess("--recipe-path", recipes, "apply", "race", "--workdir", wt).returncode == 0


def test_lock_error_names_the_live_holder_not_a_dead_pid(recipes: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    assert run_cli_subprocess("--recipe-path", recipes, "apply", "race", "--workdir", wt).returncode == 0
    # The lock file still says which (now dead) process last held it exclusively.
    written = (wt / ".git/lgpatch/lock").read_text()
    assert written.startswith("pid ") and int(written[4:]) != os.getpid()
    reader = WorkTree.open(wt, shared=True)  # a shared holder (a build) writes no pid
    try:
        proc = run_cli_subprocess("--recipe-path", recipes, "apply", "race", "--workdir", wt)
        assert proc.returncode == ExitCode.STATE, proc.stderr
        assert f"another lgpatch process (pid {os.getpid()})" in proc.stderr
    finally:
        reader.release_lock()
