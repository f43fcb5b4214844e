"""The runner with real subprocesses: output to log, screen and classifier as it streams; exit codes and signals;
Ctrl-C / SIGTERM stop the whole process group and the report is still written."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from rich.console import Console

from legacy_gpu_patch.build.runner import Display, LiveDisplay, PlainDisplay, Runner
from legacy_gpu_patch.classify.classifier import Classifier

REPO = Path(__file__).resolve().parents[3]
PY = sys.executable


def run(tmp_path: Path, code: str, display: Display | None = None, phase: str = "build"):  # type: ignore[no-untyped-def]
    c = Classifier()
    log = tmp_path / "build.log"
    with open(log, "wb") as fh:
        result = Runner(c, fh, display).run([PY, "-c", textwrap.dedent(code)], cwd=tmp_path, name="child",
                                            phase=phase)
    return result, c, log.read_bytes()


def test_output_goes_to_log_and_classifier_exactly(tmp_path: Path) -> None:
    code = r"""
        import sys
        out = sys.stdout.buffer
        out.write(b"[1/2] Building CXX object ErrorHandling.cpp.o\n")
        out.write(b"\xff\xfe invalid utf-8 \xc3\n")
        out.write(b"src/a.cpp:3:5: error: 'uint8_t' was not declared in this scope\n")
        out.flush()
        sys.stderr.write("c++: fatal error: Killed signal terminated program cc1plus\n")
        sys.stderr.flush()
        out.write(b"no newline at the end")
        sys.exit(3)
    """
    result, c, log = run(tmp_path, code)
    assert result.returncode == 3 and not result.ok and result.reason == "exit 3"
    header, body = log.split(b"\n", 1)
    assert header.startswith(b"==> lgpatch [build] child: ")
    assert b"\xff\xfe invalid utf-8 \xc3\n" in body and body.endswith(b"no newline at the end")
    findings = c.close()
    assert [(f.category, f.log_line, f.phase) for f in findings] == [
        ("missing-std-include", 4, "build"), ("oom-killed", 5, "build")]
    assert (result.first_line, result.last_line) == (2, 6)


def test_signal_death_and_missing_program(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert result.returncode == -signal.SIGSEGV and result.reason == "killed by SIGSEGV"
    c = Classifier()
    with open(tmp_path / "l.log", "wb") as fh:
        missing = Runner(c, fh).run([str(tmp_path / "no-such-tool")], name="x")
    assert missing.returncode == 127 and "cannot start" in missing.reason
    assert b"cannot run" in (tmp_path / "l.log").read_bytes()


def test_plain_display_passes_output_through(tmp_path: Path) -> None:
    screen = io.BytesIO()
    result, _, _log = run(tmp_path, "print('hello'); print('world')", display=PlainDisplay(screen))
    shown = screen.getvalue()
    assert b"hello\nworld\n" in shown and b"==> [build] child:" in shown and b"exit 0" in shown
    assert result.ok


def test_live_display_shows_findings_while_running(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, color_system=None)
    c = Classifier()
    display = LiveDisplay(console, c)
    with open(tmp_path / "b.log", "wb") as fh:
        Runner(c, fh, display).run(
            [PY, "-c", "print('x.cu(1): error: identifier \"cusparseScsrmm2\" is undefined'); print('done')"],
            name="compile", phase="build",
        )
    display.close()
    text = out.getvalue()
    assert "removed-cusparse-api" in text and "patchset: cusparse-spmm" in text
    assert "==> compile: exit 0" in text


def test_many_lines_in_small_writes(tmp_path: Path) -> None:
    code = """
        import sys
        for i in range(20000):
            sys.stdout.write(f"[{i}/20000] Building CXX object f{i}.cpp.o\\n")
            if i % 5000 == 0:
                sys.stdout.flush()
        print("src/z.cpp:1:1: error: 'int64_t' does not name a type")
    """
    result, c, log = run(tmp_path, code)
    assert result.ok
    (f,) = c.close()
    assert f.log_line == 20002 and c.lines == 20002
    assert log.count(b"\n") == 20002


# --------------------------------------------------------------------------------------------- interrupts

DRIVER = """
import sys
from pathlib import Path
from legacy_gpu_patch.build.options import BuildRequest, resolve_options
from legacy_gpu_patch.build.run import run_build
from legacy_gpu_patch.config.recipe import SearchPath, load_recipe
from legacy_gpu_patch.build.runner import PlainDisplay

root = Path(sys.argv[1])
recipe = load_recipe(root / "r.yaml", SearchPath((root,), (root,)))
opts = resolve_options(root, recipe, {}, BuildRequest(jobs=1, report_dir=root / "rep", python=sys.executable))
out = run_build(opts, display=PlainDisplay(sys.stdout.buffer), grace=float(sys.argv[2]))
print("EXIT", int(out.exit_code), flush=True)
sys.exit(int(out.exit_code))
"""

CHILD = """
import os, signal, subprocess, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open("grandchild.pid", "w").write(str(grandchild.pid))
print("src/a.cpp:1:1: error: 'uint8_t' was not declared in this scope", flush=True)
print("started", flush=True)
time.sleep(120)
"""

RECIPE = """\
name: sleepy
description: A build that never ends by itself.
source:
  sdist: {url: "https://example.invalid/x-1.0.tar.gz", sha256: "%s"}
steps:
  - id: nothing
    insert: {file: a.txt, text: "x\\n", at: end}
build:
  commands:
    - name: long-compile
      argv: ["%s", child.py, "%s"]
    - name: never-reached
      phase: wheel
      argv: ["%s", -c, "print('should not run')"]
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return True


@pytest.mark.parametrize(("sig", "mode"), [(signal.SIGINT, "normal"), (signal.SIGTERM, "normal"),
                                           (signal.SIGINT, "ignore")])
def test_interrupt_stops_the_group_and_writes_the_report(tmp_path: Path, sig: int, mode: str) -> None:
    (tmp_path / "child.py").write_text(CHILD, encoding="utf-8")
    (tmp_path / "r.yaml").write_text(RECIPE % ("0" * 64, PY, mode, PY), encoding="utf-8")
    (tmp_path / "driver.py").write_text(DRIVER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([PY, str(tmp_path / "driver.py"), str(tmp_path), "1.0"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=tmp_path, env=env, start_new_session=True)
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + 60
    while b"started" not in seen and time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 1)[0]:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
    assert b"started" in seen, seen.decode(errors="replace")
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert _alive(grandchild)
    os.kill(proc.pid, sig)  # only lgpatch gets it, as a terminal's Ctrl-C reaches only the foreground group
    try:
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    output = (seen + rest).decode(errors="replace")
    assert proc.returncode == 10, output
    assert "EXIT 10" in output
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild), "the grandchild in the build's process group survived"
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert report["status"] == "interrupted" and report["exit_code"] == 10
    assert [p["status"] for p in report["phases"]] == ["interrupted", "not-run"]
    assert report["findings"][0]["category"] == "missing-std-include"
    log = (tmp_path / "rep" / "build.log").read_text(errors="replace")
    assert f"{signal.Signals(sig).name}: stopped process group" in log
    assert "should not run" not in log
    assert (tmp_path / "rep" / "junit.xml").is_file()
