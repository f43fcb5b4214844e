"""The path-folding shape's proof: which rules cannot see the path of a line's leading compiler location.

Most error lines of a failing build start with a compiler location, `PATH:LINE:COL: ` (gcc, clang, nvcc),
`PATH:LINE: ` or `PATH(LINE): ` / `PATH(LINE,COL): ` (MSVC, nvcc's EDG front end). The message shapes of
shapes.py hold that path: the bench's error-dense log has 20,303 shapes, 155 with the path folded too. This module
says what is folded and proves, per rule, that folding cannot change its decision (not yet used by the matcher:
docs/errors.md, "Error-dense work: the path-folding shape", says what remains).

**What is folded** (`location_path`): a line that starts with PATH immediately followed by a TAIL, where
PATH is one or more of `[A-Za-z0-9_./+-]` ending in a word character (no space, colon, backslash or parenthesis,
so no Windows drive) and TAIL is `:D+: `, `:D+:D+: `, `(D+): ` or `(D+,D+): ` (D an ASCII digit). The folded line
is `FOLD_TOKEN + line[len(PATH):]`: the TAIL and everything after it are kept, so a line's folded form, digits
written 0, is its folded shape; a line with no such location is not folded.

**What is proven** (`path_blind`): for every PATH, a rule's regex matches `PATH + TAIL + R` exactly where it
matches `FOLD_TOKEN + TAIL + R`, every span (the match's and each group's) shifted by `len(PATH) -
len(FOLD_TOKEN)`. It holds when (1) no match can start inside PATH, for any PATH (`_heads`: the character sets
every match must start with, tried against each way a match starting in PATH would have to read PATH's end, the
TAIL's `:`/`(` and its first digit), and (2) nothing reads backwards into PATH from the TAIL or after it: no
look-behind, no `^`/`\\A`. A `\\b` at the TAIL's first character sees PATH's last one, a word character in both
texts. sre then tries every start inside PATH in vain in both texts, and every later start reads the same
characters. Anything the parser gives that is not known here, a case-insensitive non-ASCII literal (the Kelvin
sign matches `k`), too many alternatives: not proven, the rule is *path-aware*.

A string (a prefilter literal, a necessary string of the literal index) is present in both texts alike when it
cannot start inside PATH (`string_path_blind`, the same test on its characters): `: error` cannot, `error` and
`.pyx:` can (`/src/error/a.cpp:1:2: `, `a.pyx:3:4: `).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from typing import Any

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse

__all__ = ["FOLD_TOKEN", "fold", "location_path", "path_blind", "string_path_blind"]

FOLD_TOKEN = "P"  # a PATH itself (one word character): the proof holds for it as for any PATH
_LOCATION = re.compile(r"[A-Za-z0-9_./+-]*[A-Za-z0-9_](?=(?::[0-9]+){1,2}: |\([0-9]+(?:,[0-9]+)?\): )", re.ASCII)

_WORD = frozenset(string.ascii_letters + string.digits + "_")
_PATH = _WORD | frozenset("./+-")  # PATH's characters
_DIGIT = frozenset(string.digits)
_OPEN = frozenset(":(")  # the TAIL's first character
_ALPHABET = _PATH | _OPEN  # the characters the proof asks about; a character set is kept as those it takes
_MAX_HEADS = 512  # alternatives followed; more: not proven
_MAX_LEN = 24  # characters of a head followed (a longer one is cut: the rest is taken as "any character")


def location_path(text: str) -> int:
    """The length of the PATH of the location `text` starts with (module docstring), 0 when it has none."""
    m = _LOCATION.match(text)
    return m.end() if m else 0


def fold(text: str) -> tuple[str, int]:
    """(the folded text, len(PATH) - len(FOLD_TOKEN): what a span after the PATH moves by); (text, 0) unfolded."""
    cut = location_path(text)
    if not cut:
        return text, 0
    return FOLD_TOKEN + text[cut:], cut - len(FOLD_TOKEN)


class _NotProven(Exception):
    pass


def _category(code: Any) -> frozenset[str]:
    c = _sre_constants
    table = {
        c.CATEGORY_DIGIT: _DIGIT, c.CATEGORY_NOT_DIGIT: _ALPHABET - _DIGIT,
        c.CATEGORY_SPACE: frozenset(), c.CATEGORY_NOT_SPACE: _ALPHABET,
        c.CATEGORY_WORD: _WORD, c.CATEGORY_NOT_WORD: _ALPHABET - _WORD,
        c.CATEGORY_LINEBREAK: frozenset(), c.CATEGORY_NOT_LINEBREAK: _ALPHABET,
    }
    if code not in table:
        raise _NotProven(code)
    return table[code]


def _variants(ch: str, icase: bool) -> set[str]:
    return {ch, ch.lower(), ch.upper()} if icase else {ch}


def _literal(av: int, icase: bool) -> frozenset[str]:
    if icase and av > 127:
        raise _NotProven("case-insensitive non-ASCII literal")
    return frozenset(ch for ch in _ALPHABET if chr(av) in _variants(ch, icase))


def _charset(items: Any, icase: bool) -> frozenset[str]:
    """The characters of _ALPHABET that a character class takes."""
    c = _sre_constants
    negate = False
    taken: set[str] = set()
    for op, av in items:
        if op is c.NEGATE:
            negate = True
        elif op is c.LITERAL:
            taken |= _literal(av, icase)
        elif op is c.RANGE:
            if icase and av[1] > 127:
                raise _NotProven("case-insensitive non-ASCII range")
            taken |= {ch for ch in _ALPHABET if any(av[0] <= ord(v) <= av[1] for v in _variants(ch, icase))}
        elif op is c.CATEGORY:
            taken |= _category(av)
        else:
            raise _NotProven(op)
    return _ALPHABET - taken if negate else frozenset(taken)


_Head = tuple[tuple[frozenset[str], ...], bool]  # (character sets a match reads first, complete: nothing after)


def _then(firsts: list[_Head], rest: Any, icase: bool) -> list[_Head]:
    """Each head of `firsts` followed, where it is complete, by the heads of the items `rest`."""
    out: list[_Head] = []
    later: list[_Head] | None = None
    for seq, complete in firsts:
        if not complete or len(seq) >= _MAX_LEN:
            out.append((seq[:_MAX_LEN], False))
            continue
        if later is None:
            later = _heads(rest, icase)
        out += [((*seq, *s)[:_MAX_LEN], done and len(seq) + len(s) <= _MAX_LEN) for s, done in later]
    if len(out) > _MAX_HEADS:
        raise _NotProven("too many alternatives")
    return out


def _heads(items: Any, icase: bool) -> list[_Head]:
    """The ways a match of the item list can start: per alternative, the character sets of its first characters
    (a cut head: the characters after it are not known, any is possible). Zero-width items are passed over (a
    match meets them and more conditions; fewer conditions is the safe side)."""
    c = _sre_constants
    items = list(items)
    for n, (op, av) in enumerate(items):
        rest = items[n + 1:]
        if op is c.LITERAL:
            one = _literal(av, icase)
        elif op is c.NOT_LITERAL:
            one = _ALPHABET - _literal(av, icase)
        elif op is c.ANY:
            one = _ALPHABET
        elif op is c.IN:
            one = _charset(av, icase)
        elif op in (c.AT, c.ASSERT, c.ASSERT_NOT):
            continue
        elif op is c.SUBPATTERN:  # (group, flags added, flags removed, items): `(?i:...)` changes the case
            inner = (icase or bool(av[1] & re.IGNORECASE)) and not av[2] & re.IGNORECASE
            return _then(_heads(av[3], inner), rest, icase)
        elif op is getattr(c, "ATOMIC_GROUP", None):
            return _then(_heads(av, icase), rest, icase)
        elif op is c.BRANCH:
            return _then([h for alt in av[1] for h in _heads(alt, icase)], rest, icase)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            low, high, body = av
            firsts = _heads(body, icase)
            for _ in range(min(low, 4) - 1):
                firsts = _then(firsts, body, icase)
            if not (low == high and low <= 4):
                firsts = [(s, False) for s, _ in firsts]  # more repeats may follow: cut
            if low == 0:
                firsts = [((), True)] if high == 0 else [*firsts, ((), True)]
            return _then(firsts, rest, icase)
        else:
            return [((), False)]  # a back-reference, a conditional, ...: what it reads is not followed
        return _then([((one,), True)], rest, icase)
    return [((), True)]


def _may_start_in_path(seq: tuple[frozenset[str], ...]) -> bool:
    """Whether text read by `seq` may start inside a PATH: for each length L of the PATH's part read (its last
    character a word one), the sets must take a PATH character, then a word character, then `:` or `(`, then a
    digit; a head that ends first (or is cut) matches inside PATH, or is not known past its end."""
    for length in range(1, len(seq) + 2):
        want = [_PATH] * (length - 1) + [_WORD, _OPEN, _DIGIT]
        if all(s & want[j] for j, s in enumerate(seq[: len(want)])):
            return True
    return False


def _reads_back(items: Any) -> bool:
    """Whether the parse tree holds a look-behind, a `^`/`\\A` or an item not known here."""
    c = _sre_constants
    for op, av in items:
        if op is c.AT:
            if av in (c.AT_BEGINNING, c.AT_BEGINNING_STRING, getattr(c, "AT_BEGINNING_LINE", None)):
                return True
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if av[0] < 0 or _reads_back(av[1]):
                return True
        elif op is c.SUBPATTERN:
            if _reads_back(av[3]):
                return True
        elif op is c.BRANCH:
            if any(_reads_back(b) for b in av[1]):
                return True
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            if _reads_back(av[2]):
                return True
        elif op is getattr(c, "ATOMIC_GROUP", None):
            if _reads_back(av):
                return True
        elif op not in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN, c.GROUPREF):
            return True
    return False


def path_blind(regex: re.Pattern[str]) -> bool:
    """Whether `regex` matches every `PATH + TAIL + R` as `FOLD_TOKEN + TAIL + R`, spans shifted by the length
    difference (module docstring). False when unsure."""
    try:
        tree = _sre_parse.parse(regex.pattern, regex.flags)
        if _reads_back(tree):
            return False
        icase = bool(regex.flags & re.IGNORECASE)
        return not any(_may_start_in_path(seq) for seq, _ in _heads(tree, icase))
    except Exception:  # _NotProven, or a surprise of an internal module: not known to be blind
        return False


def string_path_blind(strings: Iterable[str], icase: bool = True) -> bool:
    """Whether none of `strings` can occur starting inside a PATH (then each is in a folded text where it is in
    the text: it lies in TAIL + R, which both hold)."""
    try:
        return not any(_may_start_in_path(tuple(_literal(ord(ch), icase) for ch in s)) for s in strings)
    except _NotProven:
        return False
