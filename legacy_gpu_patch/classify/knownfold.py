"""Known folded lines: a candidate line of a new raw shape that starts with a compiler location, whose folded shape
was decided before, is taken without normalising it or learning its shape.

Most of an error-dense log's new raw shapes are new only through their path (the bench's 52 MB log: 20,300 raw
shapes, a few hundred folded ones), and each paid the long way (~45 us: the raw fast path's test, the decode,
normalize(), the shape cache's miss, a folded decision (foldshape.py) and the learning of two shapes). Here a line
of a new raw shape (known.py has no entry for it) takes what its folded shape's entry in foldshape's cache decides,
as PathFold.decide would, where all of this holds (else the long way, as before):

- the line is a *plain* shape (known.plain_shape: normalize() leaves it as it is, or changes only its backquotes),
  no longer than MATCH_WINDOW, with a location (pathfold.location_path), and the raw fast path does not decide it
  (Matcher._raw_decided, run on it);
- its folded line `F = token + line[cut:]` (the token of its head: PathFold._head) has an entry in the folded
  shape cache (learnt here where missing, as PathFold.decide learns it: `_folded_entry`), which decides every
  line of F's shape alike where the line holds none of the entry's digit strings (known._strings: the runs of its
  aware digit units and its needs; tested on F); a block rule or an aware digit unit that decided the learnt line
  takes the long way;
- the units aware on its head (PathFold: not proven, or a context in either head) are tried on the line itself,
  in order, before F's decider: where one matches, the long way decides; where the decider is aware, its match on
  the line is the one taken (and where it misses, the long way decides).

The finding is then the entry's, with its spans shifted by `cut - len(token)` (known to lie past the token:
casefold._shifted), counted, recorded or left waiting as Collector._classify and KnownLines._known_line do. The
line's raw shape is learnt, so that its next lines are known lines (~2 us): straight from this decision where its
path holds no digit (every line of the raw shape has this path), the aware units tried are digit-blind and no digit
string of the entry can start in the fold token (`_learn_folded`); else as the long way learns it (a shape-cache
entry: ShapeCache.store; then KnownLines._learn_known). Where it was learnt straight, and the gate found nothing,
the decision is also kept for the lines of the head's class and the rest's shape (knownclass.py).
tests/unit/classify/test_known_folded.py compares findings, counts and contexts with the long way.
"""

from __future__ import annotations

from typing import Any

from legacy_gpu_patch.classify.casefold import SpanMatch, _shifted
from legacy_gpu_patch.classify.collect import WRAP_MIN, _Pending
from legacy_gpu_patch.classify.fastpath import MATCH_WINDOW
from legacy_gpu_patch.classify.known import NOTHING, QUOTED, KnownLines, _key_span, _strings, known_entry, plain_shape
from legacy_gpu_patch.classify.linereader import _PROGRESS_RAW
from legacy_gpu_patch.classify.shapes import _END, MAX_SHAPES, RAW_TO_ZERO, TEXT_TO_ZERO
from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["FoldedLines"]

_BACKQUOTE = bytes.maketrans(b"`", b"'")
_ASCII_DIGIT = compile_re(r"[0-9]").search


class FoldedLines(KnownLines):
    """The folded-shape half of a Classifier's known lines (its scan calls _folded_line for a new raw shape)."""

    _location: Any = None  # pathfold's location pattern on bytes, once a fold is ready
    _entry_memo: dict[int, tuple[Any, tuple[str, ...] | None, dict[tuple[int, int], Any]]] | None = None

    def _folded_line(self, lineno: int, raw: bytes, key: bytes, block: bytes, s: int, nxt: int,
                     progress_next: bool) -> int:
        """Take a candidate line (block[s:nxt - 1] = `raw`, its raw shape `key`) by its folded shape (module
        docstring); returns where the scan goes on (as _known_line), or -1, with nothing done, where the long way
        must decide it."""
        shapes = self._shapes
        if shapes is None or shapes.fold is None or shapes.fold._location_path is None or len(raw) > MATCH_WINDOW:
            return -1
        fold = shapes.fold
        read = self._folded_entry(fold, raw)
        if read is None:
            return -1
        plain, cut, text, low, token, aware, entry = read
        first, _, rule, regex, spans, _ = entry
        derived = self._derived(entry)  # what the entry alone decides, worked out once per entry
        kept, shifts = derived[1], derived[2]
        if kept is None:
            return -1
        if kept and self._digits_held(token + low[cut:], kept):
            return -1
        gate = fold.trial_gate(self, aware, first)
        if gate is not None and gate(low) is None:  # the line selects none of the units: none is tried
            fold.held = None  # the index's answer, asked below where the shape's entry needs it
            if first in aware:
                return -1  # an aware decider the line's literals do not select: the long way
            hit: Any = True
        else:
            gate, hit = None, self._aware_tried(fold, text, low, cut, aware, first)
            if hit is None:
                return -1
        if hit is True and rule is not None:  # F's decider decides the line, its spans shifted
            moved = shifts.get((cut, len(token)), False)
            if moved is False:
                moved = shifts[cut, len(token)] = _shifted(spans, cut - len(token), len(token))
            if moved is None:
                return -1
            hit = rule, SpanMatch(regex, text, moved)
        # the line's raw shape learnt, so that its next lines are known lines: straight from this decision where it
        # holds for them all, else as the long way learns it (shapes.py, known.py)
        if self._learn_folded(fold, key, raw, plain, low[: cut + 1], token + low[cut], aware, first, kept, hit):
            if gate is not None:  # and kept for the lines of its head's class and its rest's shape (knownclass.py)
                self._keep_class(fold, raw, key, cut, token, aware, entry, gate)
        else:
            shape = key if plain != QUOTED else key.translate(_BACKQUOTE)
            held = fold.held if fold.held is not None else self._located.answer(low, cut)[0]
            shapes.store(text, shape, None if hit is True else (first, hit[0], hit[1]), held)
            self._learn_known(key, raw, plain)
        if hit is True or hit[0].exception:
            return nxt
        return self._take_folded(hit[0], hit[1], lineno, text, block, s, nxt, progress_next)

    def _folded_entry(self, fold: Any, raw: bytes) -> tuple[int, int, str, str, str, frozenset[int], Any] | None:
        """(plain_shape, the location's cut, the text, lowered, the fold token, the units aware on the head, the
        folded entry) of a plain located line that the raw fast path does not decide, whose folded shape has an
        entry; else None."""
        plain = plain_shape(raw)
        if not plain:
            return None
        location = self._location
        if location is None:
            from legacy_gpu_patch.classify.pathfold import _LOCATION

            location = type(self)._location = compile_re(_LOCATION.pattern.encode()).match
        found = location(raw)
        if found is None or self._raw_skipped(raw, True):
            return None
        cut = found.end()
        text = raw.decode("ascii")
        if plain == QUOTED:
            text = text.replace("`", "'")
        low = text.lower()
        token, aware = fold._head(low[: cut + 1])
        rest = raw[cut:] if plain != QUOTED else raw[cut:].translate(_BACKQUOTE)
        shape = token.encode() + rest.translate(RAW_TO_ZERO)
        entry = fold.folded.entries.get(shape)
        if entry is None:  # F's shape learnt here, as PathFold.decide learns it on the long way (exact for F)
            fold._folded_match(self, token + text[cut:])
            entry = fold.folded.entries.get(shape)
            if entry is None:
                return None
        return plain, cut, text, low, token, aware, entry

    def _keep_class(self, fold: Any, raw: bytes, key: bytes, cut: int, token: str, aware: frozenset[int], entry: Any,
                    gate: Any) -> None:
        """Where a line's decision holds for the lines of its head's class and its rest's shape: kept for them
        (knownclass.ClassedLines; nothing here)."""

    def _derived(self, entry: Any) -> tuple[Any, tuple[str, ...] | None, dict[tuple[int, int], Any]]:
        """(entry, its digit strings (known._strings) or None where the long way decides every line of F's shape (a
        string always tried, an aware digit unit that decided, a block rule), its spans shifted per (cut, token
        length): casefold._shifted). Kept per entry by its id, the entry with it (an id is reused only once the
        entry is gone): a folded shape's lines are mostly of new raw shapes, and each paid these again (the hash of
        the entry's nested tuples, a Python loop over its spans)."""
        memo = self._entry_memo
        if memo is None:
            memo = self._entry_memo = {}
        found = memo.get(id(entry))
        if found is None or found[0] is not entry:
            first, worth, rule, _, _, needs = entry
            kept = _strings(worth, needs) if worth or needs else ()
            if (rule is None and first != _END) or (rule is not None and rule.block is not None):
                kept = None
            if len(memo) >= MAX_SHAPES:
                memo.clear()
            found = memo[id(entry)] = (entry, kept, {})
        return found

    def _learn_folded(self, fold: Any, key: bytes, raw: bytes, plain: int, path: str, head: str,
                      aware: frozenset[int], first: int, kept: tuple[str, ...], hit: Any) -> bool:
        """Keep this line's decision for every line of its raw shape `key`, where it holds for them all: their
        paths (`path`: this line's, lowered, with its `:`/`(`) hold the units' contexts this one holds (none holding
        a digit has its shape in the path's shape: a string without one is in every path of the shape alike), so
        they have its fold token and aware units; the aware units that were tried are digit-blind (they decide
        every line of the shape alike); and the entry's digit strings `kept`, tested on a line, are in it where they
        are in its folded line (none can start in the token's `head`: it holds no digit, so a string holding one
        would run from its end into the location's digits). Then a line holding none of them is decided as the
        folded entry decides it (KnownLines._known_line tests them). False: nothing kept."""
        known, raw_shapes, shapes = self._known, self._raw_shapes, self._shapes
        if known is None or raw_shapes is None or shapes is None or raw_shapes.get(key) is not False:
            return False  # known lines off, or not the shape _raw_skipped just decided (its table started again)
        memo = fold.memo  # the tests that do not depend on the line, per path, and per units and strings
        ok = memo.get((aware, first, kept, head)) if _path_alike(fold, path) else False
        if ok is None:
            ok = memo[aware, first, kept, head] = not any(u <= first for u in aware & shapes.units) and not any(
                head.endswith(t[:j]) for t in kept for j in range(1, len(t)))
        if len(memo) >= MAX_SHAPES:
            memo.clear()
        if not ok:
            return False
        if hit is True or hit[0].exception:
            found: Any = known_entry(None, None, (), False, kept, None, plain == QUOTED) if kept else NOTHING
        else:
            rule, m = hit
            spans = m.regs
            found = known_entry(rule, m.re, spans, rule.generic or len(raw) >= WRAP_MIN, kept,
                                _key_span(rule, m.re, spans), plain == QUOTED)
        if len(known) >= MAX_SHAPES:
            known.clear()
        known[key] = found
        return True

    def _aware_tried(self, fold: Any, text: str, low: str, cut: int, aware: frozenset[int], first: int) -> Any:
        """The units aware on the line's head, tried on the line before F's decider `first` (where the line holds
        one of the strings of trial_gate): True where none matches and the decider is not aware; the decider's
        match on the line where it is aware and matches; None (the long way decides) where an earlier one matches,
        or the aware decider misses or is not selected."""
        held, rules = self._located.answer(low, cut)  # and `_located.starts` for this line's path
        fold.held = held  # for the line's shape entry (ShapeCache.store)
        try_unit = self.held_unit
        for u in fold._order(self, held, rules, aware):
            if u > first:
                break
            found = try_unit(u, text, low, held, cut)
            if u == first:
                return found
            if found is not None:
                return None
        return None if first in aware else True  # an aware decider the line's literals do not select: long way

    def _take_folded(self, rule: Any, m: Any, lineno: int, text: str, block: bytes, s: int, nxt: int,
                     progress_next: bool) -> int:
        """A finding of `rule` on the line (its match `m`), as Collector._classify takes it (the waiting and
        counting of KnownLines._known_line); returns where the scan goes on."""
        if rule.generic or len(text) >= WRAP_MIN:
            if self._pending is not None:
                self._finish_pending(None)
            if not (progress_next and not self._after_open and self._block is None
                    and _PROGRESS_RAW.match(block, nxt, nxt + 256)):
                self._pending = _Pending(rule, lineno, text, self._before(block, s, self.context_before), m)
                self._want = max(self._want, 1)
                return nxt
            # the progress line ends the waiting finding, recorded as it is, and is done with
            self._want = max(self._want, 1) - 1
            nxt = block.find(b"\n", nxt) + 1
        self._record(rule, m, lineno, text, self._before(block, s, self.context_before))
        return nxt


def _path_alike(fold: Any, path: str) -> bool:
    """Whether every path of `path`'s shape (lowered, with its `:`/`(`) holds the units' contexts `path` holds: none
    holding a digit has its shape in the path's shape (a string without one is in every path of the shape alike).
    A path without a digit holds none (`path` is ASCII: a string holding an ASCII digit has a `0` in its shape, one
    holding another digit is not in it); any other is kept per path in fold.memo."""
    if not _ASCII_DIGIT(path):
        return True  # most paths: no translate, no look-up, nothing kept per path (a build has thousands)
    memo = fold.memo
    alike = memo.get(path)
    if alike is None:
        shape = path.translate(TEXT_TO_ZERO)
        alike = memo[path] = not any(s in shape for s in fold.tables.digit_shapes)
    return alike
