"""bench/gpu/pytorch_checks.py's one-layer LMS check, the parts that do not need the GPU: its child script turns LMS
on before it allocates anything (LMS cannot swap what was allocated before; the first version of the check did, and
failed on the H200 at every limit below the layer's whole working set), and a failure is reported by the
exception's own line, not by the last of the c10 error's `frame #N:` lines."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
from types import ModuleType

import pytest
from helpers import REPO

pytest.importorskip("torch")


def _checks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pytorch_checks", REPO / "bench" / "gpu" / "pytorch_checks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _calls_in_order(source: str) -> list[str]:
    """The dotted names of the calls the script makes at module level and in step(), in source order."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            names.append((node.lineno, node.col_offset, ast.unparse(node.func)))
    return [name for _, _, name in sorted(names)]


def test_lms_is_enabled_before_the_first_cuda_allocation_and_the_limit_after_the_reference() -> None:
    calls = _calls_in_order(_checks().LMS_DETERMINISTIC_CONV)
    enabled = calls.index("torch.cuda.set_enabled_lms")
    first_cuda = min(i for i, name in enumerate(calls) if name.endswith((".cuda", "torch.randn")))
    assert enabled < first_cuda, calls
    # the reference (the first step()) runs at the default limit; the limit comes between it and the measured step
    steps = [i for i, name in enumerate(calls) if name == "step"]
    limit = calls.index("torch.cuda.set_limit_lms")
    assert len(steps) == 2 and steps[0] < limit < steps[1], calls


def test_the_reference_steps_cached_blocks_are_released_before_the_measured_step() -> None:
    # IBM's limit is tested only when the allocator asks cudaMalloc for more; the reference step's cached blocks
    # would be reused untested (session 7 on the H200: nothing reclaimed, peak = the reference's)
    calls = _calls_in_order(_checks().LMS_DETERMINISTIC_CONV)
    steps = [i for i, name in enumerate(calls) if name == "step"]
    for name in ("torch.cuda.empty_cache", "torch.cuda.reset_peak_memory_stats"):
        assert steps[0] < calls.index(name) < steps[1], (name, calls)
    assert "torch.cuda.max_memory_reserved" in calls[steps[1]:]


@pytest.mark.parametrize(("reclaimed", "peak_reserved", "ok"), [(7_000_000, 1700, True), (0, 1700, False),
                                                                 (7_000_000, 2746, False)])
def test_the_verdict_wants_a_swap_within_the_limit(monkeypatch: pytest.MonkeyPatch, reclaimed: int,
                                                   peak_reserved: int, ok: bool) -> None:
    checks = _checks()
    line = json.dumps({"rel_err": 0.0, "reclaimed_bytes": reclaimed, "peak_allocated_mb": 1600,
                       "peak_reserved_mb": peak_reserved})
    monkeypatch.setattr(checks.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, line + "\n", ""))
    reported: list[tuple[str, bool]] = []
    monkeypatch.setattr(checks, "report", lambda name, passed, **detail: reported.append((name, passed)))
    checks.check_lms_deterministic_conv(1729)
    assert reported == [("lms_deterministic_conv", ok)]


def test_a_failure_is_reported_by_the_exceptions_line() -> None:
    stderr = ("LMS: allocation limit for device \"0\" is 1729 MB\nTraceback (most recent call last):\n"
              "  File \"<string>\", line 24, in <module>\n"
              "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 139.80 GiB total capacity)\n"
              "frame #0: c10::Error::Error(c10::SourceLocation) + 0xc0 (0x7f in libc10.so)\n"
              "frame #27: <unknown function> + 0x129ecc (0x7fd1f0329ecc in /lib/x86_64-linux-gnu/libc.so.6)\n")
    assert _checks().first_error_line(stderr).startswith("RuntimeError: CUDA out of memory. Tried to allocate")


def test_without_an_error_line_the_last_plain_line_is_reported() -> None:
    assert _checks().first_error_line("Segmentation fault\nframe #1: x\n") == "Segmentation fault"
    assert _checks().first_error_line("") == ""
