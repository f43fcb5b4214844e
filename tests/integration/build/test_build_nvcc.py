"""A real failing build: a tiny CMake/nvcc project with a GpuDefs-style `__CUDA_ARCH__ <= 750 ... #error` guard,
built for sm_90 with the real nvcc through the runner, is classified while it runs as `cuda-arch-guard` with the
patchset hint `gpudefs-arch-bound`; with the guard widened the same build succeeds. The second half does it
through the `lgpatch build` command in a real work tree (git + ledger)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from legacy_gpu_patch.build.options import BuildRequest, resolve_options
from legacy_gpu_patch.build.run import run_build
from legacy_gpu_patch.build.runner import Display, RunResult
from legacy_gpu_patch.classify.classifier import Finding
from legacy_gpu_patch.config.recipe import SearchPath, load_recipe
from legacy_gpu_patch.errors import ExitCode

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
CMAKE = shutil.which("cmake")
REPO = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.nvcc,
    pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)"),
    pytest.mark.skipif(CMAKE is None, reason="cmake not found on PATH"),
]

GPUDEFS = """\
#pragma once
// Static definition of GPU warp size, as caffe2/utils/GpuDefs.cuh of PyTorch 1.5 does it.
#ifdef __CUDA_ARCH__
#if __CUDA_ARCH__ <= 750
constexpr int kWarpSize = 32;
#else
#error Unknown __CUDA_ARCH__; please define parameters for compute capability
#endif
#else
constexpr int kWarpSize = 32;
#endif
"""

KERNEL = """\
#include "GpuDefs.cuh"
__global__ void fill(int* out) { out[threadIdx.x] = kWarpSize; }
int launch(int* out) { fill<<<1, 32>>>(out); return 0; }
"""

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.18)
project(gpudefs_demo LANGUAGES CXX CUDA)
add_library(demo STATIC kernel.cu)
"""

RECIPE = """\
name: gpudefs-demo
description: A tiny CMake/nvcc project with a GpuDefs-style architecture guard.
source:
  sdist: {url: "https://example.invalid/gpudefs-demo-1.0.tar.gz", sha256: "%s"}
parameters:
  arch: {type: arch, default: sm_90}
steps:
  - id: nothing-yet
    insert: {file: NOTES, text: "demo\\n", at: end}
ignore: ["build/"]
build:
  commands:
    - name: configure
      phase: configure
      argv: [cmake, -S, ., -B, build, "-DCMAKE_CUDA_ARCHITECTURES=${cmake_cuda_architectures}"]
    - name: compile
      phase: build
      argv: [cmake, --build, build, --parallel, "${jobs}"]
""" % ("0" * 64)


def make_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "GpuDefs.cuh").write_text(GPUDEFS, encoding="utf-8")
    (root / "kernel.cu").write_text(KERNEL, encoding="utf-8")
    (root / "CMakeLists.txt").write_text(CMAKELISTS, encoding="utf-8")
    recipe = root.parent / "gpudefs-demo.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    return recipe


class Recorder(Display):
    """Records what a live display sees, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def start(self, name: str, phase: str, argv: object) -> None:
        self.events.append(("start", name))

    def finding(self, finding: Finding, new: bool) -> None:
        if new:
            self.events.append(("finding", finding.category))

    def stop(self, result: RunResult) -> None:
        self.events.append(("stop", result.reason))


def test_arch_guard_is_classified_live_and_the_widened_guard_builds(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    recipe = load_recipe(make_project(tree), SearchPath((tmp_path,), (tmp_path,)))
    opts = resolve_options(tree, recipe, {"arch": "sm_90"}, BuildRequest(jobs=2, report_dir=tmp_path / "reports"))
    assert opts.arch_flags is not None and opts.arch_flags.cmake_cuda_architectures == "90-real"
    display = Recorder()
    outcome = run_build(opts, display=display)

    assert outcome.exit_code == ExitCode.BUILD
    assert outcome.failed is not None and outcome.failed.name == "compile"
    first = outcome.report.findings[0]
    assert first.category == "cuda-arch-guard"
    assert first.patchsets == ("gpudefs-arch-bound",)
    assert first.file is not None and first.file.endswith("GpuDefs.cuh") and first.line == 7
    assert first.phase == "build"
    # live: the finding reached the display while the compile command was still running
    compile_events = display.events[display.events.index(("start", "compile")):]
    assert compile_events.index(("finding", "cuda-arch-guard")) < next(
        i for i, e in enumerate(compile_events) if e[0] == "stop")
    report = json.loads((tmp_path / "reports" / "report.json").read_text())
    assert report["status"] == "failed" and report["findings"][0]["patchset"] == ["gpudefs-arch-bound"]
    assert report["variables"]["cmake_cuda_architectures"] == "90-real"
    log = (tmp_path / "reports" / "build.log").read_text(errors="replace")
    assert "#error Unknown __CUDA_ARCH__" in log and "==> lgpatch [configure] configure:" in log

    # what gpudefs-arch-bound does: the warp size is 32 on every NVIDIA GPU
    gpudefs = tree / "GpuDefs.cuh"
    gpudefs.write_text(gpudefs.read_text().replace("__CUDA_ARCH__ <= 750", "__CUDA_ARCH__ <= 1210"))
    again = run_build(opts, display=Recorder())
    assert again.exit_code == ExitCode.OK, [f.message for f in again.report.findings]
    assert not [f for f in again.report.findings if f.is_error]
    assert list((tree / "build").glob("**/libdemo.a"))


def test_lgpatch_build_command_in_a_work_tree(tmp_path: Path) -> None:
    from legacy_gpu_patch.ledger.worktree import State, WorkTree

    tree = tmp_path / "tree"
    recipe_file = make_project(tree)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PYTHONPATH": str(REPO)}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "pristine"]):
        subprocess.run(["git", *args], cwd=tree, check=True, env=env, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, check=True, capture_output=True,
                          text=True).stdout.strip()
    WorkTree.create(tree, State(recipe="gpudefs-demo", recipe_file=str(recipe_file), params={"arch": "sm_90"},
                                source="test fixture", baseline=head), ignore=("build/",))
    proc = subprocess.run([sys.executable, "-m", "legacy_gpu_patch", "build", "--workdir", str(tree), "--jobs", "2",
                           "--format", "json"], cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == int(ExitCode.BUILD), proc.stderr
    report = json.loads(proc.stdout)
    assert report["findings"][0]["category"] == "cuda-arch-guard"
    assert report["findings"][0]["patchset"] == ["gpudefs-arch-bound"]
    assert "MAX_JOBS=2 (--jobs)" in proc.stderr
    assert (tree / ".git" / "lgpatch" / "build" / "junit.xml").is_file()
    # the reports live in .git: the tree stays clean for git (and for lgpatch status)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True).stdout
    assert status.strip() == ""
