"""The build venv: where `lgpatch build` installs a recipe's build requirements when no --python is given.

Why: a recipe's setup commands pip-install what the build needs (Chainer's: Cython and ~2.3 GB of nvidia-* CUDA 13
wheels). Run with the interpreter lgpatch itself runs from, that would fill lgpatch's own environment. So lgpatch
makes one venv per work tree (`.git/lgpatch/build-venv`, never a user edit) with the Python running lgpatch, and
reuses it for later builds of the same tree.

The venv is layered on lgpatch's environment: a .pth file adds lgpatch's site-packages after the venv's own, so a
build finds what was there before (PyTorch's code generators need PyYAML; an offline machine cannot download it
again), while everything the build installs goes into the venv, and a package the build installs shadows
lgpatch's copy. `--python EXE` builds in that interpreter's environment instead. pip's own cache (~/.cache/pip)
keeps the downloads, so a second tree installs them without downloading again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from legacy_gpu_patch.errors import ToolError

VENV_TIMEOUT_S = 300
LAYER_PTH = "lgpatch-parent-environment.pth"


def venv_dir(root: Path) -> Path:
    """`.git/lgpatch/build-venv` in a git work tree, `.lgpatch-build-venv` in a plain folder."""
    git = root / ".git"
    return git / "lgpatch" / "build-venv" if git.is_dir() else root / ".lgpatch-build-venv"


def venv_python(folder: Path) -> Path:
    return folder / "bin" / "python"


def venv_purelib(folder: Path) -> str:
    """The venv's site-packages, known before the venv exists (a venv has the layout of its base interpreter)."""
    base = str(folder)
    return sysconfig.get_paths(scheme="posix_prefix", vars={"base": base, "platbase": base})["purelib"]


def parent_site_dirs() -> list[str]:
    """The site-packages of the environment running lgpatch (purelib and platlib, once each)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(p for p in (paths["purelib"], paths["platlib"]) if os.path.isdir(p)))


def _layer_text(dirs: list[str]) -> str:
    # `import` lines of a .pth file are executed: addsitedir also reads the parent's own .pth files (an editable
    # install of lgpatch, namespace packages), which a plain path line would not.
    return "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)


def ensure_venv(folder: Path, base_python: str | None = None) -> bool:
    """Make the venv unless a working one is there, and (re)write its layer on lgpatch's environment; True when the
    venv was made now."""
    python = venv_python(folder)
    made = False
    if not (python.is_file() and os.access(python, os.X_OK)):
        _make(folder, base_python or getattr(sys, "_base_executable", None) or sys.executable)
        made = True
    site_dir = Path(venv_purelib(folder))
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / LAYER_PTH).write_text(_layer_text(parent_site_dirs()), encoding="utf-8")
    return made


def _make(folder: Path, base: str) -> None:
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
