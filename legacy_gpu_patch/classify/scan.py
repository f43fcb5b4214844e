"""Scan primitives: which lines of a chunk hold a trigger.

Every trigger is searched in every line of the log (an error is found wherever it is, whatever comes after it): a
pass of `bytes.find` per trigger over each chunk, at C speed, touching no line that cannot matter. A trigger that
holds a byte rare in build logs (the R of `ERROR`, the K of `Killed`) is searched through a memchr for that byte
(see _Finder). Non-ASCII triggers (CJK, Cyrillic) are searched only in chunks that hold their lead byte, so an
English log never pays for them. The result is a table of candidate lines, line start -> first trigger in it; the
per-line work is then paid only for those, and costs the same whatever their number (no search restarts from the
chunk's start for a line).
"""

from __future__ import annotations

from functools import lru_cache
from itertools import repeat
from operator import sub
from typing import IO

from legacy_gpu_patch.classify.fastpath import MATCH_WINDOW
from legacy_gpu_patch.classify.grepfile import FileSearch
from legacy_gpu_patch.classify.grepscan import GREP_MIN, GrepSearch, gnu_grep

__all__ = ["TriggerSearch"]

# Bytes rare in build logs, rarest first. Most of a log is lowercase words, digits, paths and flags; its uppercase
# letters are mostly those of CUDA, CMAKE, CXX, TORCH and of capitalised words (Found, Linking, Fill), and these are
# left out. Non-ASCII bytes rank before all.
_RARE_BYTES = b"`~^|@!$&?;{}\\*QZJVYKWGBHPNRO"
PLAIN_AFTER_MISS = 8 << 20  # bytes searched with bytes.find after a trigger's rare byte proved frequent


@lru_cache(maxsize=256)
def _rare_index(needle: bytes) -> int:
    """Index in `needle` of its rarest byte by _RARE_BYTES, or -1 (none, or a trigger searched only where its
    non-ASCII lead byte occurs: there its bytes are not rare)."""
    if not needle[:1].isascii():
        return -1
    best, best_rank = -1, len(_RARE_BYTES)
    for i, byte in enumerate(needle):
        if byte >= 0x80:
            rank = -1
        else:
            rank = _RARE_BYTES.find(bytes((byte,)))
            if rank < 0:
                continue
        if rank < best_rank:
            best, best_rank = i, rank
    return best


class _Finder:
    """One trigger's search: bytes.find, or, for a trigger that holds a byte rare in build logs ("ERROR",
    "Killed", "** WARNING"), memchr for that byte (bytes.find of one byte: many bytes a cycle) with each hit checked
    in place. Fastsearch steps through a log a few bytes at a time, and slower when the log is full of the trigger's
    letters; the rare byte is skipped to. Where the rare byte turns out frequent (more than one miss per 2 KiB
    searched), the search falls back to bytes.find for the next PLAIN_AFTER_MISS bytes: never much slower than the
    plain search. Both return the same position: the first occurrence at or after `pos` ending by `end`.
    """

    __slots__ = ("byte", "k", "needle", "plain_left")

    def __init__(self, needle: bytes) -> None:
        self.needle = needle
        self.k = _rare_index(needle)
        self.byte = needle[self.k : self.k + 1] if self.k >= 0 else b""
        self.plain_left = 0

    def first(self, block: bytes, pos: int, end: int) -> int:
        return self.rare(block, pos, end) if self.byte else block.find(self.needle, pos, end)

    def rare(self, block: bytes, pos: int, end: int) -> int:
        needle = self.needle
        find = block.find
        if self.plain_left > 0:
            q = find(needle, pos, end)
            self.plain_left -= (q if q >= 0 else end) - pos
            return q
        k = self.k
        byte = self.byte
        startswith = block.startswith
        budget = 8 + ((end - pos) >> 11)
        q = find(byte, pos + k, end)
        while q >= 0:
            if startswith(needle, q - k, end):
                return q - k
            budget -= 1
            if budget < 0:
                # every start up to q - k was checked: none holds the trigger
                self.plain_left = PLAIN_AFTER_MISS
                return find(needle, q - k + 1, end)
            q = find(byte, q + 1, end)
        return -1


ANCHOR = 3  # length of a shared piece searched once for several triggers
MIN_SHARED = 4  # triggers an anchor must stand for to replace their passes


def anchor_groups(triggers: tuple[bytes, ...]) -> tuple[list[tuple[bytes, list[tuple[bytes, int]]]], list[bytes]]:
    """([(anchor, [(trigger, offset of the anchor in it), ...]), ...], triggers searched on their own).

    Each trigger is a pass over the log; a 3-byte piece several triggers share ("ot " of `not found`, `cannot `,
    `not declared`, ...) is searched once instead, and each of its hits checked against its triggers in place:
    the same lines come out, for one pass instead of eight.
    """
    left = list(triggers)
    groups: list[tuple[bytes, list[tuple[bytes, int]]]] = []
    while True:
        counts: dict[bytes, int] = {}
        for t in left:
            for piece in {t[i : i + ANCHOR] for i in range(len(t) - ANCHOR + 1)}:
                counts[piece] = counts.get(piece, 0) + 1
        best = max(sorted(counts), key=lambda piece: counts[piece], default=None)
        if best is None or counts[best] < MIN_SHARED:
            return groups, left
        members = [t for t in left if best in t]
        groups.append((best, [(t, k) for t in members for k in _offsets(t, best)]))
        left = [t for t in left if best not in t]


def _offsets(t: bytes, piece: bytes) -> list[int]:
    out, k = [], t.find(piece)
    while k >= 0:
        out.append(k)
        k = t.find(piece, k + 1)
    return out


def _group_hits(block: bytes, start: int, end: int, anchor: bytes, members: list[tuple[bytes, int]],
                cands: dict[int, int]) -> None:
    """Add the lines of block[start:end] holding one of an anchor group's triggers to `cands`."""
    find = block.find
    startswith = block.startswith
    p = find(anchor, start, end)
    while p >= 0:
        hit = -1
        for t, k in members:
            q = p - k
            if q >= start and startswith(t, q, end):
                hit = q
                break
        if hit < 0:
            p = find(anchor, p + 1, end)
            continue
        s = block.rfind(b"\n", start, hit) + 1 or start
        known = cands.get(s)
        if known is None or known > hit:
            cands[s] = hit
        p = find(b"\n", p, end)
        if p < 0:
            break
        p = find(anchor, p, end)


class TriggerSearch:
    """The triggers of a rule set, ready to search chunks with."""

    __slots__ = ("_grep", "ascii", "gated", "groups", "triggers")

    def __init__(self, triggers: tuple[bytes, ...], share: bool = True, accelerate: bool = True) -> None:
        """`accelerate`: search chunks of GREP_MIN bytes or more with GNU grep where it is installed (grepscan)."""
        self.triggers = triggers
        plain = tuple(t for t in triggers if t[0] < 0x80)
        self.groups, alone = anchor_groups(plain) if share else ([], list(plain))
        self.ascii = tuple(_Finder(t) for t in alone)
        self.gated = tuple((t[:1], _Finder(t)) for t in triggers if t[0] >= 0x80)
        # resolved on the first chunk big enough: a classifier fed a live build's small chunks never starts grep
        self._grep: GrepSearch | bool | None = None if accelerate else False

    def _accelerator(self) -> GrepSearch | None:
        if self._grep is None:
            # a trigger grep cannot be given (empty, or holding a NUL or a newline) keeps the search in Python
            plain = all(t and b"\n" not in t and b"\0" not in t for t in self.triggers)
            path = gnu_grep() if plain else None
            self._grep = GrepSearch(path, self.triggers) if path else False
        return self._grep if isinstance(self._grep, GrepSearch) else None

    def finders(self, block: bytes, ascii: bool) -> list[_Finder]:
        """The finders worth running on `block`: a non-ASCII one only where its lead byte occurs (a memchr)."""
        found = list(self.ascii)
        if not ascii:
            present: dict[bytes, bool] = {}
            for lead, finder in self.gated:
                if lead not in present:
                    present[lead] = lead in block
                if present[lead]:
                    found.append(finder)
        return found

    def file_search(self, file: IO[bytes]) -> FileSearch | None:
        """One GNU grep over all of `file` (a regular file, read from its start), where the accelerator is on."""
        grep = self._accelerator()
        return FileSearch.start(grep.argv, file, GREP_MIN) if grep is not None else None

    def lines(self, block: bytes, start: int, end: int, ascii: bool, file: FileSearch | None = None,
              base: int | None = None) -> list[tuple[int, int]]:
        """(line start, position of a trigger in it) of every line of block[start:end] holding a trigger, in order.

        block[start:end] is whole lines; with `file`, block[0] is byte `base` of the file it searches (grepfile.py).
        The position is that of the line's first trigger in a line longer than MATCH_WINDOW (the window read around
        it); in a shorter line it may be any position in the line (only the line's end is looked for from it), so
        GNU grep's line starts serve there as they are.
        """
        starts, hits = self.spans(block, start, end, ascii, file, base)
        return list(zip(starts, hits))

    def spans(self, block: bytes, start: int, end: int, ascii: bool, file: FileSearch | None = None,
              base: int | None = None) -> tuple[list[int], list[int]]:
        """lines() as (the line starts, the positions): two lists of ints, not a pair a line, so that the cyclic
        collector has no object a candidate line to count and walk (~116,000 on the bench's dense log, each living
        while its chunk is read: they set off the collections of every generation); where grep found every line
        and none is long, one list is both."""
        if file is not None and base is not None:  # block[0] is byte `base` of the file grep searches
            spans = file.line_spans(base + start, base + end)
            if spans is not None:
                shifted = list(map(sub, spans[0], repeat(base)))
                return shifted, self._hits(block, shifted, spans[1], ascii)
        grep = self._accelerator() if end - start >= GREP_MIN else None
        found = grep.line_starts(block, start, end) if grep is not None else None
        if found is None:
            pairs = self.python_lines(block, start, end, ascii)
            return [s for s, _ in pairs], [hit for _, hit in pairs]
        starts = [s for s, _ in found]
        return starts, self._hits(block, starts, [length for _, length in found], ascii)

    def _hits(self, block: bytes, starts: list[int], lengths: list[int], ascii: bool) -> list[int]:
        """The positions of grep's lines (their starts and lengths): `starts` itself where none is longer than
        MATCH_WINDOW; else a line that is gets its first trigger from the search in Python (the window read around
        it), in a call of its own."""
        if max(lengths, default=0) <= MATCH_WINDOW:
            return starts
        return [s if length <= MATCH_WINDOW else self._long_line(block, s, length, ascii)[1]
                for s, length in zip(starts, lengths)]

    def _long_line(self, block: bytes, s: int, length: int, ascii: bool) -> tuple[int, int]:
        """(line start, first trigger) of a line longer than MATCH_WINDOW that grep found, as the search in Python
        finds it."""
        exact = self.python_lines(block, s, s + length + 1, ascii)
        return exact[0] if exact else (s, s)

    def python_lines(self, block: bytes, start: int, end: int, ascii: bool) -> list[tuple[int, int]]:
        """lines(), searched in Python: each trigger's search skips to the next line after a hit."""
        find = block.find
        rfind = block.rfind
        cands: dict[int, int] = {}
        get = cands.get
        for finder in self.finders(block, ascii):
            first = finder.first
            p = first(block, start, end)
            while p >= 0:
                s = rfind(b"\n", start, p) + 1 or start
                known = get(s)
                if known is None or known > p:
                    cands[s] = p
                p = find(b"\n", p, end)
                if p < 0:
                    break
                p = first(block, p, end)
        for anchor, members in self.groups:
            _group_hits(block, start, end, anchor, members, cands)
        return sorted(cands.items())
