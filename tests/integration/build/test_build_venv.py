"""`lgpatch build` without --python builds in a venv it makes in the work tree, layered on lgpatch's environment:
a recipe's `pip install` lands in the venv, never in lgpatch's own environment, and what lgpatch's environment has
stays visible (a real venv, a real pip, a real wheel from a local folder, no network)."""

from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from helpers import git, write_recipe

from legacy_gpu_patch.build.options import BuildRequest, resolve_options
from legacy_gpu_patch.build.run import run_build
from legacy_gpu_patch.build.runner import PlainDisplay
from legacy_gpu_patch.config.recipe import SearchPath, load_recipe
from legacy_gpu_patch.errors import ExitCode

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PACKAGE = "lgpatch_venv_probe"
_QUIET = io.BytesIO()  # the commands' output (the log file has it too)

RECIPE = f"""\
name: venv-demo
description: a build whose setup installs a package
source:
  sdist: {{name: demo, version: "1.0", sha256: "{"a" * 64}"}}
steps:
  - id: note
    insert: {{file: README, text: "built by lgpatch"}}
build:
  commands:
    - name: build-requirements
      phase: setup
      argv: ["${{python}}", -m, pip, install, --no-index, --disable-pip-version-check, --quiet, --find-links,
             wheels, {PACKAGE}]
    - name: where
      phase: build
      argv: ["${{python}}", -c,
             "import sys, {PACKAGE}; open('where.txt', 'w').write(sys.prefix + '\\\\n' + {PACKAGE}.__file__)"]
    - name: tools
      phase: test
      argv: ["${{python}}", -m, legacy_gpu_patch.tools.wheel_check, --help]
"""


def _wheel(folder: Path) -> Path:
    """A minimal pure-Python wheel, made by hand (no build backend, no network)."""
    folder.mkdir(parents=True)
    path = folder / f"{PACKAGE}-1.0-py3-none-any.whl"
    files = {
        f"{PACKAGE}/__init__.py": b"VALUE = 1\n",
        f"{PACKAGE}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 1.0\n".encode(),
        f"{PACKAGE}-1.0.dist-info/WHEEL":
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append(f"{PACKAGE}-1.0.dist-info/RECORD,,")
        zf.writestr(f"{PACKAGE}-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def _lgpatch_env_has_probe() -> bool:
    proc = subprocess.run([sys.executable, "-c", f"import {PACKAGE}"], capture_output=True)
    return proc.returncode == 0


def test_default_build_runs_in_a_venv_of_the_tree_and_installs_there(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    git(tree, "init", "-q")
    _wheel(tree / "wheels")
    recipe = load_recipe(write_recipe(tmp_path / "recipes", RECIPE), SearchPath((tmp_path / "recipes",), ()))
    assert not _lgpatch_env_has_probe()

    options = resolve_options(tree, recipe, {}, BuildRequest(jobs=1))
    venv = tree.resolve() / ".git" / "lgpatch" / "build-venv"
    assert options.venv == venv and options.python == str(venv / "bin" / "python")
    assert options.site_packages.startswith(str(venv)) and not venv.exists()  # resolving makes nothing
    assert any("build venv" in n for n in options.notes)

    outcome = run_build(options, display=PlainDisplay(_QUIET))
    assert outcome.exit_code == ExitCode.OK, [(p.name, p.status, p.reason) for p in outcome.report.phases]
    prefix, module = (tree / "where.txt").read_text().splitlines()
    assert Path(prefix) == venv and module.startswith(options.site_packages)
    assert not _lgpatch_env_has_probe(), "the build installed into lgpatch's own environment"
    # layered: what lgpatch's environment has is visible (read-only) to the build, e.g. PyYAML for code generators
    seen = subprocess.run([options.python, "-c", "import yaml; print(yaml.__file__)"], capture_output=True, text=True)
    assert seen.returncode == 0 and seen.stdout.startswith(sysconfig.get_paths()["purelib"]), seen.stderr

    # the next build reuses the venv (and what was installed in it)
    marker = venv / "lgpatch-reuse-marker"
    marker.write_text("x")
    again = run_build(resolve_options(tree, recipe, {}, BuildRequest(jobs=1)), display=PlainDisplay(_QUIET))
    assert again.exit_code == ExitCode.OK and marker.exists()


def test_python_option_builds_in_that_interpreters_environment(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    git(tree, "init", "-q")
    _wheel(tree / "wheels")
    target = tmp_path / "target-venv"
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True, capture_output=True)
    recipe = load_recipe(write_recipe(tmp_path / "recipes", RECIPE), SearchPath((tmp_path / "recipes",), ()))
    options = resolve_options(tree, recipe, {}, BuildRequest(jobs=1, python=str(target / "bin" / "python")))
    assert options.venv is None
    outcome = run_build(options, display=PlainDisplay(_QUIET))
    assert outcome.exit_code == ExitCode.OK, [(p.name, p.status, p.reason) for p in outcome.report.phases]
    assert Path((tree / "where.txt").read_text().splitlines()[0]) == target
    assert not (tree / ".git" / "lgpatch" / "build-venv").exists()
