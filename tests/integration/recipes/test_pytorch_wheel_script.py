"""bench/gpu/pytorch_wheel.sh up to its apply phase, on this machine (the real script, bash and lgpatch; no carried
sources, so apply fails and the script stops there): ARCH becomes the stored targets, TORCH_CUDA_ARCH_LIST and the
wheel label, JOBS is sized by memory unless given, and a work folder is never reused for other targets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, requires_nvcc

pytestmark = pytest.mark.integration

SCRIPT = REPO / "bench" / "gpu" / "pytorch_wheel.sh"


def _run(tmp_path: Path, work: Path, **env: str) -> subprocess.CompletedProcess[str]:
    carry = tmp_path / "carry"  # nothing carried: the apply phase fails right away
    carry.mkdir(exist_ok=True)
    full = {**os.environ, "PYTHON": sys.executable, "CARRY": str(carry), "PT_WORK": str(work), **env}
    for name in ("ARCH", "JOBS", "PTX_JIT"):  # the script's defaults unless the test sets them
        if name not in env:
            full.pop(name, None)
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=full, timeout=300)


def _summary(work: Path) -> str:
    return (work / "logs" / "summary.txt").read_text()


def test_a_list_of_targets_is_derived_once_and_the_work_folder_remembers_it(tmp_path: Path) -> None:
    work = tmp_path / "work"
    proc = _run(tmp_path, work, ARCH="sm_90+PTX,sm_86,sm_80,sm_89")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # apply: no sources carried
    summary = _summary(work)
    assert ("targets: sm_80,sm_86,sm_89,sm_90+ptx (TORCH_CUDA_ARCH_LIST=8.0;8.6;8.9;9.0+PTX, wheel label "
            "sm80.sm86.sm89.sm90ptx); jobs: ") in summary
    assert "min of" in summary and "/ 1.3 GiB per job" in summary  # sized by tools/jobs.py
    assert "apply: rc=" in summary
    assert (work / "arch.txt").read_text() == "sm_80,sm_86,sm_89,sm_90+ptx\n"
    again = _run(tmp_path, work)  # ARCH unset: sm_90, not what this folder was built for
    assert again.returncode == 2
    assert "ARCH=sm_90, but " + str(work) + " was built for sm_80,sm_86,sm_89,sm_90+ptx" in _summary(work)


def test_the_default_is_the_single_arch_wheel_and_jobs_can_be_given(tmp_path: Path) -> None:
    work = tmp_path / "single"
    _run(tmp_path, work, JOBS="3")
    assert "targets: sm_90 (TORCH_CUDA_ARCH_LIST=9.0, wheel label sm90); jobs: 3 (JOBS given)" in _summary(work)


def test_a_bad_arch_stops_before_anything_is_made(tmp_path: Path) -> None:
    work = tmp_path / "bad"
    proc = _run(tmp_path, work, ARCH="sm_80,sm_9x")
    assert proc.returncode == 2 and "ARCH=sm_80,sm_9x: 'sm_9x' is not a GPU architecture" in proc.stderr
    assert not work.exists()


# ------------------------------------------------------------------------------ the build phases, on a small tree
# A recipe of the pytorch-lms shape (cuda and arch parameters; configure, cmake --build, wheel), run by the real
# script with the real lgpatch, CMake and ninja. Its CMakeLists has PyTorch 1.5's USE_ROCM habit (an option ON that
# the first configure turns OFF after adding an include folder, so the second configure writes other commands) and
# a flag from the environment (LG_STAMP), so a call can change every compile command on purpose.
N_SOURCES = 60
TINY_CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(tiny C)
option(USE_FAKE_ROCM "like PyTorch 1.5's USE_ROCM: ON, and OFF once nothing is found" ON)
if(USE_FAKE_ROCM)
  set(USE_FAKE_ROCM OFF CACHE BOOL "" FORCE)
  include_directories(SYSTEM /opt/fake-rocm/include)
endif()
add_compile_definitions(STAMP=${LG_STAMP})
file(GLOB SOURCES src/*.c)
add_library(tiny SHARED ${SOURCES})
add_custom_target(ATEN_CUDA_FILES_GEN_TARGET COMMAND ${CMAKE_COMMAND} -E touch generated.stamp)
"""
TINY_RECIPE = """\
name: tiny-torch
description: the build section's shape of pytorch-lms, on a small C library
source:
  git: {{url: "https://example.invalid/tiny.git", ref: v1.0, commit: {commit}}}
parameters:
  cuda: {{type: version, default: "13.0", allowed: ">=11.0,<14"}}
  arch: {{type: arch, default: sm_90}}
steps:
  - id: note
    insert: {{file: NOTES, text: "patched\\n", at: end}}
ignore: ["build/", "dist/"]
build:
  commands:
    - name: configure
      phase: configure
      argv: [cmake, -S, ., -B, build, "-DLG_STAMP=${{env:LG_STAMP}}"]
    - name: build
      phase: build
      argv: [cmake, --build, build, --target, "${{targets}}", --parallel, "${{jobs}}"]
    - name: wheel
      phase: build
      argv: [bash, -c, 'py=$1; shift; if [ $# -gt 0 ]; then exit 0; fi; exec "$py" mkwheel.py dist',
             wheel, "${{python}}", "${{targets}}"]
"""
# A real wheel pip installs (a torch package that is only a name), so the script's later phases run on it
MKWHEEL = """\
import base64, hashlib, os, sys, zipfile
files = {"torch/__init__.py": "__version__ = '0.1'\\n",
         "torch-0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: torch\\nVersion: 0.1\\n",
         "torch-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: tiny\\nRoot-Is-Purelib: true\\n"
                                       "Tag: py3-none-any\\n"}
os.makedirs(sys.argv[1], exist_ok=True)
with zipfile.ZipFile(os.path.join(sys.argv[1], "torch-0.1-py3-none-any.whl"), "w") as whl:
    record = []
    for name, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        whl.writestr(name, data)
        record.append(f"{name},sha256={digest},{len(data)}")
    whl.writestr("torch-0.1.dist-info/RECORD", "\\n".join(record + ["torch-0.1.dist-info/RECORD,,"]) + "\\n")
"""
# PyTorch's own test files as the script runs them (their own unittest runner), one known failure among them
FAKE_TEST_CUDA = """\
import unittest


class TestCuda(unittest.TestCase):
    def test_large_model_support(self):
        pass

    def test_out_of_memory(self):
        self.fail("80 GiB fit")


if __name__ == "__main__":
    unittest.main()
"""
FAKE_TEST_NN = """\
import unittest


class TestNN(unittest.TestCase):
    def test_Conv2d(self):
        pass

    def test_BatchNorm_eval(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""


def _tiny_carry(tmp_path: Path) -> tuple[Path, Path]:
    """(carry folder with pt-shallow.tar and submodules.tar, recipes folder)"""
    import tarfile

    from helpers import make_upstream

    files = {"CMakeLists.txt": TINY_CMAKE, "NOTES": "a small tree\n", "mkwheel.py": MKWHEEL,
             "test/test_cuda.py": FAKE_TEST_CUDA, "test/test_nn.py": FAKE_TEST_NN}
    files.update({f"src/f{i:02d}.c": f"int f{i:02d}(void) {{ return STAMP + {i}; }}\n" for i in range(N_SOURCES)})
    up = make_upstream(tmp_path / "src" / "pt-shallow", files)
    carry = tmp_path / "carry"
    (tmp_path / "src" / "submirrors").mkdir()
    (tmp_path / "src" / "submirrors" / "urls.txt").write_text("")
    carry.mkdir()
    for name, member in (("pt-shallow.tar", "pt-shallow"), ("submodules.tar", "submirrors")):
        with tarfile.open(carry / name, "w") as tar:
            tar.add(tmp_path / "src" / member, arcname=member)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "tiny-torch.yaml").write_text(TINY_RECIPE.format(commit=up.commit))
    return carry, recipes


def _call(tmp_path: Path, work: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    carry, recipes = tmp_path / "carry", tmp_path / "recipes"
    full = {**os.environ, "PYTHON": sys.executable, "CARRY": str(carry), "PT_WORK": str(work), "RECIPE": "tiny-torch",
            "LGPATCH_RECIPE_PATH": str(recipes), "JOBS": "2", "UNTIL": "wheel", **env}
    for name in ("ARCH", "PTX_JIT", "ALLOW_REBUILD", "MAX_DIRTY"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full, timeout=600)


def _built(work: Path, log: str) -> int:
    return (work / "logs" / log).read_text().count("Building C object")


def _lose_the_wheel(work: Path) -> None:
    """What a machine lost between the build and the wheel leaves: objects, no wheel, phases build/wheel not done."""
    for phase in ("build", "wheel"):
        (work / "state" / phase).unlink(missing_ok=True)
    for wheel in (work / "wt" / "dist").glob("*.whl"):
        wheel.unlink()


@requires_nvcc
@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="cmake and ninja are needed")
def test_a_configure_that_would_rebuild_a_built_tree_stops_the_call(tmp_path: Path) -> None:
    _tiny_carry(tmp_path)
    work = tmp_path / "work"
    first = _call(tmp_path, work, LG_STAMP="1")
    assert first.returncode == 0, _summary(work) + first.stderr
    summary = _summary(work)
    # the build phase is one lgpatch build with the wheel; its configure (the second, which drops the fake ROCm
    # folder) ran before any object was compiled: each source compiled once, with the final commands
    assert "build: lgpatch build (configure, cmake --build -j 2, wheel, check-wheel) rc=0" in summary
    assert "wheel: torch-0.1-py3-none-any.whl" in summary and "reconfigure check" not in summary
    assert _built(work, "build-1.log") == N_SOURCES
    assert "/opt/fake-rocm" not in (work / "wt" / "build" / "build.ninja").read_text()
    for log in ("configure.log", "build-1.log"):  # --python: the interpreter's environment, not a build venv
        assert "build venv" not in (work / "logs" / log).read_text()

    obj = next((work / "wt" / "build").rglob("f00.c.o"))
    mtime = obj.stat().st_mtime_ns
    _lose_the_wheel(work)
    changed = _call(tmp_path, work, LG_STAMP="2")  # every compile command changes: the guard stops the call
    assert changed.returncode == 1
    summary = _summary(work)
    assert (f"build: reconfigure check: ninja -n: 0 edges to build before the configure, {N_SOURCES + 1} after; "
            f"{N_SOURCES} built edges to rebuild (limit 50); the configure changed {N_SOURCES} commands") in summary
    assert (f"build: STOPPED: {N_SOURCES} built edges would be rebuilt (> MAX_DIRTY=50); the first changed command "
            "lost [-DSTAMP=1 ] and gained [-DSTAMP=2 ]") in summary  # word by word
    assert obj.stat().st_mtime_ns == mtime and not (work / "logs" / "build-2.log").exists()
    again = _call(tmp_path, work, LG_STAMP="2")  # the tree is dirty now, but still not rebuilt by a second call
    assert again.returncode == 1
    assert (f"{N_SOURCES + 1} edges to build before the configure, {N_SOURCES + 1} after; {N_SOURCES} built edges "
            "to rebuild (limit 50); the configure changed 0 commands") in _summary(work)
    assert f"build: STOPPED: {N_SOURCES} built edges would be rebuilt (> MAX_DIRTY=50) (ninja" in _summary(work)

    same = _call(tmp_path, work, LG_STAMP="1")  # the commands the objects were built with: nothing to rebuild
    assert same.returncode == 0, _summary(work)
    assert (f"build: reconfigure check: ninja -n: {N_SOURCES + 1} edges to build before the configure, 0 after; "
            f"0 built edges to rebuild (limit 50); the configure changed {N_SOURCES} commands") in _summary(work)
    assert _built(work, "build-2.log") == 0 and obj.stat().st_mtime_ns == mtime
    assert "wheel: torch-0.1-py3-none-any.whl" in _summary(work).split("reconfigure check")[-1]

    _lose_the_wheel(work)
    (work / "wt" / "CMakeLists.txt").touch()  # build.ninja stale: ninja -n only says it would re-run CMake
    stale = _call(tmp_path, work, LG_STAMP="1")
    assert stale.returncode == 0, _summary(work)
    assert ("build: reconfigure check: ninja -n: stale edges to build before the configure, 0 after; 0 built edges "
            "to rebuild") in _summary(work)
    assert _built(work, "build-3.log") == 0

    _lose_the_wheel(work)
    forced = _call(tmp_path, work, LG_STAMP="3", ALLOW_REBUILD="1")
    assert forced.returncode == 0 and "build: ALLOW_REBUILD=1: rebuilding" in _summary(work)
    assert _built(work, "build-4.log") == N_SOURCES

    status = _call(tmp_path, work, "wait", "30")  # the pipeline has finished: wait returns at once, with progress
    assert status.returncode == 0
    tail = _summary(work).splitlines()[-3:]
    assert "status: pipeline finished" in tail[0] and f"C/C++ objects {N_SOURCES}/{N_SOURCES}" in tail[1]


@requires_nvcc
@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="cmake and ninja are needed")
def test_a_failed_compile_goes_on_with_ninja_k0_and_lists_every_failure(tmp_path: Path) -> None:
    _tiny_carry(tmp_path)
    work = tmp_path / "work"
    failed = _call(tmp_path, work, LG_STAMP="no_such_name")  # every source: an undeclared identifier
    assert failed.returncode == 1
    summary = _summary(work)
    assert f"build: lgpatch build failed; ninja -k 0 then: rc=1, {N_SOURCES}" in summary  # cmake --build stopped early
    assert "build: lgpatch build (configure, cmake --build -j 2, wheel, check-wheel) rc=9 in " in summary
    assert f"s; FAILED: {N_SOURCES}; wheel:" in summary  # every failure, once
    assert f"progress: failed in the last build log: {N_SOURCES};" in summary
    assert len((work / "logs" / "failed.txt").read_text().splitlines()) == N_SOURCES
    assert "classify: " in summary and not (work / "state" / "build").exists()
    assert not list((work / "wt" / "dist").glob("*.whl"))


@requires_nvcc
@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="cmake and ninja are needed")
def test_the_phases_after_the_wheel_run_to_the_end_on_a_wheel_without_a_gpu(tmp_path: Path) -> None:
    """install, archs and checks on a wheel whose torch is only a name: every check fails, as it must without CUDA,
    but each is run and reported, PyTorch's own test files run through their runner, and no bash error stops the
    script (session 5's H200 run lost its tests to one: `local` read a variable it was assigning)."""
    _tiny_carry(tmp_path)
    work = tmp_path / "work"
    done = _call(tmp_path, work, LG_STAMP="1", UNTIL="", TEST_BUDGET_S="60", LMS_DEBUG_VARIANT="")
    summary = _summary(work)
    assert done.returncode == 0, summary + done.stderr
    assert "unbound variable" not in done.stderr and "syntax error" not in done.stderr, done.stderr
    assert "phase install: done" in summary and "archs: rc=" in summary
    assert "checks: rc=1" in summary  # a torch without torch.cuda: every part FAIL, none skipped
    assert "lms_train: rc=1" in summary and "lms_train --cudnn off: rc=1" in summary
    assert ("tests lms (test_cuda.py test_large_model_support): rc=0 (124 = stopped at 60 s): 1 passed, 0 failed"
            in summary), summary
    assert "tests cuda (test_cuda.py ): rc=1 (124 = stopped at 60 s): 1 passed, 1 failed" in summary, summary
    assert "tests cuda: known failures: TestCuda.test_out_of_memory; NEW failures: none" in summary, summary
    assert "tests nn (test_nn.py conv lstm batchnorm): rc=0 (124 = stopped at 60 s): 2 passed, 0 failed" in summary
    assert "checks took " in summary and (work / "state" / "all").exists()
    assert (work / "site" / "torch" / "__init__.py").is_file()  # installed into the target folder, not the venv
