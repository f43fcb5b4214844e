"""The chainer-numpy2 shim (cupy/_numpy_compat.py) answers as NumPy 1.x did, under NumPy 2.

CuPy 1.x picks the loop of an elementwise kernel with ``numpy.can_cast(scalar, type)`` and relies on NumPy 1.x's
value-based rule (``float32_array * 2.0`` stays float32); NumPy 2 dropped that rule (NEP 50) and find_common_type.
The module under test is built from the patchset's own patch files with real git, then run by an interpreter that
has NumPy 2 (this one, or LGPATCH_NUMPY2_PYTHON) against tests/fixtures/numpy1-casting/table.json, NumPy 1.26.4's
answers (generate.py says how the table was made). With a NumPy 1.x interpreter (LGPATCH_NUMPY1_PYTHON, or this
one) the table itself is regenerated live and compared, and the shim is shown to be NumPy's own functions there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import REPO, git

PATCHSET = REPO / "patchsets" / "chainer-numpy2"
PATCHES = ("numpy2-removals.patch", "nep50-value-casting.patch")  # in the order the patchset applies them
FIXTURES = REPO / "tests" / "fixtures" / "numpy1-casting"
TABLE = FIXTURES / "table.json"
MODULE = "cupy/_numpy_compat.py"


def _numpy_version(python: str) -> str | None:
    try:
        proc = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"], capture_output=True,
                              text=True, timeout=120)
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _interpreter(major_ok, env_var: str) -> tuple[str, str] | None:
    """(python, numpy version) of this interpreter or $env_var, whichever has a NumPy whose major passes."""
    for python in (sys.executable, os.environ.get(env_var)):
        if not python:
            continue
        version = _numpy_version(python)
        if version and major_ok(int(version.split(".")[0])):
            return python, version
    return None


@pytest.fixture(scope="module")
def numpy2_python() -> str:
    found = _interpreter(lambda major: major >= 2, "LGPATCH_NUMPY2_PYTHON")
    if found is None:
        pytest.skip("no interpreter with NumPy >= 2: install numpy in the test environment or set "
                    "LGPATCH_NUMPY2_PYTHON to a python that has it")
    return found[0]


def _provision_numpy1(base: Path) -> str | None:
    """A venv with the last NumPy 1.x, when PyPI is reachable: the live truth the committed table came from."""
    from helpers import network_available

    if not network_available():
        return None
    venv = base / "numpy1"
    py = venv / "bin" / "python"
    steps = ([sys.executable, "-m", "venv", str(venv)],
             [str(py), "-m", "pip", "install", "-q", "--only-binary", ":all:", "numpy<2"])
    for argv in steps:
        if subprocess.run(argv, capture_output=True, timeout=600).returncode != 0:
            return None
    return str(py)


@pytest.fixture(scope="module")
def numpy1_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    found = _interpreter(lambda major: major < 2, "LGPATCH_NUMPY1_PYTHON")
    if found is None:
        provisioned = _provision_numpy1(tmp_path_factory.mktemp("np1"))
        if provisioned is not None:
            return provisioned
    if found is None:
        pytest.skip("no interpreter with NumPy 1.x: set LGPATCH_NUMPY1_PYTHON to a python that has numpy<2 "
                    "(e.g. python -m venv v && v/bin/pip install 'numpy<2')")
    return found[0]


@pytest.fixture(scope="module")
def compat_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cupy/_numpy_compat.py exactly as the patchset creates it: its two patches applied with git."""
    root = tmp_path_factory.mktemp("compat")
    git(root, "init", "-q")
    for name in PATCHES:
        git(root, "apply", f"--include={MODULE}", str(PATCHSET / name))
    path = root / MODULE
    assert path.is_file(), f"{PATCHES} did not create {MODULE}"
    return path


_CHECK = textwrap.dedent("""
    import importlib.util, json, sys, warnings
    module_path, fixtures, table_path = sys.argv[1:4]
    sys.path.insert(0, fixtures)
    from generate import value
    import numpy
    spec = importlib.util.spec_from_file_location("_numpy_compat", module_path)
    compat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compat)
    warnings.simplefilter("ignore", DeprecationWarning)

    def ask(function, *args):
        try:
            return bool(function(*args))
        except TypeError as exc:
            return "TypeError: %s" % exc

    table = json.load(open(table_path))
    wrong, numpy_differs = [], 0
    for kind, type_, raw, to, casting, expect in table["can_cast"]:
        got = ask(compat.can_cast, value(kind, type_, raw), to, casting)
        if got != expect:
            wrong.append(["can_cast", kind, type_, raw, to, casting, expect, got])
        numpy_differs += ask(numpy.can_cast, value(kind, type_, raw), to, casting) != expect
    for arrays, scalars, expect in table["find_common_type"]:
        found = compat.find_common_type(arrays, scalars)
        got = None if found is None else found.str
        if got != expect:
            wrong.append(["find_common_type", arrays, scalars, expect, got])
    print(json.dumps({"numpy": numpy.__version__, "wrong": wrong, "numpy_differs": numpy_differs,
                      "cases": len(table["can_cast"]) + len(table["find_common_type"]),
                      "is_numpy_own": compat.can_cast is numpy.can_cast}))
""")


def _check(python: str, module: Path) -> dict:
    proc = subprocess.run([python, "-c", _CHECK, str(module), str(FIXTURES), str(TABLE)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_table_is_numpy_1x_and_large() -> None:
    table = json.loads(TABLE.read_text())
    assert table["numpy"].startswith("1."), "the truth table must come from NumPy 1.x"
    assert len(table["can_cast"]) > 5000 and len(table["find_common_type"]) > 600
    results = {row[-1] for row in table["can_cast"]}
    assert results == {True, False}, "a table of only True (or only False) answers tests nothing"


def test_shim_gives_numpy1_answers_under_numpy2(numpy2_python: str, compat_module: Path) -> None:
    report = _check(numpy2_python, compat_module)
    assert report["wrong"] == [], f"NumPy {report['numpy']}: {len(report['wrong'])} answers differ: " \
                                  f"{report['wrong'][:10]}"
    # The table discriminates: NumPy 2's own can_cast gets many of these cases wrong (NEP 50, Python scalars).
    assert report["numpy_differs"] > 500, report["numpy_differs"]
    assert not report["is_numpy_own"]


_EXAMPLES = textwrap.dedent("""
    import importlib.util, sys
    import numpy
    spec = importlib.util.spec_from_file_location("_numpy_compat", sys.argv[1])
    c = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(c)
    f32 = numpy.float32
    # float32_array * 2.0: CuPy asks can_cast(float64(2.0), float32); NumPy 1.x said yes (2.0 fits).
    assert c.can_cast(numpy.float64(2.0), f32)
    assert not c.can_cast(numpy.float64(1e300), f32)          # does not fit: float64 loop
    assert c.can_cast(2.0, "f") and c.can_cast(5, "b")        # NumPy 2 raises TypeError for Python scalars
    assert not c.can_cast(300, "b") and not c.can_cast(-1, "B")
    assert c.can_cast(numpy.int64(100), numpy.int8)            # small non-negative fits the signed type
    assert not c.can_cast(numpy.float64(2.0), numpy.int32)     # never float -> int under 'safe'
    assert c.can_cast(numpy.dtype("f"), "d") and not c.can_cast(numpy.dtype("d"), "f")  # dtypes: unchanged
    assert c.find_common_type(["f"], ["d"]) == numpy.float32   # scalar of the same kind does not upcast
    assert c.find_common_type(["i"], ["f"]) == numpy.float64   # higher kind does
    assert c.find_common_type([], []) is None
    arr = numpy.array([1, 2], dtype=numpy.float32)
    assert numpy.array(arr, copy=c.COPY_IF_NEEDED) is arr      # no copy when none is needed
    assert numpy.array([1, 2], copy=c.COPY_IF_NEEDED).tolist() == [1, 2]  # and a copy where one is
    print("ok")
""")


def test_examples_cupy_relies_on(numpy2_python: str, compat_module: Path) -> None:
    proc = subprocess.run([numpy2_python, "-c", _EXAMPLES, str(compat_module)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_committed_table_matches_live_numpy1(numpy1_python: str) -> None:
    proc = subprocess.run([numpy1_python, str(FIXTURES / "generate.py")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    live, committed = json.loads(proc.stdout), json.loads(TABLE.read_text())
    for key in ("can_cast", "find_common_type"):
        differ = [(a, b) for a, b in zip(live[key], committed[key]) if a != b]
        assert len(live[key]) == len(committed[key]) and not differ, \
            f"NumPy {live['numpy']} disagrees with the committed table ({committed['numpy']}): {differ[:5]}"


def test_shim_steps_aside_on_numpy1(numpy1_python: str, compat_module: Path) -> None:
    report = _check(numpy1_python, compat_module)
    assert report["is_numpy_own"], "on NumPy 1.x can_cast must be NumPy's own"
    assert report["wrong"] == []
