"""A user's commits are never dropped by a command that moves HEAD, git lock files left by a killed lgpatch child
are removed by the next command, and partial changes are kept under refs/lgpatch/rescued/<n>, not in the user's
`git stash list`.

The killed states are made with the real pieces: the journal is opened with WorkTree.journal and never closed (what
a SIGKILL leaves), and git's own lock files are left by a real `git update-ref` killed with SIGKILL while it holds
them (its reference-transaction hook sleeps inside the lock window).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import Upstream, git, git_recipe, run_cli_subprocess, write_recipe

from legacy_gpu_patch.errors import ExitCode
from legacy_gpu_patch.ledger.worktree import WorkTree

pytestmark = pytest.mark.integration

STEPS = """\
  - id: one
    insert: {file: README.md, at: end, text: one}
  - id: two
    insert: {file: README.md, at: end, text: two}
"""


@pytest.fixture
def wt(lgpatch, tmp_path: Path, upstream: Upstream) -> Path:
    recipes = tmp_path / "recipes"
    write_recipe(recipes, git_recipe("rec", "recovery fixture", upstream, STEPS), "rec.yaml")
    tree = tmp_path / "wt"
    r = lgpatch("--recipe-path", recipes, "apply", "rec", "--workdir", tree)
    assert r.code == 0, r.err
    return tree


def user_commit(wt: Path, name: str = "mine.txt") -> str:
    (wt / name).write_text("my work\n")
    git(wt, "add", name)
    git(wt, "commit", "-qm", f"my work on {name}")
    return git(wt, "rev-parse", "HEAD")


def interrupted(wt: Path, op: str, **info: object) -> None:
    """Leave the journal exactly as a process killed inside `op` leaves it."""
    tree = WorkTree.open(wt)
    tree.journal(op, **info).__enter__()
    tree.release_lock()


# ------------------------------------------------------------------------------------------- item 2: revert


def test_revert_refuses_to_drop_user_commits(lgpatch, wt: Path) -> None:
    mine = user_commit(wt)
    second = user_commit(wt, "more.txt")
    r = lgpatch("revert", "-C", wt)
    assert r.code == ExitCode.STATE, r.err
    assert mine[:12] in r.err and second[:12] in r.err and "my work on mine.txt" in r.err
    assert "--keep-commits" in r.err
    assert git(wt, "rev-parse", "HEAD") == second  # nothing moved
    assert git(wt, "status", "--porcelain") == ""


def test_revert_keep_commits_moves_them_to_a_named_branch(lgpatch, wt: Path, upstream: Upstream) -> None:
    mine = user_commit(wt)
    r = lgpatch("revert", "-C", wt, "--keep-commits", "mywork")
    assert r.code == 0, r.err
    assert "branch mywork" in r.err
    assert git(wt, "rev-parse", "mywork") == mine
    assert git(wt, "rev-parse", "HEAD") == upstream.commit
    # An existing branch is never overwritten.
    user_commit(wt, "again.txt")
    again = git(wt, "rev-parse", "HEAD")
    r = lgpatch("revert", "-C", wt, "--keep-commits", "mywork")
    assert r.code == ExitCode.STATE and "already exists" in r.err
    assert git(wt, "rev-parse", "HEAD") == again and git(wt, "rev-parse", "mywork") == mine


def test_revert_without_user_commits_needs_no_flag(lgpatch, wt: Path, upstream: Upstream) -> None:
    assert lgpatch("revert", "-C", wt).code == 0
    assert git(wt, "rev-parse", "HEAD") == upstream.commit


def test_interrupted_keep_commits_revert_still_keeps_them(lgpatch, wt: Path, upstream: Upstream) -> None:
    mine = user_commit(wt)
    base = git(wt, "rev-list", "--max-parents=0", "HEAD")
    interrupted(wt, "reset", target=base, keep_branch="kept")  # killed before `git branch kept` ran
    r = lgpatch("status", "-C", wt)
    assert r.code == 0, r.err
    assert git(wt, "rev-parse", "kept") == mine and git(wt, "rev-parse", "HEAD") == upstream.commit


def test_repair_never_resets_away_a_commit_made_after_the_kill(lgpatch, wt: Path) -> None:
    interrupted(wt, "step", step="recipe/two", digest="x")
    mine = user_commit(wt)
    r = lgpatch("status", "-C", wt)
    assert r.code == ExitCode.STATE, r.err
    assert mine[:12] in r.err and "HEAD has moved" in r.err
    assert git(wt, "rev-parse", "HEAD") == mine


def test_rewind_refuses_with_user_commits(lgpatch, wt: Path, tmp_path: Path) -> None:
    mine = user_commit(wt)
    recipe = tmp_path / "recipes/rec.yaml"
    recipe.write_text(recipe.read_text().replace("text: one", "text: ONE"))
    r = lgpatch("--recipe-path", tmp_path / "recipes", "apply", "rec", "--workdir", wt)
    assert r.code == ExitCode.STATE and mine[:12] in r.err
    assert git(wt, "rev-parse", "HEAD") == mine


# ------------------------------------------------------------------------------------------- item 3: git locks


def kill_git_inside_lock_window(wt: Path, tmp_path: Path) -> None:
    """A real `git update-ref HEAD` killed while it holds HEAD.lock and the branch's lock."""
    hooks = tmp_path / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "reference-transaction").write_text("#!/bin/sh\n[ \"$1\" = prepared ] && sleep 60\nexit 0\n")
    (hooks / "reference-transaction").chmod(0o755)
    proc = subprocess.Popen(["git", "-c", f"core.hooksPath={hooks}", "update-ref", "HEAD", "HEAD~1"], cwd=wt,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not (wt / ".git/refs/heads/lgpatch.lock").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_git_locks_left_by_a_killed_child_are_removed_and_the_tree_repaired(lgpatch, wt: Path,
                                                                            tmp_path: Path) -> None:
    head = git(wt, "rev-parse", "HEAD")
    interrupted(wt, "step", step="recipe/three", digest="x")
    kill_git_inside_lock_window(wt, tmp_path)
    (wt / ".git/index.lock").write_text("")  # as a killed update-index leaves it
    assert (wt / ".git/HEAD.lock").exists() and (wt / ".git/refs/heads/lgpatch.lock").exists()
    assert subprocess.run(["git", "update-ref", "HEAD", head], cwd=wt, capture_output=True).returncode != 0
    proc = run_cli_subprocess("status", "-C", wt)
    assert proc.returncode == 0, proc.stderr
    for name in (".git/HEAD.lock", ".git/refs/heads/lgpatch.lock", ".git/index.lock"):
        assert f"removed {name}" in proc.stderr
        assert not (wt / name).exists()
    assert "repaired the interrupted step" in proc.stderr
    assert git(wt, "rev-parse", "HEAD") == head
    assert not (wt / ".git/lgpatch/journal.json").exists()


def test_locks_are_left_alone_without_a_journal_or_when_not_listed(lgpatch, wt: Path) -> None:
    # No journal: no lgpatch was killed here, so a lock belongs to someone else's git (or needs a human).
    (wt / ".git/refs/heads/lgpatch.lock").write_text("")
    assert lgpatch("status", "-C", wt).code == 0
    assert (wt / ".git/refs/heads/lgpatch.lock").exists()
    (wt / ".git/refs/heads/lgpatch.lock").unlink()
    # A journal that lists only index.lock: another ref's lock is not lgpatch's to remove.
    interrupted(wt, "step", step="recipe/x", digest="x")
    journal = wt / ".git/lgpatch/journal.json"
    entry = json.loads(journal.read_text())
    assert "refs/heads/lgpatch.lock" in entry["locks"] and "HEAD.lock" in entry["locks"]
    journal.write_text(json.dumps({**entry, "locks": ["index.lock", "../outside.lock"]}))
    (wt / ".git/refs/heads/other.lock").write_text("")
    (wt.parent / "outside.lock").write_text("")
    assert lgpatch("status", "-C", wt).code == 0
    assert (wt / ".git/refs/heads/other.lock").exists() and (wt.parent / "outside.lock").exists()


# ------------------------------------------------------------------------------------------- item 9: rescued refs


def test_partial_changes_are_kept_under_lgpatch_refs_not_the_stash(lgpatch, wt: Path) -> None:
    (wt / "notes.txt").write_text("a stash of my own\n")
    git(wt, "stash", "push", "-u", "-q", "-m", "user: mine")
    head = git(wt, "rev-parse", "HEAD")
    for i in (1, 2):
        interrupted(wt, "step", step="recipe/three", digest="x")
        (wt / "README.md").write_text(f"half-written {i}\n")
        (wt / f"new{i}.h").write_text("untracked, written by the step\n")
        r = lgpatch("status", "-C", wt)
        assert r.code == 0, r.err
        assert f"refs/lgpatch/rescued/{i}" in r.err
        assert git(wt, "status", "--porcelain", "--untracked-files=all") == ""
        assert git(wt, "rev-parse", "HEAD") == head
    stashes = git(wt, "stash", "list").splitlines()
    assert len(stashes) == 1 and "user: mine" in stashes[0]
    # The rescued commit holds the partial changes, tracked and untracked, on top of the step boundary.
    assert git(wt, "show", "refs/lgpatch/rescued/2:README.md") == "half-written 2"
    assert git(wt, "show", "refs/lgpatch/rescued/2:new2.h") == "untracked, written by the step"
    assert git(wt, "rev-parse", "refs/lgpatch/rescued/2~1") == head
    r = lgpatch("status", "-C", wt)
    assert "refs/lgpatch/rescued/1" in r.err + r.out and "refs/lgpatch/rescued/2" in r.err + r.out
    r = lgpatch("status", "-C", wt, "--json")
    rows = json.loads(r.out)["rescued"]
    assert [row["ref"] for row in rows] == ["refs/lgpatch/rescued/1", "refs/lgpatch/rescued/2"]
    assert "interrupted step recipe/three" in rows[0]["subject"]


# ------------------------------------------------------------------------------- a clean failure owes no repair
def test_a_step_that_fails_cleanly_leaves_no_journal_and_the_users_fix_survives(lgpatch, tmp_path: Path,
                                                                                 upstream: Upstream) -> None:
    """A failing step is rolled back by the running apply: the next command must not take the fix the user makes
    right after the failure for the leftovers of a killed step (and set it aside)."""
    recipes = tmp_path / "recipes"
    failing = STEPS + "  - id: three\n    insert: {file: README.md, after: '^no such line$', text: three}\n"
    write_recipe(recipes, git_recipe("rec", "recovery fixture", upstream, failing), "rec.yaml")
    tree = tmp_path / "wt"
    r = lgpatch("--recipe-path", recipes, "apply", "rec", "--workdir", tree)
    assert r.code == ExitCode.PATCH, r.err
    assert not WorkTree.meta_dir(tree).joinpath("journal.json").exists()
    readme = tree / "README.md"
    fixed = readme.read_text() + "no such line\n"
    readme.write_text(fixed)
    r = lgpatch("status", "-C", tree)
    assert r.code == 0, r.err
    assert readme.read_text() == fixed
    assert "rescued" not in r.out + r.err
    assert git(tree, "for-each-ref", "refs/lgpatch/rescued") == ""
