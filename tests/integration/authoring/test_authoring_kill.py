"""refresh killed (SIGKILL) or interrupted (SIGINT) midway, as a real child process: nothing the user edited is lost,
and the next command repairs.

The child stops at a named fault point (LGPATCH_FAULT_PAUSE, see authoring/txn.py) so the signal lands exactly there:
  refresh:files    the new patch file is written, patchset.yaml not yet — the next command puts all files back;
                   the edits are still in the work tree (and in a rescue ref, refs/lgpatch/rescue/…)
  refresh:reapply  all recipe files are written, the tree not yet reset — the next edit/refresh finishes the re-apply
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Project
from helpers import git, run_cli_subprocess

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _edit(project: Project) -> str:
    project.edit_file("src/main.c", "return 5;", "return 55;")
    (project.wt / "src" / "extra.c").write_text("int extra(void) { return 3; }\n")
    return (project.wt / "src" / "main.c").read_text()


def _default_sigint() -> None:
    # A shell starts background jobs with SIGINT ignored, and Python then installs no KeyboardInterrupt handler:
    # under `cmd &` (a CI runner, nohup) the SIGINT cases would test nothing. The child gets the default back.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _refresh_stopped_at(project: Project, point: str, sig: signal.Signals) -> int:
    child = subprocess.Popen(
        [sys.executable, "-m", "legacy_gpu_patch", "--recipe-path", str(project.recipes), "refresh", "-C",
         str(project.wt), "-m", "Five is fifty-five"],
        env={**os.environ, "LGPATCH_FAULT_PAUSE": point}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, preexec_fn=_default_sigint,
    )
    assert child.stderr is not None
    seen = []
    for line in child.stderr:
        seen.append(line)
        if f"fault point {point} reached" in line:
            break
    else:
        child.wait()
        pytest.fail(f"the child never reached {point}: {''.join(seen)}")
    child.send_signal(sig)
    child.stderr.read()
    return child.wait(timeout=60)


def _lg(project: Project, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli_subprocess("--recipe-path", project.recipes, *args)


def _files(project: Project) -> dict[str, str]:
    folder = project.recipes
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def _rescue_refs(project: Project) -> list[str]:
    return git(project.wt, "for-each-ref", "--format=%(refname)", "refs/lgpatch/rescue").split()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_while_writing_the_recipe_files(project: Project, sig: signal.Signals) -> None:
    before = _files(project)
    main = _edit(project)
    code = _refresh_stopped_at(project, "refresh:files", sig)
    if sig == signal.SIGINT:
        assert code == 10  # interrupted: the files were put back by the process itself
        assert _files(project) == before
    else:
        assert code == -signal.SIGKILL
        assert _files(project) != before  # the new patch file was written before the kill
    status = _lg(project, "status", "-C", project.wt)
    assert status.returncode == 0, status.stderr
    if sig == signal.SIGKILL:
        assert "put back the recipe and patchset files of an interrupted refresh" in status.stderr
    assert _files(project) == before
    assert not (project.wt / ".git/lgpatch/journal.json").exists()
    # the edits are where the user left them, and in a rescue ref as well
    assert (project.wt / "src" / "main.c").read_text() == main
    assert (project.wt / "src" / "extra.c").is_file()
    refs = _rescue_refs(project)
    assert refs and git(project.wt, "show", f"{refs[-1]}:src/main.c") + "\n" == main
    done = _lg(project, "refresh", "-C", project.wt, "-m", "Five is fifty-five")
    assert done.returncode == 0, done.stderr
    assert (project.wt / "src" / "main.c").read_text() == main
    assert git(project.wt, "status", "--porcelain", "--untracked-files=all") == ""
    assert "+int f5(void) { return 55; }" in (project.recipes / "patchsets/demo/five-is-fifty-five.patch").read_text()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_before_the_reapply(project: Project, sig: signal.Signals) -> None:
    main = _edit(project)
    _refresh_stopped_at(project, "refresh:reapply", sig)
    patch = project.recipes / "patchsets/demo/five-is-fifty-five.patch"
    manifest = (project.recipes / "patchsets/demo/patchset.yaml").read_text()
    assert patch.is_file() and "id: five-is-fifty-five" in manifest
    # a plain apply refuses to run over the (still uncommitted) edits instead of losing them
    applied = _lg(project, "apply", "demo", "-C", project.wt)
    assert applied.returncode == 6 and (project.wt / "src" / "main.c").read_text() == main
    again = _lg(project, "refresh", "-C", project.wt)
    assert again.returncode == 0, again.stderr
    assert "finishing the re-apply of an interrupted refresh" in again.stderr
    assert "finished the interrupted refresh of demo/five-is-fifty-five" in again.stdout
    assert (project.wt / "src" / "main.c").read_text() == main
    assert git(project.wt, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(project.wt, "log", "-1", "--format=%(trailers:key=Lgpatch-Step,valueonly)").strip() \
        == "demo/five-is-fifty-five"
    assert not (project.wt / ".git/lgpatch/reapply.json").exists()


def test_edits_made_after_the_kill_are_not_overwritten(project: Project) -> None:
    _edit(project)
    _refresh_stopped_at(project, "refresh:reapply", signal.SIGKILL)
    (project.wt / "README").write_text("edited after the kill\n")
    again = _lg(project, "refresh", "-C", project.wt)
    assert again.returncode == 6 and "has edits made since" in again.stderr
    assert (project.wt / "README").read_text() == "edited after the kill\n"
    assert (project.wt / "src" / "extra.c").is_file()
