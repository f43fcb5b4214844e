"""A multi-architecture tree end to end: `lgpatch apply --arch` with a list stores one spelling, selects the steps
that any target needs, re-applies nothing for the same set in another order; `lgpatch build` hands the build
TORCH_CUDA_ARCH_LIST and ${arch_label} for the whole list and refuses a target set that would patch differently.
Real git repositories, the real CLI, a real bash build command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import Runner, Upstream, git, git_recipe, write_recipe

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration

STEPS = """\
  - id: ampere-fix
    when: {arch: ">=sm_80"}
    insert: {file: caffe2/utils/GpuDefs.cuh, after: '^namespace caffe2', text: "// sm_80 and newer: warp size"}
  - id: turing-note
    when: {arch: "<sm_80"}
    insert: {file: README.md, text: "built for a Turing target too"}
"""
PARAMETERS = "  arch: {type: arch, default: sm_86, choices: [sm_75, sm_80, sm_86, sm_89, sm_90]}\n"
BUILD = """\
build:
  commands:
    - name: record
      phase: build
      argv: [bash, -c, 'mkdir -p build && printf "%s\\n" "$TORCH_CUDA_ARCH_LIST" "$1" > build/archs.txt', record,
             "${arch_label}"]
"""


@pytest.fixture
def tree(tmp_path: Path, upstream: Upstream, lgpatch: Runner) -> tuple[Path, Path]:
    recipes = tmp_path / "recipes"
    write_recipe(recipes, git_recipe("multi", "multi-arch fixture", upstream, STEPS, parameters=PARAMETERS) + BUILD,
                 "multi.yaml")
    work = tmp_path / "work"
    res = lgpatch("--recipe-path", recipes, "apply", "multi", "--arch", "sm_90+ptx,sm_75", "-C", work, "--json")
    assert res.code == 0, res.err
    return recipes, work


def test_apply_stores_the_sorted_list_and_selects_what_any_target_needs(tree: tuple[Path, Path],
                                                                       lgpatch: Runner) -> None:
    recipes, work = tree
    state = json.loads((work / ".git" / "lgpatch" / "state.json").read_text())
    assert state["params"]["arch"] == "sm_75,sm_90+ptx"
    log = git(work, "log", "--format=%s", "-2")
    assert "ampere-fix" in log and "turing-note" in log  # sm_90 needs one, sm_75 the other
    again = lgpatch("--recipe-path", recipes, "apply", "multi", "--arch", "SM_75, sm_90+PTX", "-C", work)
    assert again.code == 0 and "already up to date" in again.err
    # the same targets with the order and case changed: no step re-applied, HEAD unchanged
    assert git(work, "log", "--format=%s", "-2") == log


def test_build_gets_the_whole_list_and_its_wheel_label(tree: tuple[Path, Path], lgpatch: Runner) -> None:
    recipes, work = tree
    res = lgpatch("--recipe-path", recipes, "build", "-C", work, "--python", sys.executable)
    assert res.code == 0, res.err
    assert (work / "build" / "archs.txt").read_text() == "7.5;9.0+PTX\nsm75.sm90ptx\n"
    assert "wheel label sm75.sm90ptx" in res.err and "MAX_JOBS=" in res.err
    # the same set in PyTorch's spelling: the tree is patched for it already
    same = lgpatch("--recipe-path", recipes, "build", "-C", work, "--python", sys.executable, "--arch", "7.5;9.0+PTX")
    assert same.code == 0, same.err


def test_build_refuses_targets_that_would_patch_the_tree_differently(tree: tuple[Path, Path],
                                                                     lgpatch: Runner) -> None:
    recipes, work = tree
    res = lgpatch("--recipe-path", recipes, "build", "-C", work, "--python", sys.executable, "--arch", "sm_86,sm_90")
    assert res.code == ExitCode.CONFIG
    assert "patched for arch=sm_75,sm_90+ptx; arch=sm_86,sm_90 patches it differently" in res.err
    assert "must not have recipe/turing-note" in res.err
    assert not (work / "build" / "archs.txt").exists()


def test_a_target_outside_the_choices_changes_nothing(tree: tuple[Path, Path], lgpatch: Runner) -> None:
    recipes, work = tree
    head = git(work, "rev-parse", "HEAD")
    res = lgpatch("--recipe-path", recipes, "apply", "multi", "--arch", "sm_70,sm_90", "-C", work)
    assert res.code == ExitCode.CONFIG and "'sm_70' (in 'sm_70,sm_90') is not one of" in res.err
    assert git(work, "rev-parse", "HEAD") == head
