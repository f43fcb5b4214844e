"""`lgpatch build --until-clean` in a real terminal (a pty): offer the classified error's patchset, add it, rebuild.

Also: refresh's default message is the last classified error of a build in the tree."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest
from conftest import Project
from helpers import run_cli_subprocess, write_patchset

pytestmark = pytest.mark.integration

# The build "compiles" src/main.c: it fails like nvcc does on PyTorch code when the launch-check macro is missing,
# and with an unclassifiable-by-patchset error when the file still calls f1.
CHECK = ("import sys; t = open('src/main.c').read()\n"
         "if 'C10_CUDA_KERNEL_LAUNCH_CHECK' not in t:\n"
         "    print('src/main.c(13): error: identifier \"C10_CUDA_KERNEL_LAUNCH_CHECK\" is undefined'); sys.exit(1)\n"
         "if 'return f1();' in t:\n"
         "    print(\"src/main.c:13:5: error: use of undeclared identifier 'f1_legacy'\"); sys.exit(1)\n"
         "print('ok')\n")


@pytest.fixture
def buildable(project: Project) -> Project:
    script = project.recipes.parent / "compile.py"
    script.write_text(CHECK)
    recipe = project.recipes / "demo.yaml"
    recipe.write_text(recipe.read_text() + f'build:\n  commands:\n    - name: compile\n'
                      f'      argv: ["${{python}}", "{script}"]\n')
    write_patchset(project.recipes, "kernel-launch-check", """\
name: kernel-launch-check
description: Define C10_CUDA_KERNEL_LAUNCH_CHECK.
steps:
  - id: define
    insert: {file: src/main.c, at: start, text: "#define C10_CUDA_KERNEL_LAUNCH_CHECK() 0"}
""")
    project.ok("apply", "demo", "-C", project.wt)  # the recipe changed (build section): same steps
    return project


def _in_terminal(project: Project, answers: str) -> tuple[int, str]:
    controller, terminal = pty.openpty()
    os.write(controller, answers.encode())
    proc = subprocess.run([sys.executable, "-m", "legacy_gpu_patch", "--recipe-path", str(project.recipes), "build",
                           "-C", str(project.wt), "--until-clean"], stdin=terminal, capture_output=True, text=True,
                          timeout=120)
    os.close(terminal)
    os.close(controller)
    return proc.returncode, proc.stderr


def test_until_clean_adds_the_missing_patchset_then_stops_at_the_next_error(buildable: Project) -> None:
    code, err = _in_terminal(buildable, "y\n")
    assert "patchset kernel-launch-check fixes this and is not in recipe demo" in err
    assert "added patchset kernel-launch-check; rebuilding" in err
    text = (buildable.recipes / "demo.yaml").read_text()
    assert text.index("- demo") < text.index("- kernel-launch-check") < text.index("build:")
    assert (buildable.wt / "src/main.c").read_text().startswith("#define C10_CUDA_KERNEL_LAUNCH_CHECK() 0\n")
    # the second error has no patchset: stop with it and the edit/refresh hint
    assert code == 9 and "no known patchset to add; fix it by hand: `lgpatch edit" in err
    # the hand fix, with refresh's message taken from the last classified error
    buildable.edit_file("src/main.c", "return f1();", "return f2();")
    buildable.ok("refresh", "-C", buildable.wt)
    patches = list((buildable.recipes / "patchsets/demo").glob("*.patch"))
    assert len(patches) == 1 and "f1_legacy" in patches[0].read_text().split("\n---\n")[0]
    code, err = _in_terminal(buildable, "")
    assert code == 0 and "clean build" in err


def test_until_clean_declined_changes_nothing(buildable: Project) -> None:
    before = (buildable.recipes / "demo.yaml").read_text()
    code, err = _in_terminal(buildable, "n\n")
    assert code == 9 and "no known patchset to add" in err
    assert (buildable.recipes / "demo.yaml").read_text() == before


def test_until_clean_refuses_without_a_terminal(buildable: Project) -> None:
    proc = run_cli_subprocess("--recipe-path", buildable.recipes, "build", "-C", buildable.wt, "--until-clean")
    assert proc.returncode == 2 and "stdin is not a terminal" in proc.stderr  # a usage error
    assert not (buildable.wt / ".git/lgpatch/build/report.json").exists()  # refused before building
