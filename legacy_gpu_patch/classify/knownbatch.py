"""The scan loop's run over a chunk's candidate lines: the commonest lines of a failing build without a call each.

While no context, block or join wants the next line (`_want` is 0), Classifier._scan hands the candidate lines ahead
to `_run`, which takes them in order, in one loop with its look-ups made once, until one leaves `_want` above 0 (or
the candidates end); each line as the scan loop took it before: a raw shape decided SKIP or NOTHING passed over, a
known plain shape (KnownLines._known_line), a new raw shape by its folded shape (FoldedLines._folded_line), else the
long way (`_unknown_line`). A new raw shape whose head's class and rest's shape were decided before is first learnt
from them (ClassedLines._learn_by_class, knownclass.py) and then taken as a known line, counted here as below.

Past the display caps (500 findings, 50 locations each) a failing build's error line of a known raw shape costs only
its count, yet each paid a call of _known_line (seven arguments, the line decoded, the entry unpacked, a dozen
attribute look-ups). The run counts such a line itself, where all of this holds (else _known_line takes it):

- its entry names a rule and the span of its key, and the line holds none of the entry's digit strings (tested on
  the line decoded, its backquotes read as quotes where the shape is QUOTED, as _known_line tests them);
- no finding waits, none wants its after-context, no block is open, and nothing is told of findings (`on_finding`);
- the finding (rule, key) is past the caps: the count (errors or warnings, and the finding's count or `dropped`) is
  all that _known_line's "counts alone" does;
- where the entry waits (a generic reading, a line of WRAP_MIN characters or more), the next line is a progress line
  that ends the waiting finding at once (not a candidate, whole in the chunk, `[` and _PROGRESS_RAW), and is passed
  over, as _known_line does there without the waiting object.

While no finding waits or wants context, no block is open and nothing is told of findings (none of which a line
counted or passed over changes), `_count_run` takes the lines in a loop of its own, with those tests made once and
the counts added up and kept when it stops at a line it does not take. The same lines get the same counts, in the
same order. A line the long way takes whose finding waits, the next line being a progress line (no candidate) that
ends it, has that line taken in the run too, as the scan loop's next turn takes it (LineReader._progress_ends_pending;
test_line_shortcuts.py). tests/unit/classify/test_known_batch.py compares findings,
counts, contexts and line numbers with the counting off (`batch`), and checks that the run counted lines.
"""

from __future__ import annotations

from typing import Any

from legacy_gpu_patch.classify.fastpath import MATCH_WINDOW, UNPREFIXED_FIRST
from legacy_gpu_patch.classify.known import NOTHING, SKIP, SLOW
from legacy_gpu_patch.classify.knownclass import ClassedLines
from legacy_gpu_patch.classify.linereader import _PROGRESS_RAW
from legacy_gpu_patch.classify.normalize import normalize
from legacy_gpu_patch.classify.shapes import RAW_TO_ZERO

__all__ = ["BatchLines"]



class BatchLines(ClassedLines):
    """The run over a chunk's candidate lines of a Classifier's scan (module docstring)."""

    batch = True  # False: _known_line takes every known line (the tests' other way)
    batched = 0  # lines the run counted itself (tests: the counting was taken)

    def _run(self, block: bytes, starts: list[int], hits: list[int], i: int, end: int, plain: bool, base: int,
             counted: int, counted_pos: int) -> tuple[int, int, int, int]:
        """Take the candidate lines i, i + 1, ... (their `starts` and trigger positions `hits`, TriggerSearch.spans;
        i < len(starts)) until one leaves `_want` above 0; returns (the index of the next candidate, where the scan
        goes on, and the line count's state: `counted` newlines up to `counted_pos`, the scan's line numbers being
        base + counted + 1)."""
        known = self._known
        get = known.get if known is not None else None
        counting = get is not None and self.batch and not self.on_finding
        classes = self._learn_by_class if self.classes else None  # a new raw shape of a kept class (knownclass.py)
        learning = self.learning
        find, n, pos = block.find, len(starts), end
        while i < n:
            by_class = classes if learning.on else None  # resting (adaptive.py): no class learnt from
            if counting and self._pending is None and not self._after_open and self._block is None:
                i, pos, line = self._count_run(block, starts, hits, i, end, get, by_class)
                if line is None:
                    break
                s, hit, e, raw, key, found = line
            else:
                s, hit = starts[i], hits[i]
                i += 1
                e = find(b"\n", hit)
                pos = e + 1
                raw = block[s:e]
                found, key = SLOW, b""  # key: the raw shape, where it is still to be learnt (known.py)
                if get is not None:  # a raw shape decided before
                    key, found = _decided(raw, get, by_class)
                    if found is SKIP or found is NOTHING:
                        continue
            if found is None and not learning.miss(i - 1):  # a new raw shape while learning rests: the long way,
                found, key = SLOW, b""  # nothing learnt (adaptive.py)
            pos, counted, counted_pos = self._take(block, starts, i, s, e, hit, raw, key, found, plain, base,
                                                   counted, counted_pos, end)
            if self._want > 0:
                break
        return i, pos, counted, counted_pos

    def _count_run(self, block: bytes, starts: list[int], hits: list[int], i: int, end: int, get: Any,
                   by_class: Any) -> tuple[int, int, tuple[int, int, int, bytes, bytes, Any] | None]:
        """Pass over or count the candidate lines i, i + 1, ... that a decided raw shape lets the run take itself (no
        finding waits or wants context, no block is open, nothing is told of findings: none of which a line taken
        here changes), until one that it does not: returns (the index past it, where the scan goes on, (its start,
        its trigger, its end, the line, its raw shape, its known entry or None) or None where they ran out). Counts
        added up and kept at the end; a waiting line's progress line passed over where the last line taken waited."""
        find, findings, progress, held = block.find, self._findings, _PROGRESS_RAW.match, self._digits_held
        max_findings, max_occurrences = self.max_findings, self.max_occurrences
        n, pos, waited, taken, errors, dropped, line = len(starts), end, -1, 0, 0, 0, None
        while i < n:
            s, hit = starts[i], hits[i]
            i += 1
            e = find(b"\n", hit)
            pos = e + 1
            raw = block[s:e]
            # _decided(), written out: this loop takes ~100,000 lines of a failing build, and a call a line is ~1 %
            key = raw.translate(RAW_TO_ZERO)
            found = get(key)
            if found is None and by_class is not None:
                found = by_class(raw, key)
            if found is SKIP or found is NOTHING:
                continue
            count = found[7] if found.__class__ is tuple else None  # (known.known_entry)
            if count is not None:
                rule_id, error, waits, test, k0, k1, quoted = count
                ok = True
                if test is not None or quoted:  # the digit strings tested as _known_line tests them
                    text = raw.decode("ascii").replace("`", "'") if quoted else raw.decode("ascii")
                    if test is not None:  # knowndigits.holds_test written out, then `held` where one is held
                        low = text.lower()
                        if test.__class__ is tuple:
                            for t in test:
                                if t in low:
                                    ok = not held(low, found[4])
                                    break
                        elif test(low) is not None:
                            ok = not held(low, found[4])
                    name = text[k0:k1]
                else:
                    name = raw[k0:k1].decode("ascii")
                finding = findings.get((rule_id, name)) if ok else None
                if ok and waits:  # only where the progress line after it ends the waiting finding at once
                    ok = (pos < end and (i >= n or starts[i] != pos) and block[pos] == 91
                          and progress(block, pos, pos + 256) is not None)
                if ok and (len(finding.occurrences) >= max_occurrences if finding is not None
                           else len(findings) >= max_findings):
                    waited = pos if waits else -1  # a waiting line's progress line is passed over
                    taken += 1  # the counts of a finding past the caps (_count_capped)
                    errors += error
                    if finding is None:
                        dropped += 1
                    else:
                        finding.count += 1
                    continue
            line = s, hit, e, raw, key, found
            break
        if line is None and waited == pos:  # the last line taken waited: its progress line is passed over
            pos = find(b"\n", pos) + 1
        self.errors, self.warnings = self.errors + errors, self.warnings + taken - errors
        self.dropped, self.batched = self.dropped + dropped, self.batched + taken
        return i, pos, line

    def _take(self, block: bytes, starts: list[int], i: int, s: int, e: int, hit: int, raw: bytes,
              key: bytes, found: Any, plain: bool, base: int, counted: int, counted_pos: int, end: int
              ) -> tuple[int, int, int]:
        """A candidate line block[s:e] (candidate i - 1) that the run does not count itself, taken as the scan loop took
        it: by its known raw shape (`found`), by its folded shape (a new raw shape: None), else the long way (SLOW:
        known lines off, or a shape always taken so; `key`: the raw shape to learn). Returns (where the scan goes
        on, counted, counted_pos)."""
        pos = e + 1
        if found is not SLOW:  # known, or a new raw shape whose folded shape may be (knownfold.py)
            counted, counted_pos = counted + block.count(b"\n", counted_pos, s), s
            progress_next = pos < end and (i >= len(starts) or starts[i] != pos) and block[pos] == 91
            done = (self._known_line(found, base + counted + 1, raw, block, s, pos, progress_next) if found
                    else self._folded_line(base + counted + 1, raw, key, block, s, pos, progress_next))
            if done >= 0:
                return done, counted, counted_pos
            if found is not None:
                key = b""
        if self._raw_skipped(raw, plain):
            if key:
                self._learn_known(key, raw)
            return pos, counted, counted_pos
        counted, counted_pos = counted + block.count(b"\n", counted_pos, s), s
        self._unknown_line(base + counted + 1, block, raw, key, s, e, hit)
        # a waiting finding whose next line, no candidate, is a progress line that ends it: what the scan loop's
        # next turn does (Classifier._scan), here, so that the run goes on (a failing build's new error lines mostly
        # wait, and each left the run and came back: ~3 us a line)
        if (self._pending is not None and self._want > 0 and pos < end
                and (i >= len(starts) or starts[i] != pos) and self._progress_ends_pending(block, pos)):
            pos = block.find(b"\n", pos) + 1
        return pos, counted, counted_pos

    def _unknown_line(self, number: int, block: bytes, raw: bytes, key: bytes, s: int, e: int, hit: int) -> None:
        """A candidate line that no context wants, of a raw shape not decided before and not decided on its raw bytes:
        normalised and classified; its raw shape learnt (`key`, where to learn: known.py)."""
        if e - s <= MATCH_WINDOW:  # what _line() does with it (no context wants it), a call less
            text = normalize(raw.decode("utf-8", "replace"), UNPREFIXED_FIRST)
            if text:
                self._classify(number, text, block, s)
        else:
            self._line(number, block, s, e, hit, True)
        if key:
            self._learn_known(key, raw)


def _decided(raw: bytes, get: Any, by_class: Any) -> tuple[bytes, Any]:
    """(the raw shape of `raw`, what is known of it: its entry (known.py), one learnt from its head's class
    (knownclass.py), or None where neither is)."""
    key = raw.translate(RAW_TO_ZERO)
    found = get(key)
    if found is None and by_class is not None:
        found = by_class(raw, key)
    return key, found
