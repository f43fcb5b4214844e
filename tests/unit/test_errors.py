"""The exit-code table in docs/exit-codes.md is the contract CI jobs read; it must match the code."""

from __future__ import annotations

import re
from pathlib import Path

from legacy_gpu_patch.errors import ExitCode, LgpatchError

DOC = Path(__file__).resolve().parents[2] / "docs" / "exit-codes.md"


def test_every_exit_code_is_documented_with_its_name() -> None:
    rows = dict(re.findall(r"^\|\s*(\d+)\s*\|\s*([A-Z_]+)\s*\|", DOC.read_text(), re.M))
    assert {int(k): v for k, v in rows.items()} == {int(c): c.name for c in ExitCode}


def test_every_error_class_has_its_own_code() -> None:
    classes = [c for c in LgpatchError.__subclasses__()]
    codes = [c.exit_code for c in classes]
    assert len(codes) == len(set(codes)), "two error classes share an exit code"
    assert ExitCode.INTERNAL not in codes and ExitCode.OK not in codes


def test_render_is_one_paragraph_with_hint() -> None:
    from legacy_gpu_patch.errors import SourceError

    text = SourceError("tag moved", hint="check upstream").render()
    assert text == "lgpatch: source error: tag moved\n  hint: check upstream"
