"""Message shapes: a failing build's error lines differ mostly in their digits; the rule decision is made once a shape.

A line's *shape* is the line with every ASCII digit 1-9 written as 0 (`x.cpp:12:3: error: 'sym17' ...` and
`x.cpp:4:51: error: 'sym90' ...` share one). Most rules cannot tell two digits apart: no literal digit in their
pattern or prefilter, every character class they hold takes all ten digits or none, no back-reference. Such a rule
(*digit-blind*, see `digit_blind`) matches a line exactly where it matches the line's shape, at the same places.
So per shape, the first digit-blind rule that matches is computed once and cached; for a line, the few rules that
can tell digits apart (*digit-aware*) and come before it are tried on the line itself, and then that rule's regex
is run on the line for its real match (captures, positions). The result is the one the plain path gives, always:
the rules before the cached one that are blind do not match the shape, so not the line either
(tests/unit/classify/test_shapes.py compares both paths on the fixture logs and on generated logs).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse

if TYPE_CHECKING:  # pragma: no cover - typing only (match.py imports this module)
    from legacy_gpu_patch.classify.match import Hit, Matcher

__all__ = ["ShapeCache", "digit_blind", "literals_blind"]

_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
MAX_SHAPES = 1 << 14  # cache entries; the cache starts again when full (a failing build has a few thousand shapes)
_END = 1 << 30  # "no digit-blind rule matches this shape": after every rule
_DIGITS = range(ord("0"), ord("9") + 1)


def _category_has_digits(code: Any) -> bool:
    c = _sre_constants
    if code in (c.CATEGORY_DIGIT, c.CATEGORY_NOT_SPACE, c.CATEGORY_WORD, c.CATEGORY_NOT_LINEBREAK):
        return True
    if code in (c.CATEGORY_NOT_DIGIT, c.CATEGORY_SPACE, c.CATEGORY_NOT_WORD, c.CATEGORY_LINEBREAK):
        return False
    raise ValueError(code)  # not known: the caller says "not blind"


def _class_blind(items: Any) -> bool:
    """Whether a character class takes all ten digits or none of them."""
    c = _sre_constants

    def takes(ch: int) -> bool:
        hit, negate = False, False
        for op, av in items:
            if op is c.NEGATE:
                negate = True
            elif op is c.LITERAL:
                hit = hit or av == ch
            elif op is c.RANGE:
                hit = hit or av[0] <= ch <= av[1]
            elif op is c.CATEGORY:
                hit = hit or _category_has_digits(av)
            else:
                raise ValueError(op)
        return hit != negate

    return len({takes(ch) for ch in _DIGITS}) == 1


def _blind(items: Any) -> bool:
    c = _sre_constants
    for op, av in items:
        if op in (c.LITERAL, c.NOT_LITERAL):
            if av in _DIGITS:
                return False
        elif op is c.IN:
            if not _class_blind(av):
                return False
        elif op in (c.ANY, c.AT):
            continue
        elif op is c.BRANCH:
            if not all(_blind(b) for b in av[1]):
                return False
        elif op is c.SUBPATTERN:
            if not _blind(av[3]):
                return False
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            if not _blind(av[2]):
                return False
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if not _blind(av[1]):
                return False
        elif op is getattr(c, "ATOMIC_GROUP", None):
            if not _blind(av):
                return False
        else:
            return False  # back-references, conditionals, anything else: digits may matter
    return True


def digit_blind(regex: re.Pattern[str]) -> bool:
    """Whether `regex` treats the ten ASCII digits alike: then it matches a text exactly where it matches the text
    with its digits changed, at the same places. False when unsure."""
    try:
        return _blind(_sre_parse.parse(regex.pattern, regex.flags))
    except Exception:  # an internal module: any surprise means "not known to be blind"
        return False


def literals_blind(literals: Iterable[str]) -> bool:
    """Whether prefilter literals hold no digit (then one occurs in a text exactly where it occurs in its shape)."""
    return not any(ch in "0123456789" for lit in literals for ch in lit)


def shape_of(text: str) -> bytes:
    """The shape of a text: its UTF-8 bytes, each digit 1-9 written 0 (UTF-8 leaves ASCII bytes to ASCII)."""
    return text.encode("utf-8", "surrogatepass").translate(_TO_ZERO)


class ShapeCache:
    """The decision of the digit-blind rules per shape, for one Matcher.

    The Matcher's rules are numbered as it tries them (`units`: its lead steps, then its other rules); `aware` maps
    each digit-aware one, in order, to its prefilter literals (none: always tried). A line holds a literal only
    where its shape holds the literal's shape: per shape, only the aware rules whose literals' shapes it holds are
    kept, the rules worth trying on a line of that shape.
    """

    __slots__ = ("aware", "entries")

    def __init__(self, aware: dict[int, tuple[str, ...]]) -> None:
        self.aware = {u: tuple(shape_of(lit).decode() for lit in lits) for u, lits in sorted(aware.items())}
        self.entries: dict[bytes, tuple[int, tuple[int, ...]]] = {}

    def match(self, matcher: Matcher, text: str) -> Hit | None:
        """matcher.plain_match(text)[1:], by the shape's cached decision."""
        shape = shape_of(text)
        entry = self.entries.get(shape)
        if entry is None:
            return self._learn(matcher, text, shape)
        first, worth = entry
        low = text.lower() if worth or first != _END else ""
        for unit in worth:
            hit = matcher.unit_match(unit, text, low)
            if hit is not None:
                return hit
        if first == _END:
            return None
        hit = matcher.unit_match(first, text, low)
        if hit is None:  # an aware rule that decided another line of this shape misses this one: the plain path
            found = matcher.plain_match(text)
            return None if found is None else (found[1], found[2])
        return hit

    def _learn(self, matcher: Matcher, text: str, shape: bytes) -> Hit | None:
        """A shape not seen yet: the plain path decides the line; the shape's entry is kept for the next ones."""
        found = matcher.plain_match(text)
        # the rule that decides the line: the blind rules before it miss the line, so its shape too; if it is an
        # aware one, lines of this shape try it on themselves (and take the plain path where it misses them)
        first = _END if found is None else found[0]
        low_shape = shape.decode("utf-8", "surrogatepass").lower()
        worth = []
        for unit, lits in self.aware.items():
            if unit >= first:
                break
            if not lits:
                worth.append(unit)
                continue
            for lit in lits:
                if lit in low_shape:
                    worth.append(unit)
                    break
        if len(self.entries) >= MAX_SHAPES:
            self.entries.clear()
        self.entries[shape] = (first, tuple(worth))
        return None if found is None else (found[1], found[2])
