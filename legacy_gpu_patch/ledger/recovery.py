"""Bringing a tree left by a killed lgpatch back to a step boundary, losing nothing of the user's.

The journal (.git/lgpatch/journal.json) says what the killed process was doing, from which commit, and which of
git's lock files its git children could have left (`locks`). The next command, holding lgpatch's exclusive lock,
then:

  1. removes those lock files (and only those): no live lgpatch can own them while we hold the lock, and no git
     command of the user's takes them in .git/lgpatch's name, so one that exists belongs to a dead lgpatch child;
  2. refuses to move HEAD when it is neither where the journal left it nor where the operation was going (the user
     committed since the kill): those commits are named, never reset away;
  3. keeps partial changes (tracked and untracked) as a commit under refs/lgpatch/rescued/<n>, outside the user's
     `git stash list`, listed by `lgpatch status`;
  4. resets to the last complete step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legacy_gpu_patch.errors import StateError
from legacy_gpu_patch.gitutil import Git

if TYPE_CHECKING:
    from legacy_gpu_patch.ledger.worktree import WorkTree

RESCUE_NS = "refs/lgpatch/rescued"
_RESCUE_INDEX = "lgpatch/rescue-index"
# Lock files (relative to .git) that each journaled operation's git commands take; "{branch}" is the branch HEAD
# names. Every entry also lists the ones a repair of it takes, since a repair can be killed in turn.
_MOVE_HEAD = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "{branch}.lock")
_BY_OP: dict[str, tuple[str, ...]] = {
    "step": _MOVE_HEAD,
    "rewind": _MOVE_HEAD,
    "reset": (*_MOVE_HEAD, "{keep}.lock"),
    "stash": (*_MOVE_HEAD, "refs/stash.lock", "logs/refs/stash.lock"),
}
_REPAIR = (*_MOVE_HEAD, f"{_RESCUE_INDEX}.lock", f"{RESCUE_NS}/{{next}}.lock")


def head_branch(root: Path) -> str | None:
    """The ref HEAD points at ('refs/heads/lgpatch'), read from the file: no git process per journal entry."""
    try:
        text = (root / ".git" / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text[5:].strip() if text.startswith("ref: ") else None


def locks_for(root: Path, op: str, info: dict[str, Any]) -> list[str]:
    branch = head_branch(root)
    keep = info.get("keep_branch")
    names = []
    for pattern in (*_BY_OP.get(op, _MOVE_HEAD), *_REPAIR):
        if ("{branch}" in pattern and not branch) or ("{keep}" in pattern and not keep):
            continue
        names.append(pattern.format(branch=branch, keep=f"refs/heads/{keep}", next="*"))
    return sorted(set(names))


def remove_stale_locks(root: Path, entry: dict[str, Any]) -> list[str]:
    """Remove the git lock files the journal says the killed process could have left. Caller holds the lgpatch lock."""
    gitdir = root / ".git"
    listed = entry.get("locks") or ["index.lock"]  # a journal from before `locks` was recorded
    removed = []
    for pattern in listed:
        if ".." in Path(pattern).parts or Path(pattern).is_absolute() or not pattern.endswith(".lock"):
            continue  # a journal is ours, but a damaged one must not make us delete anything else
        for path in sorted(gitdir.glob(pattern)):
            if path.is_file():
                path.unlink()
                removed.append(f".git/{path.relative_to(gitdir).as_posix()}")
    return removed


@dataclass(frozen=True)
class Rescued:
    ref: str
    commit: str
    subject: str
    date: str


def rescued(git: Git) -> list[Rescued]:
    raw = git.out("for-each-ref", "--format=%(refname)%00%(objectname)%00%(subject)%00%(creatordate:iso-strict)",
                  RESCUE_NS)
    rows = [Rescued(*line.split("\0")) for line in raw.splitlines() if line.count("\0") == 3]
    return sorted(rows, key=lambda r: int(r.ref.rsplit("/", 1)[-1]) if r.ref.rsplit("/", 1)[-1].isdigit() else 0)


def rescue(root: Path, git: Git, message: str) -> str:
    """Keep every uncommitted change (untracked files too, ignored ones not: as `git stash -u`) as a commit on top of
    HEAD under refs/lgpatch/rescued/<n>, then clean the tree. Returns the ref."""
    index = root / ".git" / _RESCUE_INDEX
    env = {"GIT_INDEX_FILE": str(index)}
    index.unlink(missing_ok=True)
    git.run("read-tree", "HEAD", env=env)
    git.run("add", "--all", ".", env=env)
    tree = git.out("write-tree", env=env)
    # Its real date (not the fixed date of step commits): `lgpatch status` shows when it was rescued.
    commit = git.out("commit-tree", tree, "-p", "HEAD", "-F", "-", input=message.encode(), env=env)
    numbers = [int(r.ref.rsplit("/", 1)[-1]) for r in rescued(git) if r.ref.rsplit("/", 1)[-1].isdigit()]
    ref = f"{RESCUE_NS}/{max(numbers, default=0) + 1}"
    git.run("update-ref", "-m", message, ref, commit, "")  # "": the ref must not exist yet
    index.unlink(missing_ok=True)
    git.run("reset", "--quiet", "--hard", "HEAD")
    git.run("clean", "--quiet", "-fd")  # untracked files are in the rescued commit now
    return ref


def _refuse_moved_head(git: Git, entry: dict[str, Any], expected: set[str | None], what: str) -> None:
    head = git.head()
    if head in expected:
        return
    start = entry.get("head")
    commits = git.out("rev-list", "--reverse", head or "HEAD", *([f"^{start}"] if start else [])).split()
    shown = ", ".join(c[:12] for c in commits[:5]) + (f" and {len(commits) - 5} more" if len(commits) > 5 else "")
    raise StateError(
        f"the interrupted {what} left a journal, but HEAD has moved since (commit(s) {shown or head}); "
        "refusing to reset them away",
        hint=f"keep them on a branch (`git branch mywork`), then `git reset --hard {str(start)[:12]}` "
        "and run lgpatch again",
    )


def repair(wt: WorkTree) -> list[str]:
    """Bring a tree left by a killed process back to a step boundary. Returns what was done (also printed)."""
    if not wt.journal_path.exists():
        return []
    try:
        entry = json.loads(wt.journal_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        entry = {"op": "unknown"}
    done = [f"removed {p}, left by a killed lgpatch (pid {entry.get('pid', '?')})"
            for p in remove_stale_locks(wt.root, entry)]
    git = wt.git
    op, start = entry.get("op"), entry.get("head")
    head = git.head()
    if op == "step":
        committed = head != start and wt.is_step_commit(head, entry.get("step")) and git.rev(f"{head}~1") == start
        target = head if committed else start or head
        what = f"step {entry.get('step')}" + (" (it had completed)" if committed else "")
    else:
        target = entry.get("target") or head
        what = f"{op} to {str(target)[:12]}"
    _refuse_moved_head(git, entry, {start, target} if start else {head}, what)
    keep = entry.get("keep_branch")
    if keep and start and git.rev(f"refs/heads/{keep}") is None:
        git.run("branch", keep, start)
        done.append(f"kept your commits on branch {keep}")
    if git.is_dirty():
        ref = rescue(wt.root, git, f"lgpatch: partial changes of interrupted {what}")
        done.append(f"kept the partial changes of the interrupted {what} as {ref} (see `lgpatch status`)")
    git.run("reset", "--quiet", "--hard", target or "HEAD")
    done.append(f"repaired the interrupted {what}: the tree is at {wt.describe_head()}")
    wt.journal_path.unlink(missing_ok=True)
    from legacy_gpu_patch.console import warn

    warn("; ".join(done))
    return done
