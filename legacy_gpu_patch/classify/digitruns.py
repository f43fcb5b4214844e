"""Which digits a pattern tells apart: digit-blind patterns (shapes.py's cache reads a line's decision off its
shape) and the literal runs through which a digit-aware one tells them apart (its *digit contexts*)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse

__all__ = ["class_takes", "digit_blind", "digit_contexts", "literals_blind"]

_DIGITS = range(ord("0"), ord("9") + 1)


def _category_has_digits(code: Any) -> bool:
    c = _sre_constants
    if code in (c.CATEGORY_DIGIT, c.CATEGORY_NOT_SPACE, c.CATEGORY_WORD, c.CATEGORY_NOT_LINEBREAK):
        return True
    if code in (c.CATEGORY_NOT_DIGIT, c.CATEGORY_SPACE, c.CATEGORY_NOT_WORD, c.CATEGORY_LINEBREAK):
        return False
    raise ValueError(code)  # not known: the caller says "not blind"


def class_takes(items: Any, ch: int) -> bool:
    """Whether a parsed character class (`IN`'s items) takes the character `ch`; ValueError where not known."""
    c = _sre_constants
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


def _class_blind(items: Any) -> bool:
    """Whether a character class takes all ten digits or none of them."""
    return len({class_takes(items, ch) for ch in _DIGITS}) == 1


def digit_blind(regex: re.Pattern[Any]) -> bool:
    """Whether `regex` treats the ten ASCII digits alike: then it matches a text exactly where it matches the text
    with its digits changed, at the same places. False when unsure."""
    runs: list[str] = []
    try:
        return _contexts(_sre_parse.parse(regex.pattern, regex.flags), runs) and not runs
    except Exception:  # an internal module: any surprise means "not known to be blind"
        return False


def _contexts(items: Any, out: list[str], lead: list[int] | None = None) -> bool:
    """Collect (lowercased) each run of literals that holds a digit; False where digits matter otherwise
    (back-references, conditionals, a class or a NOT_LITERAL that tells digits apart, anything not known).

    `lead`: the run of literals that `items` (an alternative of a branch, a group's body) follows right after, in
    every match. The run that starts `items` is then collected joined after it (`error c2` + `665` of `error
    C(?:2672|2665|...)`, not `665` alone, which `launch4665` holds): a match can reach that run only right after
    `lead`, so only where the text holds the two together; without that the run fails there, in a line and in its
    shape alike, as a run the text does not hold."""
    c = _sre_constants
    run: list[int] = []
    glue = lead or []

    def close() -> None:
        nonlocal glue
        if any(ch in _DIGITS for ch in run):
            out.append("".join(map(chr, glue + run)).lower())
        run.clear()
        glue = []

    for op, av in items:
        if op is c.LITERAL:
            run.append(av)
            continue
        before = glue + run  # the run right before this item (after `lead` where it is the first)
        close()
        if op is c.NOT_LITERAL:
            if av in _DIGITS:
                return False
        elif op is c.IN:
            if not _class_blind(av):
                return False
        elif op in (c.ANY, c.AT):
            continue
        elif op is c.BRANCH:
            if not all(_contexts(b, out, before) for b in av[1]):
                return False
        elif op is c.SUBPATTERN:
            if not _contexts(av[3], out, before):
                return False
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            body = [a for o, a in av[2]] if all(o is c.LITERAL for o, _ in av[2]) else None
            if before and body and any(ch in _DIGITS for ch in body):
                # literal digits repeated right after a run of literals (`csrmm2?`): the repeat can take one only
                # where the text holds the run and them together; without that it takes none, in the line and in
                # its shape alike, so that joined string is the context, not the digit alone (held by most lines)
                out.append("".join(map(chr, before + body)).lower())
            elif not _contexts(av[2], out):
                return False
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if not _contexts(av[1], out):
                return False
        elif op is getattr(c, "ATOMIC_GROUP", None):
            if not _contexts(av, out):
                return False
        else:
            return False
    close()
    return True


def digit_contexts(regex: re.Pattern[Any], literals: Iterable[str] = ()) -> tuple[str, ...] | None:
    """For a pattern whose only digit-aware parts are literal digits: the runs of literals holding them, and the
    prefilter `literals` that hold a digit, lowercased; None when digits matter otherwise (a class with some digits,
    a back-reference, ...). A line (ASCII) and its shape, neither of which holds any of these strings, are matched
    alike: a run of literals matches where the text holds it, and every other part treats digits alike."""
    out: list[str] = []
    try:
        if not _contexts(_sre_parse.parse(regex.pattern, regex.flags), out):
            return None
    except Exception:  # an internal module: any surprise means "not known"
        return None
    out += [lit.lower() for lit in literals if not literals_blind((lit,))]
    return tuple(dict.fromkeys(out))


def literals_blind(literals: Iterable[str]) -> bool:
    """Whether prefilter literals hold no digit (then one occurs in a text exactly where it occurs in its shape)."""
    return not any(ch in "0123456789" for lit in literals for ch in lit)
