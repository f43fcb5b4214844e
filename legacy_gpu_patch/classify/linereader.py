"""One line of a chunk, as the Classifier reaches it: the lines after a finding (context, blocks, joins), long lines
read on a window, a candidate line normalized and handed to the rules (Collector._classify)."""

from __future__ import annotations

from collections import deque

from legacy_gpu_patch.classify.collect import Before, Collector
from legacy_gpu_patch.classify.fastpath import MATCH_WINDOW
from legacy_gpu_patch.classify.normalize import context_text, normalize, strip_prefixes
from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["LineReader"]

# a progress marker of make/CMake or ninja at the start of a line (after a CI timestamp, if any)
_PROGRESS_START = compile_re(r"^(?:\S+Z[ \t]|\#\d+[ \t]\d+\.\d+[ \t])?[ \t]*\[(?:[ \t]*\d{1,3}%|\d+/\d+)\][ \t]")
# the commonest of them on the raw bytes, undecoded: a line whose first 256 bytes this matches, _PROGRESS_START matches
# too (its optional parts left out; ASCII digits, spaces and tabs are what its str classes take of ASCII)
_PROGRESS_RAW = compile_re(rb"\[(?:[ \t]*[0-9]{1,3}%|[0-9]+/[0-9]+)\][ \t]")


class LineReader(Collector):
    """The per-line half of the Classifier (classifier.py feeds it chunks)."""

    _carry: deque[bytes]  # the last lines of the chunk before (set by the Classifier)
    _block_start: int  # where the chunk being scanned starts in its block
    _carry_now: tuple[bytes, ...]  # _carry while a chunk is scanned (it changes only between chunks)

    def _keep_tail(self, block: bytes, start: int, end: int) -> None:
        """Keep the last lines for the before-context of the next chunk's first lines."""
        k = self._carry.maxlen or 1
        tail: list[bytes] = []
        stop = end - 1
        while len(tail) < k and stop > start:
            first = block.rfind(b"\n", start, stop) + 1 or start
            tail.append(block[first:stop])
            stop = first - 1
        for line in reversed(tail):
            self._carry.append(line)

    def _join_pending(self, raw: bytes, text: str | None) -> bool:
        """Resolve the waiting finding with this line; True if the line was its wrapped continuation.

        A line that starts with a build tool's progress marker ("[12/345] Building ...") is output of its own, never
        the rest of a wrapped line: the joined readings are not tried (they cost three rule searches a line in a
        failing build, where every long error line waits for the next one).
        """
        if raw[:1] == b"[" and _PROGRESS_RAW.match(raw, 0, 256):  # most of them in a failing build: no decode
            self._finish_pending(None)
            return False
        head = raw[:256].decode("utf-8", "replace")
        if _PROGRESS_START.match(head):
            self._finish_pending(None)
            return False
        if text is None:
            text = normalize(raw[: MATCH_WINDOW * 2].decode("utf-8", "replace"))
        return self._finish_pending(text, strip_prefixes(head)[:1].encode())

    def _progress_ends_pending(self, block: bytes, s: int) -> bool:
        """What _line() does with a line holding no trigger that starts with a progress marker, where only the
        waiting finding wants it (no context being collected, no open block): the finding is recorded as it is
        (_join_pending), and the line is done. False, and nothing done, for any other line. The marker cannot
        span a newline, so matching it in the block up to 256 bytes on is matching it in the line."""
        if block[s : s + 1] != b"[" or self._after_open or self._block is not None:
            return False
        if not _PROGRESS_RAW.match(block, s, s + 256):
            return False
        self._want -= 1
        self._finish_pending(None)
        return True

    def _before(self, block: bytes, s: int, n: int) -> Before:
        lo, carry = self._block_start, self._carry_now  # as they are now: read later, when a kept one needs them
        return lambda: _lines_before(block, s, n, lo, carry)

    def _line(self, lineno: int, block: bytes, s: int, e: int, hit: int, checked: bool = False) -> bool:
        """Look at one line; True when it was classified or taken into a block or join (done with it).

        `checked`: the caller already knows the raw fast path does not decide the line.
        """
        raw = block[s:e]
        if self._want > 0:
            self._want -= 1
            text = None
            if self._after_open:
                ctx = context_text(raw)
                still = []
                for f in self._after_open:
                    f.context_after.append(ctx)
                    if len(f.context_after) < f._after_wanted:
                        still.append(f)
                self._after_open = still
            if self._block is not None:
                text = normalize(raw[: MATCH_WINDOW * 2].decode("utf-8", "replace"))
                if self._continue_block(raw, text):
                    return True
            if self._pending is not None and self._join_pending(raw, text):
                return True
        if hit < 0:
            return False
        if not checked and self._raw_skipped(raw):
            return True  # a command echo, include chain or progress line
        if len(raw) > MATCH_WINDOW:
            # A long line: the anchored lead rules (command echoes) read its head, the others a window around
            # its first trigger; memory and time per line stay bounded whatever the line's length.
            head = normalize(raw[:MATCH_WINDOW].decode("utf-8", "replace"))
            if self._lead_match(head) is not None:
                return True
            rel = hit - s
            lo = max(0, rel - MATCH_WINDOW // 4)
            raw = raw[lo : lo + MATCH_WINDOW]
        text = normalize(raw.decode("utf-8", "replace"))
        if text:
            self._classify(lineno, text, block, s)
        return True


def _lines_before(block: bytes, s: int, n: int, lo: int, carry: tuple[bytes, ...]) -> list[bytes]:
    """The n lines before block[s:] (block[lo:] is this chunk; `carry`: the last lines of the chunk before)."""
    out: list[bytes] = []
    end = s - 1
    while len(out) < n and end >= lo:
        start = block.rfind(b"\n", lo, end) + 1 or lo
        out.append(block[start:end])
        end = start - 1
    if len(out) < n:
        need = n - len(out)
        out.extend(reversed(carry[-need:]))
    out.reverse()
    return out
