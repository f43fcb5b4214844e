"""Thin, fast wrapper around the git command line for work-tree operations.

GitPython is used where it adds something (remote operations with progress, see sources.py); the many small local
operations (status, add, commit, reset) go straight to `git` with a fixed environment, which is faster and lets us
pass NUL-separated pathspecs through stdin.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from legacy_gpu_patch.errors import StateError, ToolError

# A fixed identity and no user config surprises (hooks, signing, autocrlf) for the commits lgpatch makes.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "lgpatch",
    "GIT_AUTHOR_EMAIL": "lgpatch@localhost",
    "GIT_COMMITTER_NAME": "lgpatch",
    "GIT_COMMITTER_EMAIL": "lgpatch@localhost",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}
# Deterministic dates make a step's commit reproducible from its inputs (export → am gives identical trees anyway,
# but identical commit ids make rewinds and tests easier to reason about).
_FIXED_DATE = "1970-01-01T00:00:00+0000"
_CONFIG = ["-c", "core.autocrlf=false", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false",
           "-c", "core.quotepath=false", "-c", "advice.detachedHead=false", "-c", "gc.auto=0"]


def _pdeathsig() -> Callable[[], None] | None:
    """On Linux, a child that gets SIGKILL when lgpatch dies: a killed apply must not leave a git process behind
    that keeps writing into the tree (or a half-made clone) after the next command has repaired it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    pr_set_pdeathsig = 1

    def set_pdeathsig() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)

    return set_pdeathsig


die_with_parent = _pdeathsig()


class GitFailed(StateError):
    pass


class Git:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
        fixed_date: bool = False,
    ) -> subprocess.CompletedProcess[bytes]:
        full_env = {**os.environ, **_GIT_ENV, **(env or {})}
        if fixed_date:
            full_env["GIT_AUTHOR_DATE"] = full_env["GIT_COMMITTER_DATE"] = _FIXED_DATE
        try:
            proc = subprocess.run(
                ["git", *_CONFIG, *args], cwd=self.root, input=input, capture_output=True, env=full_env,
                preexec_fn=die_with_parent,
            )
        except FileNotFoundError:
            raise ToolError("git is not installed or not on PATH") from None
        if check and proc.returncode != 0:
            raise GitFailed(
                f"git {' '.join(args[:3])} failed in {self.root}: "
                + (proc.stderr.decode(errors="replace").strip() or f"exit {proc.returncode}")
            )
        return proc

    def out(self, *args: str, **kw: object) -> str:
        return self.run(*args, **kw).stdout.decode("utf-8", errors="surrogateescape").strip()  # type: ignore[arg-type]

    def rev(self, ref: str) -> str | None:
        proc = self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return proc.stdout.decode().strip() or None if proc.returncode == 0 else None

    def head(self) -> str | None:
        return self.rev("HEAD")

    def status_porcelain(self) -> list[str]:
        """Changed tracked files and untracked (not ignored) files, one entry per path."""
        # --no-optional-locks: looking must not take .git/index.lock; a killed `git status` would leave it outside
        # any journaled operation, where nothing repairs it.
        raw = self.run("--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all").stdout
        return [e.decode("utf-8", errors="surrogateescape") for e in raw.split(b"\0") if e]

    def is_dirty(self) -> bool:
        return bool(self.status_porcelain())

    def ls_files(self) -> list[str]:
        raw = self.run("ls-files", "-z").stdout
        return [p.decode("utf-8", errors="surrogateescape") for p in raw.split(b"\0") if p]

    def files_containing(self, literal: bytes) -> list[str]:
        """Tracked files whose working-tree content contains `literal` (git grep -F; binary files included)."""
        proc = self.run("grep", "-l", "-z", "-F", "-a", "--no-color", "-e", literal.decode("utf-8", "surrogateescape"),
                        check=False)
        if proc.returncode not in (0, 1):  # 1: no match
            raise GitFailed(f"git grep failed in {self.root}: {proc.stderr.decode(errors='replace').strip()}")
        return [p.decode("utf-8", errors="surrogateescape") for p in proc.stdout.split(b"\0") if p]

    def tree_of(self, ref: str = "HEAD") -> str:
        return self.out("rev-parse", f"{ref}^{{tree}}")

    def commit_paths(self, paths: Sequence[str], message: str) -> str:
        """Commit exactly these paths (added, changed or deleted) on top of HEAD; return the new commit.

        Plumbing instead of `git add` + `git commit`: both of those refresh the whole index (an lstat of every file,
        ~10k in PyTorch) for each step, which dominated apply's time. update-index touches only our paths and, unlike
        `git add`, is not swayed by an sdist's own .gitignore; update-ref moves HEAD atomically (compare-and-swap
        against the old HEAD), so a kill leaves either the old commit or the new one.
        """
        if paths:
            data = b"\0".join(p.encode("utf-8", errors="surrogateescape") for p in paths) + b"\0"
            self.run("update-index", "--add", "--remove", "-z", "--stdin", input=data)
        tree = self.out("write-tree")
        parent = self.head()
        args = ["commit-tree", tree, "-F", "-"] + (["-p", parent] if parent else [])
        commit = self.out(*args, input=message.encode("utf-8"), fixed_date=True)
        subject = message.split("\n", 1)[0]
        self.run("update-ref", "-m", f"lgpatch: {subject}", "HEAD", commit, *([parent] if parent else []))
        return commit

    def commit_all(self, message: str) -> str:
        """Commit every file in the tree, ignoring .gitignore (an sdist's pristine baseline must hold all it ships)."""
        self.run("add", "--all", "--force", ".")
        return self.commit_paths([], message)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (another user's counts): lock holders and temp-folder owners."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
