"""The build venv: where `lgpatch build` installs a recipe's build requirements when no --python is given.

Why: a recipe's setup commands pip-install what the build needs (Chainer's: Cython and ~2.3 GB of nvidia-* CUDA 13
wheels). Run with the interpreter lgpatch itself runs from, that would fill lgpatch's own environment. So lgpatch
makes one venv per work tree, beside the build reports (`.git/lgpatch/build-venv`, never a user edit), with the
Python running lgpatch and no access to its site-packages, and reuses it for later builds of the same tree.
`--python EXE` builds in that interpreter's environment instead. pip's own cache (~/.cache/pip) keeps the
downloads, so a second tree installs them without downloading again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from legacy_gpu_patch.errors import ToolError

VENV_TIMEOUT_S = 300


def venv_dir(report_dir: Path) -> Path:
    """`.git/lgpatch/build-venv` for the default report folder `.git/lgpatch/build`."""
    return report_dir.parent / "build-venv"


def venv_python(folder: Path) -> Path:
    return folder / "bin" / "python"


def venv_purelib(folder: Path) -> str:
    """The venv's site-packages, known before the venv exists (a venv has the layout of its base interpreter)."""
    base = str(folder)
    return sysconfig.get_paths(scheme="posix_prefix", vars={"base": base, "platbase": base})["purelib"]


def ensure_venv(folder: Path, base_python: str | None = None) -> bool:
    """Make the venv unless a working one is there; True when it was made now."""
    python = venv_python(folder)
    if python.is_file() and os.access(python, os.X_OK):
        return False
    base = base_python or getattr(sys, "_base_executable", None) or sys.executable
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run([base, "-m", "venv", "--clear", str(folder)], capture_output=True, text=True,
                              timeout=VENV_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError(f"cannot make the build venv {folder}: {exc}",
                        hint="pass --python EXE to build with an interpreter you made") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ToolError(f"cannot make the build venv {folder}: {' | '.join(tail)}",
                        hint="install the venv module (Debian: python3-venv), or pass --python EXE")
    return True
