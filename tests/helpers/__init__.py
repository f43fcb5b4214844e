"""Test helpers shared by unit and integration tests: real git repositories in temporary folders, fixture recipes,
and two ways to drive the CLI (in process, and as a child process).

Nothing here mocks git, nvcc or the network: fixture trees are *made* by the tests with the same shapes as the real
framework trees, and tests that need a missing tool skip with a reason.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


def _pypi_reachable() -> bool:
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            return True
    except OSError:
        return False


requires_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) not found on PATH or /usr/local/cuda")
_NETWORK = None


def network_available() -> bool:
    global _NETWORK
    if _NETWORK is None:
        _NETWORK = os.environ.get("LGPATCH_NO_NETWORK") is None and _pypi_reachable()
    return _NETWORK


def remove_venv(venv: Path) -> None:
    """Remove a virtual environment a module's tests are done with. The chainer builds' venvs hold ~3 GB of CUDA
    wheels each; kept to the end of the run, with pytest's last runs beside them, they filled a CI machine's disk
    (`No space left on device` in pip). LGPATCH_KEEP_TEST_VENVS=1 keeps them for a look after the run."""
    if not os.environ.get("LGPATCH_KEEP_TEST_VENVS"):
        shutil.rmtree(venv, ignore_errors=True)


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@dataclass
class Upstream:
    path: Path
    commit: str
    tag: str

    def url(self) -> str:
        return self.path.as_uri()


def make_upstream(root: Path, files: dict[str, str | bytes], tag: str = "v1.0") -> Upstream:
    """A real git repository with one commit and a tag: the 'upstream project' of a recipe."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write_files(root, files)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "upstream")
    git(root, "tag", tag)
    return Upstream(root, git(root, "rev-parse", "HEAD"), tag)


# A small tree with the shapes of the PyTorch 1.5 files the seed touched (written here, not copied).
TORCHLIKE = {
    "c10/cuda/CUDAException.h": (
        "#pragma once\n#include <c10/cuda/CUDAMacros.h>\n\n"
        "#define C10_CUDA_CHECK(EXPR) do { cudaError_t __err = EXPR; (void)__err; } while (0)\n"
        "#define C10_CUDA_CHECK_WARN(EXPR) do { (void)(EXPR); } while (0)\n"
    ),
    "caffe2/utils/GpuDefs.cuh": (
        "#ifndef CAFFE2_UTILS_GPU_DEFS_H_\n#define CAFFE2_UTILS_GPU_DEFS_H_\n\nnamespace caffe2 {\n\n"
        "#if __CUDA_ARCH__ <= 750\nconstexpr int kWarpSize = 32;\n#else\n"
        "#error Unknown __CUDA_ARCH__; please define parameters for compute capability\n#endif\n\n"
        "} // namespace caffe2\n\n#endif\n"
    ),
    "caffe2/core/common.h": "#pragma once\n#define CAFFE2_USED __attribute__((__used__))\n",
    "c10/macros/Export.h": "#pragma once\n#define CAFFE2_API C10_EXPORT\n#define TORCH_API CAFFE2_API\n",
    "caffe2/core/net.h": "class CAFFE2_API NetBase {};\nCAFFE2_API void RunNet();\n// CAFFE2_APIS is another name\n",
    "caffe2/core/operator.h": "class CAFFE2_API OperatorBase {};\n",
    "README.md": "fixture tree\n",
}


# The steps of a patchset that defines C10_CUDA_KERNEL_LAUNCH_CHECK in TORCHLIKE's CUDAException.h.
LAUNCH_CHECK_STEPS = """\
steps:
  - id: define
    insert:
      file: c10/cuda/CUDAException.h
      after: '^#define C10_CUDA_CHECK_WARN'
      text: "#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())"
"""


def write_recipe(folder: Path, text: str, name: str = "demo.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def write_patchset(recipes_dir: Path, name: str, manifest: str, files: dict[str, str] | None = None) -> Path:
    folder = recipes_dir / "patchsets" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "patchset.yaml").write_text(manifest, encoding="utf-8")
    for rel, content in (files or {}).items():
        (folder / rel).write_text(content, encoding="utf-8")
    return folder


# A well-formed commit pin that no repository has: for recipes that are loaded but never applied.
PIN = "0123456789abcdef0123456789abcdef01234567"


def demo_recipe_head(url: str = "file:///nowhere", ref: str = "v1.0", commit: str = PIN) -> str:
    """Lines 1-7 of the `demo` fixture recipe (name, alias dm, git source, the cuda parameter), which the tests
    complete with their own parameters and steps. Exactly seven lines: tests address the rest by line number."""
    return f"""\
name: demo
aliases: [dm]
description: A fixture recipe.
source:
  git: {{url: "{url}", ref: {ref}, commit: {commit}}}
parameters:
  cuda: {{type: version, default: "11.1", allowed: ">=8.0,<14"}}
"""


def git_recipe(name: str, description: str, up: Upstream, steps: str, *, parameters: str = "",
               git_options: str = "") -> str:
    """A recipe on `up` at its tag and commit (source in one flow line); `steps` and `parameters` are the YAML
    lines below those keys (`parameters` left out when empty); `git_options` adds keys to the git mapping."""
    head = f"""\
name: {name}
description: {description}
source: {{git: {{url: "{up.url()}", ref: {up.tag}, commit: {up.commit}{git_options}}}}}
"""
    return head + (f"parameters:\n{parameters}" if parameters else "") + f"steps:\n{steps}"


@dataclass
class Result:
    code: int
    out: str
    err: str


class Runner:
    """Runs `lgpatch ARGS` in this process (fast) and returns exit code, stdout and stderr."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *args: str | Path, env: dict[str, str] | None = None, input: str | None = None) -> Result:
        """`env` adds to (or overrides) the environment for this call only; `input` is what stdin holds."""
        from legacy_gpu_patch.cli import main

        self.capsys.readouterr()
        saved_env = dict(os.environ)
        saved_stdin = sys.stdin
        os.environ.update(env or {})
        if input is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(input.encode("utf-8")), encoding="utf-8")
        code = 0
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = int(exc.code or 0)
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            sys.stdin = saved_stdin
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)


def run_cli_subprocess(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
                       timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """lgpatch in a real child process (for kill tests and for what a user's shell would see)."""
    return subprocess.run([sys.executable, "-m", "legacy_gpu_patch", *map(str, args)], cwd=cwd,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout)


# Tests that need PyPI carry this marker; pytest_collection_modifyitems skips them with a reason when offline.
requires_network = pytest.mark.network
