"""lgpatch matrix: expansion of recipes × parameter values, pruning with reasons from the CUDA tables, errors for
values outside a parameter's range, and the JSON shapes a GitHub workflow reads back with fromJSON."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from helpers import demo_recipe_head, write_recipe

ARCH_RECIPE = demo_recipe_head() + """\
  arch: {type: arch, default: sm_86, choices: [sm_80, sm_86, sm_90]}
  fast: {type: bool, default: false}
steps:
  - id: one
    regex: {files: [README.md], pattern: fixture, replace: tree}
"""


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    return write_recipe(tmp_path / "recipes", ARCH_RECIPE)


def _matrix(lgpatch, *args: str | Path) -> dict:
    r = lgpatch("matrix", *args)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_expands_every_combination_and_prunes_what_nvcc_does_not_know(lgpatch, recipe: Path) -> None:
    m = _matrix(lgpatch, recipe, "--param", "cuda=11.1,12.0,13.0", "--param", "arch=sm_86,sm_90")
    jobs = {(j["cuda"], j["arch"]) for j in m["include"]}
    excluded = {(j["cuda"], j["arch"]): j["reason"] for j in m["excluded"]}
    assert jobs | set(excluded) == set(itertools.product(["11.1", "12.0", "13.0"], ["sm_86", "sm_90"]))
    assert set(excluded) == {("11.1", "sm_90")}  # sm_90 arrived with CUDA 11.8
    reason = excluded[("11.1", "sm_90")]
    assert "CUDA 11.1's nvcc does not know sm_90" in reason and "from CUDA 11.8" in reason, reason
    assert "compute_86" in reason  # what that toolkit could do for the GPU instead (PTX)


def test_parameters_not_swept_keep_the_recipe_default_and_jobs_carry_their_arguments(lgpatch, recipe: Path) -> None:
    m = _matrix(lgpatch, recipe, "--param", "cuda=12.0,13.0")
    assert [j["cuda"] for j in m["include"]] == ["12.0", "13.0"] and m["excluded"] == []
    job = m["include"][0]
    assert job["recipe"] == str(recipe) and job["arch"] == "sm_86" and job["fast"] is False
    assert job["lgpatch_args"] == "--param cuda=12.0 --param arch=sm_86 --param fast=false"
    assert job["job"] == "demo-cuda12.0" and len(job["recipe_digest"]) == 64
    assert len({j["job"] for j in m["include"]}) == 2  # unique: artifact names and cache keys


def test_recipe_digest_changes_with_a_patchset_file(lgpatch, tmp_path: Path) -> None:
    from helpers import write_patchset

    folder = tmp_path / "recipes"
    ps = write_patchset(folder, "fix", "name: fix\ndescription: d\nsteps:\n  - {id: a, patch: a.diff}\n",
                        {"a.diff": "one\n"})
    path = write_recipe(folder, demo_recipe_head() + "steps:\n  - fix\n")
    first = _matrix(lgpatch, path)["include"][0]["recipe_digest"]
    (ps / "a.diff").write_text("two\n")
    assert _matrix(lgpatch, path)["include"][0]["recipe_digest"] != first


@pytest.mark.parametrize("sweep, needle", [
    ("cuda=7.5", "outside the allowed range >=8.0,<14"),
    ("arch=sm_75", "'sm_75' is not one of sm_80, sm_86, sm_90"),
    ("fast=maybe", "expected true or false"),
    ("cdua=12.0", "did you mean 'cuda'"),
    ("cuda", "expected NAME=V1[,V2,...]"),
])
def test_bad_values_are_config_errors_like_apply(lgpatch, recipe: Path, sweep: str, needle: str) -> None:
    r = lgpatch("matrix", recipe, "--param", sweep)
    assert r.code == 3, (r.code, r.err)
    assert needle in r.err and r.out == ""
    applied = lgpatch("apply", recipe, "--param", sweep, "--workdir", recipe.parent / "never")
    assert applied.code == r.code  # the same failure class as apply


def test_github_format_matrix_is_include_only_and_round_trips(lgpatch, recipe: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "github_output"
    out.write_text("earlier=1\n")
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    r = lgpatch("matrix", recipe, "--param", "cuda=11.1,13.0", "--param", "arch=sm_86,sm_90", "--format", "github")
    assert r.code == 0, r.err
    lines = out.read_text().splitlines()
    assert lines[0] == "earlier=1" and lines[1:] == r.out.splitlines()  # appended, and printed
    outputs = dict(line.split("=", 1) for line in lines[1:])
    matrix = json.loads(outputs["matrix"])
    assert list(matrix) == ["include"]  # any other key would be a matrix dimension and multiply the jobs
    assert len(json.dumps(matrix).splitlines()) == 1  # one $GITHUB_OUTPUT line
    full = _matrix(lgpatch, recipe, "--param", "cuda=11.1,13.0", "--param", "arch=sm_86,sm_90")
    assert _github_jobs(matrix) == full["include"]  # what fromJSON gives the matrix job
    assert json.loads(outputs["excluded"]) == full["excluded"] and outputs["count"] == "3"


def _github_jobs(matrix: dict) -> list[dict]:
    """GitHub's expansion of a matrix: the product of its dimensions (every key but include/exclude); with no
    dimensions each `include` entry is one job, exactly as written."""
    dims = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
    if dims:
        return [dict(zip(dims, combo)) for combo in itertools.product(*dims.values())]
    return list(matrix.get("include", []))


def test_many_recipes_and_a_parameter_only_some_have(lgpatch, recipe: Path, tmp_path: Path) -> None:
    other = write_recipe(tmp_path / "recipes", demo_recipe_head().replace("name: demo", "name: other")
                         .replace("aliases: [dm]", "aliases: []")
                         + "steps:\n  - id: one\n    regex: {files: [README.md], pattern: f, replace: g}\n",
                         "other.yaml")
    m = _matrix(lgpatch, recipe, other, "--param", "arch=sm_80,sm_90")
    # the sweep applies to the recipe that has the parameter; the other runs once with its defaults
    assert [(j["recipe"], j.get("arch")) for j in m["include"]] == [(str(recipe), "sm_80"), (str(other), None)]
    assert [(e["recipe"], e["arch"]) for e in m["excluded"]] == [(str(recipe), "sm_90")]  # default cuda 11.1


def test_default_cuda_prunes_too(lgpatch, recipe: Path) -> None:
    m = _matrix(lgpatch, recipe, "--param", "arch=sm_80,sm_90")  # cuda default 11.1
    assert [j["arch"] for j in m["include"]] == ["sm_80"]
    assert [e["arch"] for e in m["excluded"]] == ["sm_90"]


def test_ptx_target_strings_are_checked(tmp_path: Path) -> None:
    from legacy_gpu_patch.ci.matrix import why_impossible
    from legacy_gpu_patch.config.recipe import SearchPath, find_recipe

    chainer = find_recipe("chainer-1.24", SearchPath.from_options())
    assert why_impossible(chainer, {"cuda": "13.0", "ptx_arch": "auto"}) is None
    assert why_impossible(chainer, {"cuda": "13.0", "ptx_arch": "compute_75"}) is None
    reason = why_impossible(chainer, {"cuda": "13.0", "ptx_arch": "compute_61"})
    assert reason and "ptx_arch=compute_61" in reason and "12.9 is the last toolkit" in reason, reason


def test_github_format_puts_the_exclusions_in_the_step_summary(lgpatch, recipe: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert lgpatch("matrix", recipe, "--param", "arch=sm_86", "--format", "github").code == 0
    assert not summary.exists()  # nothing excluded, nothing written
    assert lgpatch("matrix", recipe, "--param", "arch=sm_86,sm_90", "--format", "github").code == 0
    text = summary.read_text()
    assert "1 combination(s) excluded" in text and "`demo-archsm_90`: arch=sm_90: CUDA 11.1's nvcc" in text
