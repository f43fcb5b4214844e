"""Run a build command: stream its output to a log file, to the screen, and through the classifier, as it runs.

The child runs in its own process group (a new session): Ctrl-C in the terminal reaches only lgpatch, which then
stops the whole group (make, ninja, the compilers under them) with SIGTERM, then SIGKILL after a grace period,
keeps reading what they print meanwhile, and returns normally so that the caller still writes its report.
SIGTERM to lgpatch (CI cancelling a job) is handled the same way.

Output is read with os.read in chunks, not line by line from a text stream: the log gets the bytes exactly as
written (invalid UTF-8 included), the classifier splits lines itself, and per-chunk work keeps the overhead of
watching a build that prints millions of lines to a few percent.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from legacy_gpu_patch.build.display import Display, LiveDisplay, PlainDisplay, make_display
from legacy_gpu_patch.classify.classifier import Classifier

# Re-exported: the displays a Runner shows its command's output with live in display.py.
__all__ = ["GRACE_S", "Display", "LiveDisplay", "PlainDisplay", "RunResult", "Runner", "make_display"]

READ_SIZE = 1 << 20
PIPE_SIZE = 1 << 20
GRACE_S = 5.0  # after SIGTERM, how long the group gets to exit before SIGKILL


@dataclass(frozen=True)
class RunResult:
    returncode: int | None
    duration: float
    interrupted: bool  # Ctrl-C or SIGTERM stopped it
    reason: str  # "exit 2", "killed by SIGSEGV", "interrupted (SIGINT)", ...
    first_line: int  # 1-based log lines of its output (header excluded)
    last_line: int

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.interrupted


# --------------------------------------------------------------------------------------------- running


def _describe(returncode: int | None) -> str:
    if returncode is None:
        return "not run"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


class Runner:
    """Runs commands one after the other into one log, one classifier, one display."""

    def __init__(self, classifier: Classifier, log: BinaryIO, display: Display | None = None,
                 grace: float = GRACE_S) -> None:
        self.classifier = classifier
        self.log = log
        self.display = display or Display()
        self.grace = grace
        self.proc: subprocess.Popen[bytes] | None = None
        self._signal = ""
        self._killer: threading.Timer | None = None
        classifier.on_finding = self.display.finding

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
            name: str = "", phase: str = "build") -> RunResult:
        name = name or Path(argv[0]).name
        shown = shlex.join(argv).replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever the argv
        header = f"==> lgpatch [{phase}] {name}: {shown}  (cwd {cwd or os.getcwd()})\n"
        raw_header = header.encode("utf-8", "replace")
        self.log.write(raw_header)
        self.classifier.skip(raw_header)
        self.classifier.phase = phase
        first = self.classifier.lines + 1
        self.display.start(name, phase, argv)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=cwd, env=dict(env) if env is not None else None, start_new_session=True, bufsize=0,
            )
        except OSError as exc:
            message = f"cannot run {argv[0]}: {exc.strerror or exc}\n"
            self.log.write(message.encode())
            self.classifier.skip(message.encode())
            result = RunResult(127, time.monotonic() - t0, False, f"cannot start ({exc.strerror or exc})",
                               first, self.classifier.lines)
            self.display.stop(result)
            return result
        self.proc = proc
        self._signal = ""
        previous = self._install_handlers(proc)
        try:
            self._pump(proc)
            returncode: int | None = proc.wait()
        finally:
            self._restore_handlers(previous)
            if self._killer is not None:
                self._killer.cancel()
                self._killer = None
            if proc.stdout is not None:
                proc.stdout.close()
        self.proc = None
        interrupted = self._signal
        self.classifier.flush()
        if interrupted:
            note = f"==> lgpatch: {interrupted}: stopped process group {proc.pid}\n".encode()
            self.log.write(note)
            self.classifier.skip(note)
        self.log.flush()
        duration = time.monotonic() - t0
        reason = f"interrupted ({interrupted}); {_describe(returncode)}" if interrupted else _describe(returncode)
        result = RunResult(returncode, duration, bool(interrupted), reason, first, self.classifier.lines)
        self.display.stop(result)
        return result

    # Ctrl-C / SIGTERM: the handlers do not raise (an exception in the middle of feeding the classifier would lose
    # output); they stop the child's process group and let the read loop run to the end of its output. A timer
    # sends SIGKILL when the group has not exited after the grace period; a second signal sends it at once.

    def _install_handlers(self, proc: subprocess.Popen[bytes]) -> Any:
        self._killer = None
        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum: int, frame: Any) -> None:
            if self._signal:
                _killpg(proc.pid, signal.SIGKILL)
                return
            self._signal = signal.Signals(signum).name
            _killpg(proc.pid, signal.SIGTERM)
            self._killer = threading.Timer(self.grace, _killpg, (proc.pid, signal.SIGKILL))
            self._killer.daemon = True
            self._killer.start()

        return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    @staticmethod
    def _restore_handlers(previous: Any) -> None:
        if previous:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def interrupted(self) -> bool:
        return bool(self._signal)

    def _consume(self, data: bytes) -> None:
        self.log.write(data)
        self.classifier.feed(data)
        self.display.feed(data)

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        _widen_pipe(fd)
        read = os.read
        consume = self._consume
        while True:
            data = read(fd, READ_SIZE)
            if not data:
                return
            consume(data)


def _widen_pipe(fd: int) -> None:
    """A 1 MiB pipe (Linux): a fast producer fills bigger chunks, so the reader wakes up less often."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
    except (OSError, ImportError, ValueError):
        pass  # not Linux, or over /proc/sys/fs/pipe-max-size: the default size works too


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
