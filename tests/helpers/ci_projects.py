"""A tiny pure-Python project and recipes for it, for the `lgpatch ci` / workflow tests: real git, a real wheel
built by `pip wheel` with hatchling (installed with lgpatch's test extra, so no download), a real venv.

The upstream tree has two legacy defects, each fixed by one step of the `tiny-fixes` patchset:
- tinypkg/legacy.py uses Python 2 print syntax: the build's compileall step fails without `py3-print`;
- tinypkg/__init__.py imports Mapping from collections (gone since Python 3.10): the wheel builds, but importing it
  fails — the smoke test's job to catch — without `collections-abc`.
"""

from __future__ import annotations

from pathlib import Path

from helpers import Upstream, make_upstream, write_patchset, write_recipe

TINY_FILES = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "tinypkg"\nversion = "1.0.0"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["tinypkg"]\n'
    ),
    "tinypkg/__init__.py": (
        "from collections import Mapping\n\nFLAVOR = 'unset'\n\n\n"
        "def double(x):\n    return 2 * x\n\n\nassert isinstance({}, Mapping)\n"
    ),
    "tinypkg/legacy.py": 'def hello():\n    print "hello"\n',
}

STEPS = {
    "py3-print": """\
  - id: py3-print
    description: Python 3 print
    regex: {files: [tinypkg/legacy.py], pattern: 'print "hello"', replace: 'print("hello")', word: false}
""",
    "collections-abc": """\
  - id: collections-abc
    description: Mapping lives in collections.abc since Python 3.3 (and only there since 3.10)
    regex: {files: [tinypkg/__init__.py], pattern: 'from collections import Mapping',
            replace: 'from collections.abc import Mapping', word: false}
""",
    "flavor": """\
  - id: flavor
    description: record the flavor parameter
    regex: {files: [tinypkg/__init__.py], pattern: "FLAVOR = 'unset'", replace: "FLAVOR = '${flavor}'", word: false}
""",
}


# A step whose anchor upstream never had: strict apply must stop with PATCH (5).
DRIFTED_STEP = """\
  - id: drifted
    description: an anchor that is not in the tree
    regex: {files: [tinypkg/__init__.py], pattern: 'def triple', replace: 'def thrice', word: false}
"""


def write_tiny_recipe(folder: Path, up: Upstream, *, name: str = "tiny", leave_out: str | None = None,
                      cuda: bool = False, extra_step: str = "") -> Path:
    """recipes/<name>.yaml + patchsets/<name>-fixes beside it; `leave_out` drops one step of the patchset,
    `extra_step` appends one."""
    steps = "".join(text for key, text in STEPS.items() if key != leave_out) + extra_step
    write_patchset(folder, f"{name}-fixes", f"name: {name}-fixes\ndescription: fixes for tinypkg\nsteps:\n{steps}")
    cuda_param = '  cuda: {type: version, default: "13.0", allowed: ">=11.0,<14"}\n' if cuda else ""
    text = f"""\
name: {name}
description: A tiny pure-Python project (fixture).
source: {{git: {{url: "{up.url()}", ref: {up.tag}, commit: {up.commit}}}}}
parameters:
{cuda_param}  flavor: {{type: string, default: plain, choices: [plain, fancy]}}
steps:
  - {name}-fixes
ignore: ["dist/", "*.egg-info/"]
build:
  commands:
    - name: compile
      phase: build
      argv: ["${{python}}", -m, compileall, -q, tinypkg]
    - name: wheel
      phase: build
      argv: ["${{python}}", -m, pip, wheel, --no-deps, --no-build-isolation, --disable-pip-version-check, -w, dist,
             .]
  wheel_dir: dist
"""
    return write_recipe(folder, text, f"{name}.yaml")


def tiny_upstream(root: Path) -> Upstream:
    return make_upstream(root, TINY_FILES)
