"""SIGKILL a real `lgpatch refresh` at random moments (snapshot, file transaction, reset, a long re-apply): whatever
the moment, the next commands end with the edits in the tree *and* in exactly one new patch step."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from conftest import Project
from helpers import git, run_cli_subprocess, write_patchset

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TRIALS = int(os.environ.get("LGPATCH_AUTHORING_KILL_TRIALS", "6"))
SEED = int(os.environ.get("LGPATCH_AUTHORING_KILL_SEED", "7000"))
MANY = "name: many\ndescription: Many small steps above the edit.\nsteps:\n" + "".join(
    f"  - id: n{i}\n    insert: {{file: README, at: end, text: \"note {i}\"}}\n" for i in range(25))


@pytest.mark.parametrize("trial", range(TRIALS))
def test_refresh_killed_at_a_random_moment(project: Project, trial: int) -> None:
    write_patchset(project.recipes, "many", MANY)
    recipe = project.recipes / "demo.yaml"
    recipe.write_text(recipe.read_text() + "  - many\n")  # after the own patchset: a refresh re-applies all 25
    project.ok("apply", "demo", "-C", project.wt)
    project.edit_file("src/main.c", "return 5;", "return 55;")
    edited = (project.wt / "src/main.c").read_text()
    child = subprocess.Popen([sys.executable, "-m", "legacy_gpu_patch", "--recipe-path", str(project.recipes),
                              "refresh", "-C", str(project.wt), "-m", "Five is fifty-five"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # an uninterrupted refresh of this recipe takes 1-6 s on a busy 2-core machine
    time.sleep(random.Random(SEED + trial).uniform(0.2, 6.5))
    child.send_signal(signal.SIGKILL)
    child.wait()
    status = run_cli_subprocess("--recipe-path", project.recipes, "status", "-C", project.wt)
    assert status.returncode == 0, status.stderr
    assert not list(project.recipes.rglob(".*lgpatch-tmp*")), "a half-written recipe file was left behind"
    assert not (project.wt / ".git/lgpatch/journal.json").exists()
    again = run_cli_subprocess("--recipe-path", project.recipes, "refresh", "-C", project.wt, "-m",
                               "Five is fifty-five")
    said = f"status said:\n{status.stderr}\nrefresh said:\n{again.stderr}"
    assert again.returncode == 0 or "nothing to refresh" in again.stderr, said
    assert (project.wt / "src/main.c").read_text() == edited, said
    assert git(project.wt, "status", "--porcelain", "--untracked-files=all") == "", said
    manifest = (project.recipes / "patchsets/demo/patchset.yaml").read_text()
    assert manifest.count("- id:") == 1 and "id: five-is-fifty-five" in manifest, said
    steps = git(project.wt, "log", "--format=%(trailers:key=Lgpatch-Step,valueonly)").split()
    assert steps[-1] == "demo/five-is-fifty-five" and len(steps) == 26, said  # newest first: it is the oldest
