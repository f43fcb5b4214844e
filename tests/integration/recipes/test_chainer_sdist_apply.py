"""The README's main job on the real thing: `lgpatch apply chainer-1.24` on the real Chainer 1.24.0 sdist from PyPI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import git

pytestmark = [pytest.mark.integration, pytest.mark.network]

SDIST_SHA256 = "58adfb7348d10991e180941f1ebe2daf6eee569808c3746c49adca9a25a2a43d"


def test_real_sdist_applies_strictly_and_reverts_exactly(lgpatch, tmp_path: Path) -> None:
    wt = tmp_path / "chainer"
    r = lgpatch("apply", "chainer-1.24", "--workdir", wt, "--strict", "--json")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert report["created"] and report["applied"], report
    baseline = git(wt, "rev-list", "--max-parents=0", "HEAD")
    assert f"sha256:{SDIST_SHA256}" in git(wt, "log", "-1", "--format=%B", baseline)
    assert (wt / "cupy/cuda/compiler.py").is_file() and (wt / "chainer/__init__.py").is_file()
    pristine_tree = git(wt, "rev-parse", f"{baseline}^{{tree}}")
    # Every applied step is one commit with its trailer, in plan order.
    steps = git(wt, "log", "--reverse", "--format=%(trailers:key=Lgpatch-Step,valueonly)", f"{baseline}..HEAD").split()
    assert steps == [a["step"] for a in report["applied"]]
    # Second apply: nothing to do, no network needed (the sdist is in the cache).
    again = lgpatch("apply", "chainer-1.24", "--workdir", wt, "--offline")
    assert again.code == 0 and "already up to date" in again.err
    assert lgpatch("revert", "-C", wt).code == 0
    assert git(wt, "rev-parse", "HEAD^{tree}") == pristine_tree


def test_seed_stack_gets_only_the_ptx_fallback(lgpatch) -> None:
    r = lgpatch("show", "chainer-1.24", "--cuda", "8.0", "--python", "3.6", "--json")
    assert r.code == 0, r.err
    plan = json.loads(r.out)
    selected = {s["step"].split("/")[0] for s in plan["steps"] if s["selected"]}
    assert selected == {"cupy-ptx-fallback"}
