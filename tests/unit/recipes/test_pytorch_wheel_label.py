"""The pytorch-lms recipe's wheel command, rendered as `lgpatch build` renders it and run by the real bash with an
interpreter that only reports what setup.py would see: the version label for one target is what single-arch
wheels always had (1.5.0+lgpatch.cu130.sm90), a list names every target, and the same steps are selected."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from legacy_gpu_patch.build.vars import make_build_vars
from legacy_gpu_patch.config.recipe import SearchPath, find_recipe
from legacy_gpu_patch.cuda.archflags import flags_for
from legacy_gpu_patch.ledger.plan import make_plan, resolve_params

MULTI = "sm_80,sm_86,sm_89,sm_90+ptx"


@pytest.fixture(scope="module")
def recipe():
    return find_recipe("pytorch-lms", SearchPath.from_options())


def _wheel_version(recipe, tmp_path: Path, arch: str, targets: tuple[str, ...] = ()) -> str:
    params = resolve_params(recipe, {"cuda": "13.0", "arch": arch})
    fake_python = tmp_path / "python"
    fake_python.write_text('#!/bin/sh\necho "$PYTORCH_BUILD_VERSION $*"\n')
    fake_python.chmod(0o755)
    variables = make_build_vars(params, python=str(fake_python), site_packages=str(tmp_path), jobs=4,
                                workdir=tmp_path, cuda_home=Path("/usr/local/cuda"),
                                arch_flags=flags_for(str(params["arch"])), targets=targets)
    wheel = next(c for c in recipe.build.commands if c.name == "wheel")
    argv = variables.render_argv(list(wheel.argv), os.environ)
    return subprocess.run(argv, capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()


def test_single_arch_wheel_keeps_its_name(recipe, tmp_path: Path) -> None:
    assert _wheel_version(recipe, tmp_path, "sm_90") == "1.5.0+lgpatch.cu130.sm90 setup.py bdist_wheel -d dist"


def test_multi_arch_wheel_names_every_target(recipe, tmp_path: Path) -> None:
    version = _wheel_version(recipe, tmp_path, "sm_90+ptx,sm_89,sm_86,sm_80")
    assert version == "1.5.0+lgpatch.cu130.sm80.sm86.sm89.sm90ptx setup.py bdist_wheel -d dist"
    assert _wheel_version(recipe, tmp_path, MULTI, ("c10",)) == "wheel: skipped (--target c10)"


def test_the_multi_arch_tree_is_patched_like_the_sm90_tree(recipe) -> None:
    # every arch-gated step of the recipe is for sm_80 and newer: the list selects exactly the sm_90 tree's steps
    def selected(arch: str) -> dict[str, str]:
        return {p.step.key: p.digest for p in make_plan(recipe, resolve_params(recipe, {"cuda": "13.0", "arch": arch}))
                if p.selected}

    assert selected(MULTI) == selected("sm_90")
    assert resolve_params(recipe, {"arch": "sm_90+PTX,sm_80,sm_86,sm_89"})["arch"] == MULTI
