"""GNU grep as an accelerator of the trigger search: one pass for all triggers instead of one pass per trigger.

Python has no multi-literal search at C speed: scan.py pays one `bytes.find` pass per trigger (~30 ns/byte for
~33 passes). GNU grep searches an alternation of literals in one pass (its keyword set: Aho-Corasick /
Commentz-Walter, ~2 ns/byte here). Where GNU grep is installed, a chunk of at least GREP_MIN bytes is piped
through `grep -a -b -E` with every trigger; its output names the start of every line that holds one, which is all
the rest of the classifier needs of the search (the position of the first trigger matters only in lines longer
than MATCH_WINDOW: those few are searched again in Python, exactly as scan.py would). Without GNU grep, for small
chunks (a build streamed live) or on any failure of grep, the pure-Python search runs: both give the same
candidate lines (tests/unit/classify/test_grep_accelerator.py).

`LGPATCH_CLASSIFY_GREP=0` turns the accelerator off (read once, when the first classifier is made).
"""

from __future__ import annotations

import os
import subprocess
import threading
from functools import lru_cache
from typing import IO

__all__ = ["GREP_MIN", "GrepSearch", "gnu_grep"]

GREP_MIN = 256 << 10  # below this, starting a process costs more than the passes it saves
_ERE_SPECIAL = frozenset(b"\\.[]()*+?{}|^$")
_ENV = {"LC_ALL": "C"}  # bytes, not characters: no locale, no decoding errors


def _which(name: str) -> str | None:
    """shutil.which(name) on POSIX, without importing shutil (and bz2, lzma, fnmatch with it) at every start."""
    if os.name != "posix":
        import shutil

        return shutil.which(name)
    for folder in os.get_exec_path():
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


@lru_cache(maxsize=1)
def gnu_grep() -> str | None:
    """The path of GNU grep, or None (not installed, another grep, or LGPATCH_CLASSIFY_GREP=0)."""
    if os.environ.get("LGPATCH_CLASSIFY_GREP", "1").strip().lower() in ("0", "no", "false", "off"):
        return None
    path = _which("grep")
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, env=_ENV, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    # only GNU grep is known to take -a -b -E -e this way and to search literals in one pass
    return path if out.startswith(b"grep (GNU grep)") else None


def _write_all(pipe: IO[bytes], data: memoryview) -> None:
    try:
        with pipe:
            pipe.write(data)  # a buffered pipe: writes it all or raises
    except OSError:  # grep ended early: its exit status says so
        pass


def _ere(literal: bytes) -> bytes:
    """`literal` as an extended regular expression matching exactly it (each special byte escaped)."""
    return b"".join(b"\\" + bytes((b,)) if b in _ERE_SPECIAL else bytes((b,)) for b in literal)


class GrepSearch:
    """The start of every line of a chunk that holds a trigger, found by one GNU grep process per chunk."""

    __slots__ = ("argv",)

    def __init__(self, grep: str, triggers: tuple[bytes, ...]) -> None:
        self.argv: list[str | bytes] = [grep, "-a", "-b", "-E", "-e", b"|".join(_ere(t) for t in triggers)]

    def line_starts(self, block: bytes, start: int, end: int) -> list[tuple[int, int]] | None:
        """[(line start, line length)] in block of every line of block[start:end] (whole lines) holding a
        trigger, in order; None when grep failed (the caller searches in Python)."""
        try:
            proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_ENV
            )
        except (OSError, subprocess.SubprocessError):
            return None
        assert proc.stdin is not None and proc.stdout is not None
        # the chunk goes in from a thread in one blocking write (communicate() would write it 4 KiB a poll)
        writer = threading.Thread(target=_write_all, args=(proc.stdin, memoryview(block)[start:end]), daemon=True)
        writer.start()
        with proc.stdout:
            out = proc.stdout.read()
        writer.join()
        if proc.wait() not in (0, 1):  # 1: no line matched; anything else (killed, a broken pipe) is trouble
            return None
        found: list[tuple[int, int]] = []
        append = found.append
        pos = 0
        # each output line is "OFFSET:LINE\n" (a log line holds no newline, so output lines are log lines)
        while pos < len(out):
            colon = out.index(b":", pos)
            nl = out.index(b"\n", colon)
            append((start + int(out[pos:colon]), nl - colon - 1))
            pos = nl + 1
        return found
