"""The inputs of the opt-in tests that use the real PyTorch v1.5.0 tree, as pytorch_wheel.sh carries them:
    LGPATCH_PYTORCH_CARRY   a folder with pt-shallow.tar, submodules.tar and pytorch_v1.5.0_large_model_support.patch
    LGPATCH_CUDA13_PYTHON   a Python 3.12 with numpy 2, PyYAML, typing_extensions and the CUDA 13 library wheels
"""

from __future__ import annotations

import os
import shutil

import pytest


def carry_and_python(*tools: str) -> tuple[str, str]:
    """(LGPATCH_PYTORCH_CARRY, LGPATCH_CUDA13_PYTHON); skips the calling test module when either is unset or one of
    `tools` is not on PATH."""
    carry = os.environ.get("LGPATCH_PYTORCH_CARRY")
    python = os.environ.get("LGPATCH_CUDA13_PYTHON")
    if not (carry and python):
        pytest.skip("LGPATCH_PYTORCH_CARRY and LGPATCH_CUDA13_PYTHON are not set (the real tree and a CUDA 13 Python)",
                    allow_module_level=True)
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip(f"{', '.join(tools)} are needed on PATH ({', '.join(missing)} not found)", allow_module_level=True)
    return carry, python
