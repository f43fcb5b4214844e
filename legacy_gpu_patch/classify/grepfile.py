"""GNU grep over a whole log file at once: one process reading the file itself, its answers taken as they are needed.

The chunk accelerator (grepscan.py) pipes every chunk through a grep process of its own: each byte of the log is
then copied into a pipe and out of it again, ~0.05 s of system time for 50 MB, one process start per 4 MiB. When
the log is a regular file (`lgpatch classify build.log`), one grep reads the file on its own descriptor, from the
start, while the classifier reads its chunks; each output line ("OFFSET:LINE") names the start of a line holding a
trigger, and the classifier takes those of each chunk as it reaches it. The same lines come out as from the chunk
search, so the same findings (tests/unit/classify/test_grep_file.py).

Only what the file held when the search started is answered this way (a log still being written may grow): a chunk
that reaches beyond that size, and every chunk after grep failed, is searched as before. Answers for a range are
complete only once grep has named a line after it or ended with status 0 or 1.
"""

from __future__ import annotations

import os
import stat
import subprocess
from bisect import bisect_left
from itertools import repeat
from operator import sub
from typing import IO, Any

from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["FileSearch"]

_ENV = {"LC_ALL": "C"}
_READ = 1 << 16
_OFFSET = compile_re(rb"\n([0-9]+):")  # an output line's OFFSET, after the line before it (_parse)
_COMPACT = 1 << 14  # answered entries dropped once this many have gathered (the list does not grow with the log)


class FileSearch:
    """The lines of one file that hold a trigger, from one GNU grep reading the file, in file order."""

    __slots__ = ("_eof", "_head", "_length", "_lengths", "_offset", "_proc", "_starts", "_taken", "failed", "limit")

    def __init__(self, proc: subprocess.Popen[bytes], limit: int) -> None:
        self._proc = proc
        self.limit = limit  # the file's size when grep started: only ranges below it are answered
        self._head = b""  # the start of an output line's "OFFSET:" not read whole yet
        self._offset = -1  # the offset of the output line being read, -1 between lines
        self._length = 0  # bytes of its text read so far
        # each line's start and length, in order (two lists of ints: no object a line for the cyclic collector to
        # walk); those before _taken answered
        self._starts: list[int] = []
        self._lengths: list[int] = []
        self._taken = 0
        self._eof = False
        self.failed = False

    @classmethod
    def start(cls, argv: list[Any], file: IO[bytes], min_size: int) -> FileSearch | None:
        """A search of `file` (a regular file of at least `min_size` bytes, read from its start), else None."""
        name = getattr(file, "name", None)
        try:
            mine = os.fstat(file.fileno())
            if not isinstance(name, str) or not stat.S_ISREG(mine.st_mode) or mine.st_size < min_size:
                return None
            fd = os.open(name, os.O_RDONLY)  # its own descriptor: its own read position
        except (OSError, ValueError, AttributeError):
            return None
        try:
            theirs = os.fstat(fd)
            if (theirs.st_dev, theirs.st_ino) != (mine.st_dev, mine.st_ino):
                return None  # the name now points at another file
            proc = subprocess.Popen(argv, stdin=fd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_ENV)
        except (OSError, subprocess.SubprocessError):
            return None
        finally:
            os.close(fd)
        return cls(proc, mine.st_size)

    def line_starts(self, lo: int, hi: int) -> list[tuple[int, int]] | None:
        """[(line start, line length)] of the lines holding a trigger that start in file[lo:hi] (whole lines), in
        order; None when not known here (beyond the size at start, or grep failed): the caller searches itself."""
        found = self.line_spans(lo, hi)
        return None if found is None else list(zip(*found))

    def line_spans(self, lo: int, hi: int) -> tuple[list[int], list[int]] | None:
        """line_starts() as (the starts, the lengths)."""
        if self.failed or hi > self.limit:
            return None
        starts, lengths = self._starts, self._lengths
        while len(starts) == self._taken or starts[-1] < hi:
            if self._eof or not self._more():
                break
        if self.failed:
            return None
        # the answer is a slice of each list (the starts are in order): no per-line Python work
        taken = self._taken
        first = bisect_left(starts, lo, taken)
        done = bisect_left(starts, hi, first)
        out = starts[first:done], lengths[first:done]
        if done > _COMPACT:
            del starts[:done], lengths[:done]
            done = 0
        self._taken = done
        return out

    def _more(self) -> bool:
        """Parse the next piece of grep's output; False at its end (then `failed` says whether grep failed).

        Only each line's offset and length are kept, never its text: a matched line may be megabytes long."""
        assert self._proc.stdout is not None
        data = self._proc.stdout.read1(_READ)  # type: ignore[attr-defined]  # a BufferedReader
        if not data:
            self._eof = True
            if self._head or self._offset >= 0 or self._proc.wait() not in (0, 1):  # a cut line, or killed
                self.failed = True
            return False
        try:
            self._parse(data)
        except ValueError:  # not grep -b's output: nothing of it is trusted
            self.failed = True
            return False
        return True

    def _parse(self, data: bytes) -> None:
        """Take the output lines in `data`: those cut by a piece's edge one by one (_parse_cut), the whole ones in
        between in bulk (one split, one findall: ~0.25 us a line, against ~0.4 us with a comprehension of `index`es
        and ~1 us one by one)."""
        pos, end = 0, len(data)
        if self._offset >= 0 or self._head:  # the rest of an output line cut by the last piece
            nl = data.find(b"\n")
            pos = end if nl < 0 else nl + 1
            self._parse_cut(data[:pos])
        last = data.rfind(b"\n", pos) + 1
        if last > pos:
            # each whole line is "OFFSET:TEXT" (a log line holds no newline), OFFSET digits: the first one's OFFSET
            # read here, every later one's by one findall of "\n" OFFSET ":" (sre skips to each newline at C speed);
            # a line not so made is not grep -b's output (ValueError: fewer OFFSETs than lines); TEXT's length is
            # the line's less OFFSET's and the colon
            colon = data.index(b":", pos, last - 1)
            offsets = [data[pos:colon], *_OFFSET.findall(data, pos, last - 1)]
            lines = data[pos : last - 1].split(b"\n")
            if len(offsets) != len(lines) or not offsets[0].isdigit():
                raise ValueError("not grep -b's output")
            self._starts += map(int, offsets)
            self._lengths += map(sub, map(sub, map(len, lines), map(len, offsets)), repeat(1))
            pos = last
        if pos < end:
            self._parse_cut(data[pos:])

    def _parse_cut(self, data: bytes) -> None:
        """Parse a piece of output that holds at most one newline, at its end: a line cut at either edge."""
        append_start, append_length = self._starts.append, self._lengths.append
        pos, end = 0, len(data)
        while pos < end:
            if self._offset < 0:  # at "OFFSET:" of an output line
                colon = data.find(b":", pos)
                if colon < 0:
                    self._head += data[pos:]
                    if len(self._head) > 24:
                        raise ValueError("no offset")
                    return
                digits = self._head + data[pos:colon]
                if not digits.isdigit():  # as _parse reads OFFSET: digits alone
                    raise ValueError("no offset")
                self._offset = int(digits)
                self._head, self._length, pos = b"", 0, colon + 1
            nl = data.find(b"\n", pos)
            if nl < 0:
                self._length += end - pos
                return
            append_start(self._offset)
            append_length(self._length + nl - pos)
            self._offset, pos = -1, nl + 1

    def close(self) -> None:
        """End grep if it still runs (the log was not read to its end) and reap it."""
        proc = self._proc
        if proc.poll() is None:
            proc.kill()
        if proc.stdout is not None:
            proc.stdout.close()
        proc.wait()
