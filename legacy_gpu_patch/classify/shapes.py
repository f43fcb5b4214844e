"""Message shapes: a failing build's error lines differ mostly in their digits; the rule decision is made once a shape.

A line's *shape* is the line with every ASCII digit 1-9 written as 0 (`x.cpp:12:3: error: 'sym17' ...` and
`x.cpp:4:51: error: 'sym90' ...` share one). Most rules cannot tell two digits apart: no literal digit in their
pattern or prefilter, every character class they hold takes all ten digits or none, no back-reference. Such a rule
(*digit-blind*, see `digit_blind`) matches a line exactly where it matches the line's shape, at the same places.
So per shape, the rule that decides it is found once, with the spans of its match and of its groups; for a line of
that shape, the few rules that can tell digits apart (*digit-aware*) and come before it are tried on the line
itself, and then the line's match is read off the cached spans (a `SpanMatch`: no regex runs; the groups' text is
the line's own). The result is the one the plain path gives, always: the blind rules before the cached one do not
match the shape, so not the line either, and a blind rule's match on the line has the spans of its match on the
shape (tests/unit/classify/test_shapes.py compares both paths on the fixture logs and on generated logs).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Union

from legacy_gpu_patch.classify.casefold import SpanMatch
from legacy_gpu_patch.classify.digitruns import class_takes, digit_blind, digit_contexts, literals_blind

if TYPE_CHECKING:  # pragma: no cover - typing only (match.py imports this module)
    from legacy_gpu_patch.classify.casefold import LowMatch
    from legacy_gpu_patch.classify.match import Hit, Matcher
    from legacy_gpu_patch.classify.rules import Rule

__all__ = ["RuleMatch", "ShapeCache", "SpanMatch", "class_takes", "digit_blind", "digit_contexts", "literals_blind",
           "shape_of"]

RAW_TO_ZERO = _TO_ZERO = bytes.maketrans(b"123456789", b"000000000")  # a shape, in bytes.translate() terms
TEXT_TO_ZERO = str.maketrans("123456789", "000000000")  # the same for a str
# cache entries (~0.5 KiB each); the cache starts again when full. A failing build of PyTorch has tens of thousands
# of error-line shapes (its files times its messages: the bench's error-dense log has 20,300): at 1 << 14 a third of
# them were learnt twice
MAX_SHAPES = 1 << 16
_END = 1 << 30  # "no digit-blind rule matches this shape": after every rule
NOT_FOLDED: Any = object()  # foldshape.PathFold.decide(): no location to fold, the plain path decides
# a rule's match: the regex's own, read off a shape's spans, or a lowered pattern's (casefold.py)
RuleMatch = Union["re.Match[str]", SpanMatch, "LowMatch"]
_Entry = tuple[int, tuple[tuple[int, tuple[str, ...]], ...], "Rule | None", "re.Pattern[str] | None",
               tuple[tuple[int, int], ...], tuple[str, ...]]


def shape_of(text: str) -> bytes:
    """The shape of a text: its UTF-8 bytes, each digit 1-9 written 0 (UTF-8 leaves ASCII bytes to ASCII)."""
    return text.encode("utf-8", "surrogatepass").translate(_TO_ZERO)


def _holds_one(strings: tuple[str, ...], text: str) -> bool:
    for s in strings:  # noqa: SIM110 - a loop, not any(): a generator would cost more than the few `in`s
        if s in text:
            return True
    return False


class ShapeCache:
    """The decision of the digit-blind rules per shape, for one Matcher.

    The Matcher's rules are numbered as it tries them (`units`: its lead steps, then its other rules); `aware` maps
    each digit-aware one, in order, to its prefilter literals (none: always tried). A line holds a literal only
    where its shape holds the literal's shape: per shape, only the aware rules whose literals' shapes it holds are
    kept, the rules worth trying on a line of that shape.

    `contexts` (digit_contexts) maps an aware unit whose digits matter only through literal runs to those runs:
    where neither the learnt line nor its shape holds one, the unit behaves on the shape as on that line, and on
    any ASCII line of the shape that holds none either as on the shape. Such a unit is tried on a line only where
    the line holds one of its runs; as the deciding unit, its spans are read off the cache like a blind one's.
    """

    __slots__ = ("_memo", "aware", "contexts", "entries", "fold", "indexed", "units")

    def __init__(self, aware: dict[int, tuple[str, ...]],
                 contexts: dict[int, tuple[str, ...] | None] | None = None,
                 indexed: frozenset[str] = frozenset()) -> None:
        """`indexed`: strings whose presence in a learnt line the matcher reports (Matcher.held: its index's)."""
        # each aware unit in order: the shapes of its literals (None: it has none, always tried), those of them
        # found through the matcher's index (digit-free: in a line's shape where in the line), the others
        self.aware: list[tuple[int, tuple[str, ...] | None, frozenset[str], tuple[str, ...]]] = []
        for u, lits in sorted(aware.items()):
            found = frozenset(lit for lit in lits if lit in indexed and literals_blind((lit,)))
            shaped = tuple(shape_of(lit).decode() for lit in lits)
            others = tuple(shape for lit, shape in zip(lits, shaped) if lit not in found)
            self.aware.append((u, shaped or None, found, others))
        self.units = frozenset(aware)
        self.indexed = frozenset(lit for _, _, found, _ in self.aware for lit in found)
        self._memo: dict[tuple[int, frozenset[str]], tuple[tuple[int, tuple[str, ...]], ...]] = {}
        self.contexts = contexts or {}
        # shape -> (deciding unit, [(aware unit worth a try, runs without which it is not)], the unit's rule, regex
        # and match spans where they are cached, the runs without which those spans hold (() for a blind unit))
        self.entries: dict[bytes, _Entry] = {}
        self.fold: Any = None  # foldshape.PathFold: a new located shape decided through its folded shape

    def match(self, matcher: Matcher, text: str) -> Hit | None:
        """matcher.plain_match(text)[1:], by the shape's cached decision."""
        shape = shape_of(text)
        entry = self.entries.get(shape)
        if entry is None:
            return self._learn(matcher, text, shape)
        first, worth, rule, regex, spans, needs = entry
        low = ""
        plain = True
        if worth or needs:
            low = text.lower()
            plain = text.isascii()
        for unit, runs in worth:
            if runs and plain and not _holds_one(runs, low):
                continue  # it missed the learnt line and misses this one alike (see the class docstring)
            hit = matcher.unit_match(unit, text, low)
            if hit is not None:
                return hit
        if rule is not None and regex is not None and (
                not needs or (plain and not _holds_one(needs, low))):
            return rule, SpanMatch(regex, text, spans)  # its match on the shape is its match here
        if first == _END:
            return None
        hit = matcher.unit_match(first, text, low or text.lower())
        if hit is None:  # an aware rule that decided another line of this shape misses this one: the plain path
            found = matcher.plain_match(text)
            return None if found is None else (found[1], found[2])
        return hit

    def _candidates(self, first: int, held: frozenset[str]) -> tuple[tuple[int, tuple[str, ...]], ...]:
        """The aware units before `first` that may match a line whose index strings are `held`, each with the
        strings one of which its shape must hold besides (() when none is needed); one answer per set of them."""
        key = (first, held & self.indexed)
        found = self._memo.get(key)
        if found is None:
            out: list[tuple[int, tuple[str, ...]]] = []
            for unit, lits, found_lits, other_lits in self.aware:
                if unit >= first:
                    break
                if lits is None or not found_lits.isdisjoint(held):
                    out.append((unit, ()))
                elif other_lits:
                    out.append((unit, other_lits))
            if len(self._memo) >= MAX_SHAPES:
                self._memo.clear()
            found = self._memo[key] = tuple(out)
        return found

    def _learn(self, matcher: Matcher, text: str, shape: bytes) -> Hit | None:
        """A shape not seen yet: the plain path (or, for a located line, its folded shape: foldshape.py) decides
        the line; the shape's entry is kept for the next ones. While learning rests (adaptive.py), the plain path
        decides it and nothing is kept: the same decision."""
        if not matcher.learning.on:
            plain = matcher.plain_match(text)
            return None if plain is None else (plain[1], plain[2])
        found = NOT_FOLDED if self.fold is None else self.fold.decide(matcher, text)
        if found is NOT_FOLDED:
            found = matcher.plain_match(text)
            held = matcher.held  # the index's strings this line holds, where plain_match searched them
        else:
            held = self.fold.held
        self.store(text, shape, found, held)
        return None if found is None else (found[1], found[2])

    def store(self, text: str, shape: bytes, found: tuple[int, Rule, RuleMatch] | None,
              held: frozenset[str] | None) -> None:
        """Keep a new shape's entry: `found`, plain_match(text); `held`, the index's strings text holds, or None."""
        # the rule that decides the line: the blind rules before it miss the line, so its shape too; if it is an
        # aware one, lines of this shape try it on themselves (and take the plain path where it misses them)
        first = _END if found is None else found[0]
        low_shape = shape.decode("utf-8", "surrogatepass").lower()
        low = text.lower() if text.isascii() else None
        contexts = self.contexts

        def runs_of(unit: int) -> tuple[str, ...] | None:
            """The unit's runs, if neither this line nor its shape holds one (then it acts alike on both)."""
            runs = contexts.get(unit)
            if runs is None or low is None:
                return None
            for r in runs:
                if r in low or r in low_shape:
                    return None
            return runs

        if held is not None:
            candidates = self._candidates(first, held)
        else:
            candidates = tuple((unit, lits or ()) for unit, lits, _, _ in self.aware if unit < first)
        worth: list[tuple[int, tuple[str, ...]]] = []
        for unit, tests in candidates:
            if tests and not _holds_one(tests, low_shape):
                continue  # its shape holds none of its literals' shapes: the unit cannot match a line of it
            worth.append((unit, runs_of(unit) or ()))
        if len(self.entries) >= MAX_SHAPES:
            self.entries.clear()
        needs: tuple[str, ...] | None = runs_of(first) if first in self.units else ()
        if found is not None and needs is not None:
            m = found[2]
            spans = m.regs  # re.Match's or LowMatch's: every group's span
            self.entries[shape] = (first, tuple(worth), found[1], m.re, spans, needs)
        else:
            self.entries[shape] = (first, tuple(worth), None, None, (), ())
