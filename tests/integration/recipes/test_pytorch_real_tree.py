"""L0 on the real PyTorch v1.5.0 tree: every step of pytorch-lms applies with --strict (no offset, no fuzz) for
--cuda 11.1/sm_86 and --cuda 13.0/sm_90, and revert restores the pristine tree hash.

Needs a local mirror of PyTorch's history through v1.5.0 (LGPATCH_PYTORCH_MIRROR: a clone or bare mirror with
commit 4ff3872a) and IBM's LMS patch for the download cache: LGPATCH_LMS_PATCH (the patch file) or
LGPATCH_IBM_LMS_MIRROR (a clone of IBM/pytorch-large-model-support). Nothing from either is committed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import git, requires_nvcc

from legacy_gpu_patch.config.recipe import SearchPath, find_recipe
from legacy_gpu_patch.ledger.plan import make_plan, resolve_params

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MIRROR = os.environ.get("LGPATCH_PYTORCH_MIRROR")
V150 = "4ff3872a2099993bf7e8c588f7182f3df777205b"
IBM_COMMIT = "cf971a3ddbfe5643556d88be4d4723370d88c3fd"
IBM_PATH = "patches/pytorch_v1.5.0_large_model_support.patch"

if not MIRROR:
    pytest.skip("LGPATCH_PYTORCH_MIRROR is not set (a local mirror of pytorch through v1.5.0)",
                allow_module_level=True)


def _lms_patch(tmp_path: Path) -> Path:
    if os.environ.get("LGPATCH_LMS_PATCH"):
        return Path(os.environ["LGPATCH_LMS_PATCH"])
    ibm = os.environ.get("LGPATCH_IBM_LMS_MIRROR")
    if not ibm:
        pytest.skip("neither LGPATCH_LMS_PATCH nor LGPATCH_IBM_LMS_MIRROR is set: IBM's LMS patch is needed offline")
    out = tmp_path / "pytorch_v1.5.0_large_model_support.patch"
    # `git -C` works for a clone and for a bare mirror alike.
    blob = subprocess.run(["git", "-C", ibm, "show", f"{IBM_COMMIT}:{IBM_PATH}"], capture_output=True,
                          check=True).stdout
    out.write_bytes(blob)
    return out


@pytest.mark.parametrize("cuda, arch, applied", [("11.1", "sm_86", 26), ("13.0", "sm_90", 39)])
def test_real_tree_applies_strictly_and_reverts(tmp_path: Path, lgpatch, cuda: str, arch: str,
                                                applied: int) -> None:
    res = lgpatch("cache", "add", _lms_patch(tmp_path))
    assert res.code == 0, res.err
    wt = tmp_path / "pytorch"
    res = lgpatch("apply", "pytorch-lms", "--cuda", cuda, "--arch", arch, "--strict", "--offline",
                  "--no-submodules", "--source", MIRROR, "--workdir", wt)
    assert res.code == 0, res.err
    assert f"{applied} step(s) applied" in res.err
    assert "inexact" not in res.err
    # every patch hunk exact; inserts and regex steps report where and how many instead
    recipe = find_recipe("pytorch-lms", SearchPath.from_options())
    plan = [p for p in make_plan(recipe, resolve_params(recipe, {"cuda": cuda, "arch": arch})) if p.selected]
    assert len(plan) == applied
    assert res.err.count("all exact") == sum(p.step.kind in ("patch", "url-patch") for p in plan)
    assert (wt / "c10/core/LargeModelSupport.h").is_file()  # LMS is there, under every later step
    res = lgpatch("revert", "--workdir", wt)
    assert res.code == 0, res.err
    assert git(wt, "rev-parse", "HEAD^{tree}") == git(wt, "rev-parse", f"{V150}^{{tree}}")
    assert git(wt, "status", "--porcelain") == ""


@requires_nvcc
@pytest.mark.nvcc
def test_real_tree_probes_need_no_extra_headers(tmp_path: Path, lgpatch) -> None:
    """L1 on the real tree for the probes that need only the toolkit (GpuDefs' #error, the two name probes)."""
    assert lgpatch("cache", "add", _lms_patch(tmp_path)).code == 0
    wt = tmp_path / "pytorch"
    res = lgpatch("apply", "pytorch-lms", "--cuda", "13.0", "--arch", "sm_90", "--strict", "--offline",
                  "--no-submodules", "--source", MIRROR, "--workdir", wt)
    assert res.code == 0, res.err
    res = lgpatch("verify", "--workdir", wt, "--arch", "sm_86,sm_90", "--json", "--probe", "gpudefs-warp-size",
                  "--probe", "kernel-launch-check", "--probe", "export-aliases")
    assert res.code == 0, res.err
    verdicts = {(r["probe"], r["arch"]): r["verdict"] for r in json.loads(res.out)["results"]}
    assert verdicts == {("gpudefs-warp-size", "sm_86"): "ok", ("gpudefs-warp-size", "sm_90"): "ok",
                        ("kernel-launch-check", "sm_86"): "ok", ("kernel-launch-check", "sm_90"): "ok",
                        ("export-aliases", None): "ok"}
