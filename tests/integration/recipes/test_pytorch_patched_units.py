"""Every C++/CUDA source the recipe's patches change in torch_cuda or torch_python compiles, with the build's own
command line, on the real PyTorch v1.5.0 tree after `lgpatch apply` and the recipe's configure:
bench/gpu/pytorch_units.sh with UNITS (the same script that runs on a GPU machine). The objects come from the
patch files themselves, so a new patch to such a source is covered without editing this test.

Opt-in, slow (about 1.5 minutes on 2 cores for session 5's five sources), with the inputs of
tests/integration/recipes/test_pytorch_reconfigure.py: LGPATCH_PYTORCH_CARRY and LGPATCH_CUDA13_PYTHON (which
also needs lgpatch's dependencies: the script runs lgpatch with it).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import unidiff
from helpers import REPO
from helpers.pytorch_carry import carry_and_python

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.nvcc]

CARRY, PYTHON = carry_and_python("cmake", "ninja", "nvcc")

# Sources compiled into the two libraries whose units the script can pick, by the new patchsets of session 5
PATCHSETS = ("cudnn9-version", "sparse-addmm-beta", "engine-exit-finalized", "cudnn-deterministic-fallback")


def _patched_sources() -> list[str]:
    sources = []
    for name in PATCHSETS:
        for patch in sorted((REPO / "patchsets" / name).glob("*.patch")):
            sources += [pf.path for pf in unidiff.PatchSet(patch.read_text(encoding="utf-8"))
                        if pf.path.endswith((".cpp", ".cu"))]
    return sorted(set(sources))


def _object_pattern(source: str) -> str:
    """aten/src/ATen/native/cudnn/Conv.cpp -> its object only (not native/miopen/Conv.cpp's): the folder as the
    object path holds it (torch_python's objects drop the leading torch/), CUDA objects named by FindCUDA."""
    folder, name = source.rsplit("/", 1)
    folder = folder.removeprefix("torch/")
    return f"{_ere(folder)}/(torch_cuda_generated_)?{_ere(name)}\\.o$"


def _ere(text: str) -> str:
    """A path as a grep -E pattern: only its dots are special (re.escape would add escapes ERE does not define)."""
    return text.replace(".", "\\.")


def test_the_patched_sources_compile_with_the_builds_commands(tmp_path: Path) -> None:
    sources = _patched_sources()
    assert len(sources) == 5, sources
    units = "|".join(_object_pattern(s) for s in sources)
    env = {**os.environ, "PYTHON": PYTHON, "CARRY": CARRY, "PT_WORK": str(tmp_path / "work"),
           "OUT": str(tmp_path / "out"), "GENERATED": "0", "JOBS": str(min(4, os.cpu_count() or 2)),
           "UNITS": units}
    done = subprocess.run(["bash", str(REPO / "bench" / "gpu" / "pytorch_units.sh")], env=env, capture_output=True,
                          text=True, timeout=1800)
    summary = (tmp_path / "out" / "units-summary.txt").read_text()
    assert done.returncode == 0, summary + done.stderr[-2000:]
    assert "apply: rc=0" in summary and "configure + ATen codegen: rc=0" in summary, summary
    assert f"match: {len(sources)} units, {len(sources)} ok, 0 failed" in summary, summary
