"""Known lines: a candidate line whose raw shape was decided before is taken without decoding, normalising or
matching it again.

An error-dense log's error lines are mostly of shapes already seen (113,000 lines, 20,300 shapes on the bench's
52 MB log), and each cost ~12 us of Python on the long way: the raw fast path's test, the decode, normalize(), the
shape's own bytes and look-up in the shape cache, the match read off its spans, a waiting finding (an object, and
the next line's test that ends it), the count. Most of that is the same for every line of a *raw shape* (the raw
bytes, every ASCII digit 1-9 written 0, as Matcher._raw_skipped keys its decisions). So, per raw shape, what the
long way did is kept once (`KnownLines._learn_known`), and a line of that shape costs one `translate`, one dict
look-up and, where it is a finding, the count (`KnownLines._known_line`).

What is kept, and why it is exact:

- SKIP: the raw fast path decides the shape (Matcher._raw_skipped keys the same shape; it caches only where the
  rules allow it, `Prepared.raw_blind`).
- a *plain* shape (`plain_shape`): normalize() leaves every line of it as it is (ASCII, a first character no CI
  prefix starts with, no colour, `\\r`, `%]`, glued object name or ASCII localized word, nothing to strip), or
  changes only each backquote to a quote (a linker's `` `sym' ``: *quoted*); none of what it tests is a digit, so a
  line has it exactly where its shape has it. The text of such a line is its decoded bytes (backquotes changed),
  and the text's shape (shapes.shape_of) is the raw shape (backquotes changed).
- for a plain shape whose shape-cache entry decides every line of the shape alike once the line holds none of a
  few digit strings (shapes.ShapeCache.match tries an aware unit only on a line that holds one of its runs, and
  reads the entry's spans off a line that holds none of its `needs`): those strings, and NOTHING where the
  decision is no rule or an exception, else the rule, regex, spans, whether the finding waits for the next line
  and the span of its key. A line holding one of the strings (but one that a digit follows wherever the line
  holds it and that is harmless there: knowndigits.py, `csrmm2` of `cusparseScsrmm21355`), a block rule, a long line
  (read on a window), an aware unit without runs and every other shape take the long way (SLOW).

A waiting finding (a generic reading or a line a CI may have wrapped) whose next line is a progress line holding no
trigger, with nothing else open, is recorded at once and that line passed over: what the next loop turn would do
(LineReader._progress_ends_pending), without the waiting object. tests/unit/classify/test_known_lines.py compares
findings, counts and contexts with the long way.
"""

from __future__ import annotations

from typing import Any

from legacy_gpu_patch.classify.casefold import SpanMatch
from legacy_gpu_patch.classify.collect import WRAP_MIN, _Pending
from legacy_gpu_patch.classify.fastpath import MATCH_WINDOW, UNPREFIXED_FIRST
from legacy_gpu_patch.classify.knowndigits import digit_test, digits_follow, harmless_strings
from legacy_gpu_patch.classify.linereader import _PROGRESS_RAW, LineReader
from legacy_gpu_patch.classify.shapes import _END, MAX_SHAPES
from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["NOTHING", "PLAIN", "QUOTED", "SKIP", "SLOW", "KnownLines", "known_entry", "plain_shape", "rewritten"]

SKIP = "skip"  # decided on the raw bytes (a command echo, include chain or progress line)
NOTHING = "nothing"  # no finding: no rule matches, or an exception does
SLOW = "slow"  # the long way, every time

_UNPREFIXED = frozenset(c.encode() for c in UNPREFIXED_FIRST)
_SPACE = frozenset(b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")  # what str.strip() takes of ASCII
# what makes normalize() rewrite more of a line than its backquotes: six `in`s on the line decoded (fastsearch,
# ~0.4 us a line in all), not one regex alternation, which sre tries at each e and r of the line (~2 us), nor `in`
# on bytes (each pays for a TypeError: the needle is first tried as an int)
_REWRITTEN = ("\x1b", "\r", "%]", "ehler", "rreur", "rrore")
_GLUED = compile_re(rb"\.o/|\.obj|\.o\\")  # an object name a progress message glued in front may end in
PLAIN, QUOTED = 1, 2  # plain_shape(): normalize() leaves the line as it is; it changes each backquote to a quote


def rewritten(text: str) -> bool:
    """Whether `text` holds one of _REWRITTEN's strings (six `in`s written out: no generator a line)."""
    esc, cr, progress, de, fr, it = _REWRITTEN
    return esc in text or cr in text or progress in text or de in text or fr in text or it in text


def plain_shape(raw: bytes) -> int:
    """PLAIN where normalize() leaves every line of raw's shape as it is, QUOTED where it changes only each backquote
    to a quote (a linker's `sym'), else 0 (module docstring; no digit is tested)."""
    if not raw or not raw.isascii() or raw[:1] not in _UNPREFIXED or raw[-1] in _SPACE:
        return 0
    text = raw.decode("ascii")
    if rewritten(text):
        return 0
    if text[0] in "BLGCS" and _GLUED.search(raw):
        return 0
    return QUOTED if "`" in text else PLAIN


_TESTS: dict[tuple[Any, Any], tuple[str, ...] | None] = {}  # _strings() per (aware units, needs)


def _strings(worth: Any, needs: Any) -> tuple[str, ...] | None:
    """The strings of an entry's aware units and needs; None where a unit is always tried (it has no runs)."""
    found = _TESTS.get((worth, needs), ())
    if found == ():
        tests: list[str] = list(needs)
        for _, runs in worth:
            if not runs:
                found = None
                break
            tests += runs
        else:
            found = tuple(dict.fromkeys(tests))
        if len(_TESTS) >= MAX_SHAPES:
            _TESTS.clear()
        _TESTS[(worth, needs)] = found
    return found


def _decision(entry: Any, length: int, quoted: bool) -> Any:
    """What a shape-cache entry decides for every line of a plain shape (`length` bytes long) that holds none of the
    strings returned with it: NOTHING, SLOW or (rule or None, regex, spans, waits, strings, key span, quoted).

    ShapeCache.match tries an aware unit on a line only where the line holds one of its runs (a unit without runs is
    always tried: SLOW), and reads the entry's spans off where the line holds none of its `needs`; a line that holds
    one is sent the long way. (Keeping only the strings whose shapes the shape holds would keep nearly all: they are
    digit strings, and the shapes of error lines hold 0s.)"""
    first, worth, rule, regex, spans, needs = entry
    kept = _strings(worth, needs) if worth or needs else ()
    if kept is None:
        return SLOW
    if rule is None or regex is None or rule.exception:
        if rule is None and first != _END:
            return SLOW  # an aware unit decided the learnt line: not every line of the shape alike
        return known_entry(None, None, (), False, kept, None, quoted) if kept else NOTHING
    if rule.block is not None:
        return SLOW
    return known_entry(rule, regex, spans, rule.generic or length >= WRAP_MIN, kept, _key_span(rule, regex, spans),
                       quoted)


def known_entry(rule: Any, regex: Any, spans: Any, waits: bool, tests: tuple[str, ...] | None, key_span: Any,
                quoted: bool) -> tuple[Any, ...]:
    """A known entry: (rule or None, regex, spans, waits, strings, key span, quoted, count), `count` what the run
    needs to count a line of it (knownbatch.py) where it names a rule and its key's span, else None: (the rule's id,
    whether it is an error, waits, the strings' search (knowndigits.digit_test; None: no strings), the key's span,
    quoted), read off the rest once here, not on each line."""
    count = None
    if rule is not None and key_span is not None:
        count = (rule.id, rule.severity == "error", waits, digit_test(tests) if tests else None, key_span[0],
                 key_span[1], quoted)
    return rule, regex, spans, waits, tests, key_span, quoted, count


def _key_span(rule: Any, regex: Any, spans: tuple[tuple[int, int], ...]) -> tuple[int, int] | None:
    """The span of the finding's key in every line of the shape (Collector._record: the first key group that took
    some text), or None (the key is then read off the line's location)."""
    for g in rule.key_groups:
        start, end = spans[g if isinstance(g, int) else regex.groupindex[g]]
        if start >= 0 and end > start:
            return start, end
    return None


class KnownLines(LineReader):
    """The per-raw-shape decisions of a Classifier (which calls _learn_known and _known_line from its scan)."""

    _known: dict[bytes, Any] | None  # raw shape -> SKIP, NOTHING, SLOW or an entry (_decision)
    _harmless: frozenset[str] | None = None  # _harmless_strings()

    def _learn_known(self, key: bytes, raw: bytes, plain: int = 0) -> None:
        """Keep what the long way decided for `raw` (just taken), by its raw shape `key`, where it holds for all of
        them; nothing where the shape cache has not decided the shape (it starts after a few lines). `plain`:
        plain_shape(raw), where the caller has it (0: worked out here)."""
        known = self._known
        raw_shapes = self._raw_shapes
        if known is None or raw_shapes is None:
            return
        skipped = raw_shapes.get(key)
        if skipped is None:
            return  # not the shape _raw_skipped just decided (its table started again): nothing known
        if skipped:
            found: Any = SKIP
        elif len(raw) > MATCH_WINDOW or not (plain := plain or plain_shape(raw)):
            found = SLOW
        else:
            shapes = self._shapes
            shape = key.replace(b"`", b"'") if plain == QUOTED else key  # the shape of the normalized text
            entry = shapes.entries.get(shape) if shapes is not None else None
            if entry is None:
                return
            found = _decision(entry, len(raw), plain == QUOTED)
        if len(known) >= MAX_SHAPES:
            known.clear()
        known[key] = found

    def _harmless_strings(self) -> frozenset[str]:
        """knowndigits.harmless_strings of this matcher's rules (worked out when a known line first holds one; for
        the shipped rules, kept in the rule cache: reading the patterns costs ~0.01 s a process)."""
        found = self._harmless
        if found is None:
            from pathlib import Path

            from legacy_gpu_patch.classify.prepare import _code, prepared
            from legacy_gpu_patch.classify.rulecache import cached_for

            here = Path(__file__).resolve().parent
            found = self._harmless = cached_for(
                self.rules, "harmless", [*_code(), here / "knowndigits.py"],
                lambda: harmless_strings(self.rules, prepared(self.rules).lead, self._aware_runs))
        return found

    def _digits_held(self, low: str, tests: tuple[str, ...]) -> bool:
        """Whether `low` (a line lowered) holds one of an entry's digit strings `tests` where it is not harmless: a
        string of knowndigits.harmless_strings is harmless where a digit follows every place the line holds it."""
        for t in tests:  # noqa: SIM110 - a loop, not any(genexpr): a generator costs more than the few `in`s
            if t in low and not (t in self._harmless_strings() and digits_follow(low, t)):
                return True
        return False

    def _count_capped(self, rule: Any, finding: Any) -> None:
        """A finding past the caps: counted, not kept (what Collector._record does once the caps are reached)."""
        if rule.severity == "error":
            self.errors += 1
        else:
            self.warnings += 1
        if finding is None:
            self.dropped += 1
        else:
            finding.count += 1

    def _known_line(self, found: tuple[Any, ...], lineno: int, raw: bytes, block: bytes, s: int, nxt: int,
                    progress_next: bool) -> int:
        """Take a line of a known plain shape (block[s:nxt - 1] = `raw`) as Collector._classify would; returns where
        the scan goes on: `nxt`, or past the next line where it is a progress line that ends the waiting finding
        (`progress_next`: it holds no trigger, is whole in the chunk and starts with `[`); -1, with nothing done,
        where the line holds one of the entry's digit strings (then the long way decides it)."""
        rule, regex, spans, waits, tests, key_span, quoted, _ = found
        text = raw.decode("ascii")
        if quoted:
            text = text.replace("`", "'")
        if tests and self._digits_held(text.lower(), tests):
            return -1
        if rule is None:
            return nxt
        if waits:
            if self._pending is not None:
                self._finish_pending(None)
            if not (progress_next and not self._after_open and self._block is None
                    and _PROGRESS_RAW.match(block, nxt, nxt + 256)):
                self._pending = _Pending(rule, lineno, text, self._before(block, s, self.context_before),
                                         SpanMatch(regex, text, spans))
                self._want = max(self._want, 1)
                return nxt
            # the progress line ends the waiting finding, recorded as it is, and is done with
            self._want = max(self._want, 1) - 1
            nxt = block.find(b"\n", nxt) + 1
        if key_span is not None and not self.on_finding:
            # Collector._record where it keeps nothing (the caps reached): the counts alone
            finding = self._findings.get((rule.id, text[key_span[0] : key_span[1]]))
            if (len(self._findings) >= self.max_findings if finding is None
                    else len(finding.occurrences) >= self.max_occurrences):
                self._count_capped(rule, finding)
                return nxt
        self._record(rule, SpanMatch(regex, text, spans), lineno, text, self._before(block, s, self.context_before))
        return nxt
