"""The recipe without one step, for the CPU A/B benches and their tests: a step's ledger commit reverted by git.

A later step may edit the same lines (chainer-call-lean edits what chainer-type-check-cache and
chainer-call-overhead wrote), and then a plain revert conflicts. Then the later ledger commits on the step's files
are reverted first: the one nearest the step, then the two nearest, and so on (each set newest first), until the
step's own revert applies. The tree is then the recipe without the step and without the steps that build on it, and
`revert_step` names them all, so a bench or a test can say what "without the step" is.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_IDENTITY = {"GIT_AUTHOR_NAME": "lgpatch-bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
             "GIT_COMMITTER_NAME": "lgpatch-bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


class RevertError(Exception):
    """The step cannot be reverted, even with every later step on its files."""


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **_IDENTITY}).stdout


def _files(tree: Path, commit: str) -> set[str]:
    return set(_git(tree, "show", "--name-only", "--format=", commit).split())


def _step_name(tree: Path, commit: str) -> str:
    return _git(tree, "log", "-1", "--format=%s", commit).strip().removeprefix("lgpatch: ")


def revert_step(tree: Path, commit: str) -> tuple[str, ...]:
    """Reverts `commit` in `tree`, with the fewest later commits on its files (nearest it first) that its revert
    needs; returns the reverted steps' names, newest first, `commit`'s last. On RevertError the tree is back at
    its HEAD commit (a fresh clone, as the benches and tests make: uncommitted changes there would be lost)."""
    files = _files(tree, commit)
    newer = _git(tree, "log", "--format=%H", f"{commit}..HEAD").split()  # newest first
    later = [sha for sha in newer if files & _files(tree, sha)]
    head = _git(tree, "rev-parse", "HEAD").strip()
    for count in range(len(later) + 1):
        chosen = later[len(later) - count:]  # the `count` nearest the step: the likeliest to overlap it
        try:
            for sha in (*chosen, commit):
                _git(tree, "revert", "--no-edit", sha)
        except subprocess.CalledProcessError:
            subprocess.run(["git", "-C", str(tree), "revert", "--abort"], capture_output=True)
            _git(tree, "reset", "-q", "--hard", head)
            continue
        return tuple(_step_name(tree, sha) for sha in (*chosen, commit))
    raise RevertError(f"{_step_name(tree, commit)} cannot be reverted in {tree}, even with the later steps on its "
                      f"files ({', '.join(_step_name(tree, sha) for sha in later) or 'none'})")
