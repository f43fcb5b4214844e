"""pybind11-py312's script (added to the tree by the patch, run by the recipe's build on the submodule): it edits
the two pybind11 2.4.3 headers once, leaves patched ones alone, and stops on a pybind11 it does not know."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import unidiff

REPO = Path(__file__).resolve().parents[3]
PATCH = REPO / "patchsets" / "pybind11-py312" / "pybind11-script.patch"

# The two passages of pybind11 2.4.3 (v1.5.0's third_party/pybind11) the script rewrites, verbatim.
CAST_H = """        PyFrameObject *frame = trace->tb_frame;
        errorString += "\\n\\nAt:\\n";
        while (frame) {
            int lineno = PyFrame_GetLineNumber(frame);
            errorString +=
                "  " + handle(frame->f_code->co_filename).cast<std::string>() +
                "(" + std::to_string(lineno) + "): " +
                handle(frame->f_code->co_name).cast<std::string>() + "\\n";
            frame = frame->f_back;
        }
    }
"""
PYBIND11_H = """#if !defined(PYPY_VERSION)
    PyFrameObject *frame = PyThreadState_Get()->frame;
    if (frame && (std::string) str(frame->f_code->co_name) == name &&
"""


def _script(tmp_path: Path) -> Path:
    (added,) = [f for f in unidiff.PatchSet(PATCH.read_text(encoding="utf-8")) if f.is_added_file]
    assert added.path == "tools/lgpatch/pybind11_py312.py"
    script = tmp_path / "pybind11_py312.py"
    script.write_text("".join(line.value for hunk in added for line in hunk if line.is_added), encoding="utf-8")
    return script


def _pybind11(tmp_path: Path) -> Path:
    inc = tmp_path / "pybind11" / "include" / "pybind11"
    inc.mkdir(parents=True)
    (inc / "cast.h").write_text("// head\n" + CAST_H + "// tail\n")
    (inc / "pybind11.h").write_text("// head\n" + PYBIND11_H + "// tail\n")
    return tmp_path / "pybind11"


def _run(script: Path, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True, check=False)


def test_edits_once_and_is_idempotent(tmp_path: Path) -> None:
    script, root = _script(tmp_path), _pybind11(tmp_path)
    first = _run(script, root)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count(": patched") == 2
    cast = (root / "include/pybind11/cast.h").read_text()
    assert "PyFrame_GetCode(frame)" in cast and "PyFrame_GetBack(frame)" in cast
    assert "#if PY_VERSION_HEX >= 0x03090000" in cast and cast.count("frame->f_code->co_filename") == 1  # old path kept
    overload = (root / "include/pybind11/pybind11.h").read_text()
    assert "#if !defined(PYPY_VERSION) && PY_VERSION_HEX < 0x030B0000" in overload
    again = _run(script, root)
    assert again.returncode == 0 and again.stdout.count("already patched") == 2
    assert (root / "include/pybind11/cast.h").read_text() == cast


def test_unknown_pybind11_stops_the_build(tmp_path: Path) -> None:
    script, root = _script(tmp_path), _pybind11(tmp_path)
    (root / "include/pybind11/pybind11.h").write_text("// pybind11 2.13: nothing to do here\n")
    res = _run(script, root)
    assert res.returncode != 0 and "expected text not found" in res.stderr
