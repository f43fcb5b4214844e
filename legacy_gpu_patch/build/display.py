"""What a running build shows: nothing (Display), the raw output (PlainDisplay), or a live view with the
classifier's newest findings and the last lines of output (LiveDisplay, rich)."""

from __future__ import annotations

import shlex
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

from legacy_gpu_patch.classify.classifier import Classifier, Finding

if TYPE_CHECKING:
    from legacy_gpu_patch.build.runner import RunResult


class Display:
    """Where the output goes while it runs. The base class shows nothing (--quiet, machine formats)."""

    def start(self, name: str, phase: str, argv: Sequence[str]) -> None:
        pass

    def feed(self, data: bytes) -> None:
        pass

    def finding(self, finding: Finding, new: bool) -> None:
        pass

    def stop(self, result: RunResult) -> None:
        pass

    def close(self) -> None:
        pass


class PlainDisplay(Display):
    """Not a terminal (CI logs): the output passes through unchanged, plus one line per command."""

    def __init__(self, stream: BinaryIO | None = None) -> None:
        self.stream = stream or sys.stderr.buffer

    def start(self, name: str, phase: str, argv: Sequence[str]) -> None:
        self.stream.write(f"==> [{phase}] {name}: {shlex.join(argv)}\n".encode("utf-8", "replace"))
        self.stream.flush()

    def feed(self, data: bytes) -> None:
        self.stream.write(data)
        self.stream.flush()

    def stop(self, result: RunResult) -> None:
        self.stream.write(f"==> {result.reason} after {result.duration:.1f}s\n".encode())
        self.stream.flush()


class LiveDisplay(Display):
    """A terminal: a rich status line (phase, elapsed, error/warning counts) over the last lines of output.

    New findings are printed above the live area as they are found, so the user sees what broke (and the
    patchset that fixes it) while the build continues.
    """

    def __init__(self, console: Any, classifier: Classifier, tail: int = 6, refresh: float = 4.0) -> None:
        from rich.live import Live

        self.console = console
        self.classifier = classifier
        self.lines: deque[str] = deque(maxlen=tail)
        self.partial = b""
        self.name = ""
        self.phase = ""
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.live = Live(console=console, refresh_per_second=refresh, transient=True, get_renderable=self._render)
        self.live.start()

    def _render(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        with self.lock:
            lines = list(self.lines)
        elapsed = time.monotonic() - self.t0
        c = self.classifier
        status = Text.assemble(
            (f" {self.phase} ", "bold reverse"),
            f" {self.name}  {int(elapsed // 60)}:{int(elapsed % 60):02d}  ",
            (f"{c.errors} error(s)", "red" if c.errors else "green"),
            "  ",
            (f"{c.warnings} warning(s)", "yellow" if c.warnings else "dim"),
            f"  {c.lines:,} lines",
        )
        width = max(20, self.console.width - 2)
        tail = [Text(line[:width], style="dim", no_wrap=True) for line in lines]
        return Group(status, *tail)

    def start(self, name: str, phase: str, argv: Sequence[str]) -> None:
        self.name, self.phase = name, phase
        self.t0 = time.monotonic()
        self.console.print(f"[bold]==> [{phase}] {name}[/]: [dim]{shlex.join(argv)}[/]", highlight=False)

    def feed(self, data: bytes) -> None:
        # only the last few lines of the chunk matter for the screen
        data = self.partial + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.partial = data[-4096:]
            return
        self.partial = data[cut + 1 :][-4096:]
        start = cut
        for _ in range(self.lines.maxlen or 6):
            start = data.rfind(b"\n", 0, start)
            if start < 0:
                break
        chunk = data[start + 1 : cut].decode("utf-8", "replace").replace("\r", "")
        with self.lock:
            self.lines.extend(line.expandtabs() for line in chunk.split("\n") if line.strip())

    def finding(self, finding: Finding, new: bool) -> None:
        if not new or not finding.is_error or finding.secondary:
            return
        from rich.markup import escape

        patch = f"  [cyan]patchset: {escape(', '.join(finding.patchsets))}[/]" if finding.patchsets else ""
        self.console.print(
            f"[red]{finding.category}[/] {escape(finding.where())}: {escape(finding.message[:200])}{patch}",
            highlight=False,
        )

    def stop(self, result: RunResult) -> None:
        style = "green" if result.ok else "red"
        self.console.print(f"[{style}]==> {self.name}: {result.reason}[/] after {result.duration:.1f}s")

    def close(self) -> None:
        self.live.stop()


def make_display(console: Any, classifier: Classifier, quiet: bool = False, stream: BinaryIO | None = None) -> Display:
    if quiet:
        return Display()
    if console is not None and getattr(console, "is_terminal", False):
        return LiveDisplay(console, classifier)
    return PlainDisplay(stream)
