"""Digit strings that a known line may hold where a digit follows them: `csrmm2` of `cusparseScsrmm21355`.

A known plain shape's entry (known.py) holds for the lines of the shape that hold none of a few digit strings: the
digit contexts of its aware units (shapes.digit_contexts). One kind of context is a literal run joined with a
literal digit repeated after it: `csrmm2` of `cusparse[SDCZ]csrmm2?\\b`. A line holding it took the long way every
time (2,822 lines of the bench's dense log, `cusparseScsrmm2…` with more digits after it, which no rule reads as
`cusparseScsrmm2`). Such a line is now decided by the entry where every place it holds the string is followed by a
digit and the string is *harmless there* in every unit whose context it is (`harmless_contexts`):

- every place the unit's pattern makes it is a run R then one optional literal digit d (`R d?` or `R d??`, not
  possessive, in no atomic group), and no run of literals or prefilter literal of the unit is that string;
- whatever follows `d?` in the pattern (out of its groups and alternations up to the pattern's end, `_blocked`)
  must first consume a character that is not a digit, or assert `\\b`, before it can end the match.

Why the line T then matches the unit exactly as its shape S does (at the same spans), so as the entry's learnt
line: the only difference digit contexts make is at their literal digits (shapes.digit_contexts: the rest treats
digits alike, and T holds none of the unit's other contexts). Where R matches in T and T has d next, S has 0 there:
in S, `d?` takes nothing; in T it may take d, and the match goes on right after d, before a digit (the place
follows the string). There the pattern's next step consumes a non-digit (fails on the digit) or asserts `\\b`
(fails between two word characters), so that way fails, and the backtracking takes the other one, `d?` taking
nothing, as in S (a lazy `d??` tries that first). No other way differs. A possessive repeat or atomic group could
keep the failing way and give up: those are not harmless.

tests/unit/classify/test_known_digits.py compares the known lines holding such strings with the long way.
"""

from __future__ import annotations

from typing import Any

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse
from legacy_gpu_patch.classify.rules import _any_of, holding_no_other
from legacy_gpu_patch.classify.shapes import MAX_SHAPES, class_takes

__all__ = ["digit_test", "digits_follow", "harmless_contexts", "harmless_strings", "holds_test"]

_DIGITS = range(ord("0"), ord("9") + 1)
FEW = 6  # digit strings tested by `in`s; more are searched as one trie
_TESTS: dict[tuple[str, ...], Any] = {}  # digit_test() per tuple of digit strings (a pure function of it)
_Frame = tuple[Any, int] | None  # where the pattern goes on after a group ends: (items, index); None: not known


def _takes_digit(items: Any) -> bool:
    """Whether a character class takes some ASCII digit (True where not known)."""
    try:
        return any(class_takes(items, ch) for ch in _DIGITS)
    except ValueError:
        return True


def _blocked(items: Any, i: int, rest: list[_Frame]) -> bool:
    """Whether every way on from items[i:] (then each frame of `rest`, innermost last) first consumes a character
    that is not a digit or asserts `\\b`: so fails right after a digit, before a digit. False where not known
    (the pattern's end, a nullable repeat's body, look-arounds, references, any other item)."""
    c = _sre_constants
    while i == len(items):
        if not rest or rest[-1] is None:
            return False  # the match may end here (or what comes next is not known)
        (items, i), rest = rest[-1], rest[:-1]
    op, av = items[i]
    if op is c.LITERAL:
        return av not in _DIGITS  # IGNORECASE: a letter's other case is a letter
    if op is c.IN:
        return not _takes_digit(av)
    if op is c.AT:
        return av is c.AT_BOUNDARY  # between a digit and a digit: no boundary
    if op is c.SUBPATTERN:
        return _blocked(av[3], 0, [*rest, (items, i + 1)])
    if op is c.BRANCH:
        return all(_blocked(b, 0, [*rest, (items, i + 1)]) for b in av[1])
    if op in (c.MAX_REPEAT, c.MIN_REPEAT):
        low, high, body = av
        if high != 0 and not _blocked(body, 0, [*rest, None]):
            return False
        return low > 0 or _blocked(items, i + 1, rest)
    return False


def _walk(items: Any, rest: list[_Frame], joined: dict[str, bool], plain: set[str], lead: list[int] | None = None
          ) -> None:
    """shapes._contexts' walk: each joined run (`R d?`) into `joined` (harmless or not), each run of literals
    holding a digit into `plain`, alone and (where `items` follows the run `lead`, as _contexts joins them) after
    `lead`; raises where it meets what _contexts does not know."""
    c = _sre_constants
    run: list[int] = []
    glue = lead or []

    def close() -> None:
        nonlocal glue
        if any(ch in _DIGITS for ch in run):
            plain.add("".join(map(chr, run)).lower())
            plain.add("".join(map(chr, glue + run)).lower())
        run.clear()
        glue = []

    for i, (op, av) in enumerate(items):
        if op is c.LITERAL:
            run.append(av)
            continue
        before = glue + run  # the run right before this item (after `lead` where it is the first)
        close()
        on = [*rest, (items, i + 1)]
        if op is c.BRANCH:
            for b in av[1]:
                _walk(b, on, joined, plain, before)
        elif op is c.SUBPATTERN:
            _walk(av[3], on, joined, plain, before)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            body = [a for o, a in av[2]] if all(o is c.LITERAL for o, _ in av[2]) else None
            if before and body and any(ch in _DIGITS for ch in body):
                s = "".join(map(chr, before + body)).lower()
                ok = (op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[0] == 0 and av[1] == 1 and len(body) == 1
                      and None not in rest and _blocked(items, i + 1, rest))
                joined[s] = joined.get(s, True) and ok
            else:
                _walk(av[2], [*rest, None], joined, plain)  # after the body: it again, or what follows
        elif op in (c.ASSERT, c.ASSERT_NOT):
            _walk(av[1], [*rest, None], joined, plain)
        elif op is getattr(c, "ATOMIC_GROUP", None):
            _walk(av, [*rest, None], joined, plain)
        elif op not in (c.NOT_LITERAL, c.IN, c.ANY, c.AT):
            raise ValueError(op)
    close()


def harmless_contexts(pattern: str, flags: int, prefilter: tuple[str, ...]) -> frozenset[str]:
    """The digit contexts of a unit (its pattern, flags and prefilter literals) that a line may hold where a digit
    follows each place of them (module docstring); none where anything is not known."""
    joined: dict[str, bool] = {}
    plain = {lit.lower() for lit in prefilter if any(ch in "0123456789" for ch in lit)}
    try:
        _walk(list(_sre_parse.parse(pattern, flags)), [], joined, plain)
    except Exception:  # an internal module: any surprise means "none known"
        return frozenset()
    return frozenset(s for s, ok in joined.items() if ok and s not in plain)


def digits_follow(low: str, s: str) -> bool:
    """Whether a digit follows every place where `low` holds `s` (it holds it)."""
    p = low.find(s)
    while p >= 0:
        q = p + len(s)
        if q >= len(low) or low[q] not in "0123456789":
            return False
        p = low.find(s, p + 1)
    return True


def digit_test(tests: tuple[str, ...]) -> Any:
    """How a line (lowered) is searched for an entry's digit strings `tests`: a line it finds nothing in holds none
    of them; where it finds something, the run tests the strings themselves (KnownLines._digits_held). Those of them
    holding no other (`c2672` is held where `672` is); where there are several and a piece holding a digit is in
    each (`c2` of no-matching-function's `error c2`, `c2672`, ...: _common_piece), that piece alone, one `in` that
    few lines pass (a digit-free piece, cuSPARSE's `sr`, is in most lines of the entry); else the strings as a tuple
    for a loop of `in`s, or, for more than FEW of them, one search of their trie (rules._any_of: ~0.8 us against
    ~1.1-1.7 us for cuSPARSE's 13 strings). Per tuple, once; kept in the entry (known.py), so that a line's test
    hashes no tuple."""
    found: Any = _TESTS.get(tests)
    if found is None:
        if len(_TESTS) >= MAX_SHAPES:
            _TESTS.clear()
        least = tuple(holding_no_other(tests))
        piece = _common_piece(least) if len(least) > 1 else None
        found = (piece,) if piece is not None else least if len(least) <= FEW else _any_of(set(least))
        _TESTS[tests] = found
    return found


def _common_piece(strings: tuple[str, ...]) -> str | None:
    """The longest string of two characters or more, holding a digit, that each of `strings` holds, else None."""
    short = min(strings, key=len)
    for size in range(len(short), 1, -1):
        for i in range(len(short) - size + 1):
            piece = short[i : i + size]
            if any(ch in "0123456789" for ch in piece) and all(piece in s for s in strings):
                return piece
    return None


def holds_test(low: str, test: Any) -> bool:
    """Whether digit_test()'s search `test` finds something in `low` (the count run writes this out); where it does
    not, `low` holds none of the entry's strings."""
    if test.__class__ is tuple:
        for t in test:  # noqa: SIM110 - a loop, not any(genexpr): a generator costs more than the few `in`s
            if t in low:
                return True
        return False
    return test(low) is not None


def harmless_strings(rules: Any, lead: tuple[Any, ...], aware_runs: dict[int, tuple[str, ...] | None]
                     ) -> frozenset[str]:
    """The digit contexts of a matcher's units (`lead`: prepare.Prepared.lead; `aware_runs`: per aware unit, its
    contexts) that are harmless where a digit follows them in every unit whose context they are."""
    from legacy_gpu_patch.classify.prepare import plain_units

    units = plain_units(rules, lead)
    seen: set[str] = set()
    harmful: set[str] = set()
    for unit, runs in aware_runs.items():
        if runs is None:
            continue
        pattern, flags, prefilter = units[unit]
        harmless = harmless_contexts(pattern, flags, prefilter)
        seen.update(runs)
        harmful.update(s for s in runs if s not in harmless)
    return frozenset(seen - harmful)
