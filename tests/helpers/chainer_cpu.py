"""The real Chainer 1.24.0 on the CPU (its NumPy path), straight from a patched work tree: no build, no CuPy.

`import chainer` from the tree needs only NumPy (this interpreter's), six and filelock (Chainer's own pure-Python
dependencies: this interpreter's when it has them, else pip installs them into a folder of the test's). CuPy's
extension modules are not built, so `chainer.cuda.available` is False and every Function runs forward_cpu.

Trees: `lgpatch apply chainer-1.24 --strict` of the real sdist (helpers.ptx_support.apply: the sdist from the local
downloads folder or LGPATCH_CHAINER_SDIST, else PyPI), and the same ledger with one step reverted by git: the
recipe without that step, for comparing against Chainer as it was. Where a later step edits the same lines (the
plain revert conflicts), those later steps nearest it are reverted too (bench/_ledger_revert.py): the recipe
without the step and what builds on it (ChainerTrees.reverted names them all).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, Runner, git
from helpers.ptx_support import apply


@dataclass(frozen=True)
class ChainerTrees:
    patched: Path
    without_step: Path
    deps: Path | None
    applied: tuple[str, ...]
    reverted: tuple[str, ...] = ()


def _deps(root: Path) -> Path | None:
    """None when this interpreter has six and filelock; else a folder pip installed them into."""
    probe = subprocess.run([sys.executable, "-c", "import six, filelock"], capture_output=True)
    if probe.returncode == 0:
        return None
    target = root / "deps"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--target",
                           str(target), "six", "filelock"], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.skip(f"six and filelock (Chainer's dependencies) are not importable and pip could not install them:\n"
                    f"{proc.stderr[-2000:]}")
    return target


def chainer_trees(root: Path, step: str) -> ChainerTrees:
    """The recipe applied strictly, and a clone of its ledger with `step`'s commit reverted."""
    tree, report = apply(root, "chainer-1.24")
    applied = tuple(a["step"] for a in report["applied"])
    commits = git(tree, "log", "--format=%H", "--grep", f"lgpatch: {step}$").split()
    assert len(commits) == 1, f"one ledger commit for {step} expected, found {commits}"
    without = root / "without-step"
    git(root, "clone", "-q", str(tree), str(without))
    reverted = ledger_revert().revert_step(without, commits[0])
    return ChainerTrees(tree, without, _deps(root), applied, reverted)


def ledger_revert() -> Any:
    """bench/_ledger_revert.py: the benches' and these tests' one way to take a step out of a ledger."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        return importlib.import_module("_ledger_revert")
    finally:
        sys.path.remove(str(REPO / "bench"))


PRELUDE = """\
import json, sys
import numpy
import chainer
import chainer.functions as F
from chainer.utils import type_check
try:
    from chainer import _type_check_cache
except ImportError:
    _type_check_cache = None

get_types_calls = [0]
_get_types = type_check.get_types


def _counting_get_types(*args):
    get_types_calls[0] += 1
    return _get_types(*args)


type_check.get_types = _counting_get_types  # function.py looks it up per call: counts every check that runs


def outcome(call):
    try:
        call()
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)
    return "ok"


def checks(call):
    before = get_types_calls[0]
    result = outcome(call)
    return result, get_types_calls[0] - before


def cache_size():
    return None if _type_check_cache is None else _type_check_cache.size()


"""


def run_chainer(trees: ChainerTrees, tree: Path, code: str, **env: str) -> dict:
    """Runs PRELUDE + code with Chainer from `tree`; code ends by printing one JSON object, which is returned."""
    paths = [str(tree), *([str(trees.deps)] if trees.deps else [])]
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINER_") and k != "PYTHONPATH"}
    child_env.update(PYTHONPATH=os.pathsep.join(paths), **env)
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                          env=child_env, cwd=tree.parent, timeout=600)
    assert proc.returncode == 0, f"child exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    lines = proc.stdout.strip().splitlines()
    assert lines, f"child printed nothing:\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1])


def assert_gated_like_the_speed_steps(lgpatch: Runner, step: str) -> None:
    """Selected from CUDA 9.0 on, as cupy-reduction-grid is; the seed's CUDA 8 stack keeps Chainer as it was."""
    for cuda, selected in (("8.0", False), ("9.0", True), ("13.0", True)):
        r = lgpatch("show", "chainer-1.24", "--cuda", cuda, "--python", "3.12", "--json")
        assert r.code == 0, r.err
        steps = {s["step"]: s["selected"] for s in json.loads(r.out)["steps"]}
        assert steps[step] is selected, (cuda, steps)
        assert steps["cupy-reduction-grid/reduction-split-grid"] is selected


def assert_gated_to_cudnn_builds_from_cuda_9(lgpatch: Runner, step: str) -> None:
    """Selected with cuDNN from CUDA 9.0 on, as chainer-cudnn-algo-cache is (no cuDNN: no query to cache)."""
    assert_gated_to_cudnn_builds_from(lgpatch, step, "9.0", "8.0")


def assert_gated_to_cudnn_builds_from(lgpatch: Runner, step: str, first: str, below: str) -> dict[str, bool]:
    """Selected with cuDNN from CUDA `first` on (not at `below`, nor without cuDNN); returns the steps' selection
    with CUDA `first` and cuDNN, for the caller's own checks."""
    selections = {}
    for cuda, cudnn, selected in (("13.0", "true", True), (first, "true", True), (below, "true", False),
                                  ("13.0", "false", False)):
        r = lgpatch("show", "chainer-1.24", "--cuda", cuda, "--python", "3.12", "--param", f"cudnn={cudnn}",
                    "--json")
        assert r.code == 0, r.err
        steps = {s["step"]: s["selected"] for s in json.loads(r.out)["steps"]}
        assert steps[step] is selected, (cuda, cudnn, steps)
        selections[cuda, cudnn] = steps
    return selections[first, "true"]


def assert_bench_refuses_a_tree_without(tmp_path: Path, script: str, step: str, *options: str) -> None:
    """A CPU A/B bench given a work tree whose ledger lacks `step` stops and says so (nothing to compare)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    git(tree, "init", "-q")
    (tree / "f").write_text("x\n")
    git(tree, "add", "f")
    git(tree, "commit", "-qm", "lgpatch: pristine chainer==1.24.0")
    proc = subprocess.run([sys.executable, str(REPO / "bench" / script), "--tree", str(tree), *options],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert f"has no ledger commit for {step}" in proc.stderr
