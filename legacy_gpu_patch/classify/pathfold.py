"""The path-folding shape's proof: which rules cannot see the path of a line's leading compiler location.

Most error lines of a failing build start with a compiler location, `PATH:LINE:COL: ` (gcc, clang, nvcc),
`PATH:LINE: ` or `PATH(LINE): ` / `PATH(LINE,COL): ` (MSVC, nvcc's EDG front end). The message shapes of
shapes.py hold that path: the bench's error-dense log has 20,303 shapes, 155 with the path folded too. This module
says what is folded and proves, per rule, that folding cannot change its decision (foldshape.py decides a new
located shape with it).

**What is folded** (`location_path`): a line that starts with PATH immediately followed by a TAIL, where
PATH is `[A-Za-z0-9_./+-]*` ending in `.` and one of EXTENSIONS (no space, colon, backslash or parenthesis, so no
Windows drive; the extension keeps an identifier out of PATH's end, which an MSVC `FOO_BAR(12): ` would give) and
TAIL is `:D+: `, `:D+:D+: `, `(D+): ` or `(D+,D+): ` (D an ASCII digit). The folded line
is `FOLD_TOKEN + line[len(PATH):]`: the TAIL and everything after it are kept, so a line's folded form, digits
written 0, is its folded shape; a line with no such location is not folded.

**What is proven** (`path_blind`): for every PATH, a rule's regex matches `PATH + TAIL + R` exactly where it matches
`FOLD_TOKEN + TAIL + R`, every span (the match's and each group's) shifted by `len(PATH) - len(FOLD_TOKEN)`. It
holds when (1) no match can start inside PATH, for any PATH (`_walk`: the parse tree read against the language such
a match would have to read, PATH characters, a `.` and an extension, the TAIL's `:`/`(` and its first digit, by a
small automaton; a repeat to its fixed point), and (2) nothing reads backwards into PATH from the TAIL or after it:
no look-behind (a `^`/`\\A` is false at every start past PATH in both texts). A `\\b` at the TAIL's first character
sees the extension's last letter in both texts. sre then tries every start inside PATH in vain in both texts, and
every later start reads the same characters. Anything the parser gives that is not known here, a back-reference or
conditional, a case-insensitive non-ASCII range, a repeat of more than 64 at least: not proven, the rule is
*path-aware* (a case-insensitive non-ASCII literal takes the ASCII letters re says it does: the Kelvin sign takes
`k`).

A string (a prefilter literal, a necessary string of the literal index) is present in both texts alike when it
cannot start inside PATH (`string_path_blind`, the same test on its characters): `: error` cannot, `error` and
`.pyx:` can (`/src/error/a.cpp:1:2: `, `a.pyx:3:4: `).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse
from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["FOLD_TOKEN", "fold", "location_path", "path_blind", "string_path_blind"]

# the extensions of the sources and headers a C, C++, CUDA or Cython build reports errors in (lower case)
EXTENSIONS = ("c", "cc", "cpp", "cxx", "cu", "cuh", "h", "hh", "hpp", "hxx", "inl", "inc", "ipp", "tcc", "pyx",
              "pxd", "pxi", "py")
FOLD_TOKEN = "p.c"  # a PATH itself: the proof holds for it as for any PATH
_LOCATION = compile_re(r"[A-Za-z0-9_./+-]*\.(?:" + "|".join(sorted(EXTENSIONS, key=len, reverse=True))
                       + r")(?=(?::[0-9]+){1,2}: |\([0-9]+(?:,[0-9]+)?\): )", re.ASCII)

_WORD = frozenset(string.ascii_letters + string.digits + "_")
_PATH = _WORD | frozenset("./+-")  # PATH's characters
_DIGIT = frozenset(string.digits)
_OPEN = frozenset(":(")  # the TAIL's first character
# the characters the proof asks about (PATH's, the TAIL's; a space ends the TAIL); a set is kept as those it takes
_ALPHABET = _PATH | _OPEN | frozenset("), ")


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
        c.CATEGORY_SPACE: frozenset(" "), c.CATEGORY_NOT_SPACE: _ALPHABET - {" "},
        c.CATEGORY_WORD: _WORD, c.CATEGORY_NOT_WORD: _ALPHABET - _WORD,
        c.CATEGORY_LINEBREAK: frozenset(), c.CATEGORY_NOT_LINEBREAK: _ALPHABET,
    }
    if code not in table:
        raise _NotProven(code)
    return table[code]


def _variants(ch: str, icase: bool) -> set[str]:
    return {ch, ch.lower(), ch.upper()} if icase else {ch}


@lru_cache(maxsize=1024)
def _literal(av: int, icase: bool) -> frozenset[str]:
    """The characters of _ALPHABET a literal takes; case-insensitively as re itself says (the Kelvin sign takes
    `k`, U+017F takes `s`)."""
    if icase and av > 127:
        return frozenset(ch for ch in _ALPHABET if re.fullmatch(re.escape(chr(av)), ch, re.IGNORECASE))
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


# Where a match that starts inside PATH can be after reading some characters: in the PATH before its extension
# (`_GEN`: any PATH character may come, a `.` may start the extension), at character j of an extension, right
# after the extension (the TAIL's `:`/`(` comes), after that (`_OPENED`: its first digit comes, and past it the
# match is not followed: taken as "may match"). A match starts in the first part or inside the extension.
_GEN: tuple[Any, ...] = ("gen",)
_OPENED: tuple[Any, ...] = ("opened",)
_STARTS = frozenset({_GEN} | {("ext", ext, j) for ext in EXTENSIONS for j in range(len(ext))})
_MAX_COUNT = 64  # a repeat's minimum count followed; more: not proven
# The same from a start at 0 or inside PATH, followed on through the whole TAIL (`STARTS_TAIL`, pathstart.py): after
# the extension, `(":", "c1")` and so on; its closing space (None) leads into R, which is not followed.
_GEN_TAIL: tuple[Any, ...] = ("gen+",)
STARTS_TAIL = frozenset({_GEN_TAIL} | {("ext+", ext, j) for ext in EXTENSIONS for j in range(len(ext))})
_TAIL: dict[str, tuple[tuple[frozenset[str], str | None], ...]] = {
    "c1": ((_DIGIT, "c1d"),), "c1d": ((_DIGIT, "c1d"), (frozenset(":"), "c2")),
    "c2": ((_DIGIT, "c2d"), (frozenset(" "), None)), "c2d": ((_DIGIT, "c2d"), (frozenset(":"), "c3")),
    "c3": ((frozenset(" "), None),), "p1": ((_DIGIT, "p1d"),),
    "p1d": ((_DIGIT, "p1d"), (frozenset(","), "p1c"), (frozenset(")"), "p2")), "p1c": ((_DIGIT, "p1cd"),),
    "p1cd": ((_DIGIT, "p1cd"), (frozenset(")"), "p2")), "p2": ((frozenset(":"), "p3"),),
    "p3": ((frozenset(" "), None),),
}


class _PastPath(Exception):
    """A match starting inside PATH can read PATH's end and the TAIL's first digit: not proven."""


def _read(states: frozenset[Any], chars: frozenset[str]) -> frozenset[Any]:
    """The states after reading one character out of `chars` from `states`."""
    out: set[Any] = set()
    for state in states:
        if state[0] in ("gen+", "ext+", "tail"):
            out |= _read_tail(state, chars)
        elif state == _OPENED:
            if chars & _DIGIT:
                raise _PastPath
        elif state == _GEN:
            if chars & _PATH:
                out.add(_GEN)
            if "." in chars:
                out.update(("ext", ext, 0) for ext in EXTENSIONS)
        elif state[2] < len(state[1]):
            if state[1][state[2]] in chars:
                out.add(("ext", state[1], state[2] + 1))
        elif chars & _OPEN:
            out.add(_OPENED)
    return frozenset(out)


def _read_tail(state: tuple[Any, ...], chars: frozenset[str]) -> set[Any]:
    """_read for a state of a walk from STARTS_TAIL."""
    if state[0] == "tail":
        out: set[Any] = set()
        for take, nxt in _TAIL[state[1]]:
            if chars & take:
                if nxt is None:
                    raise _PastPath  # the TAIL's space: R comes
                out.add(("tail", nxt))
        return out
    if state == _GEN_TAIL:
        return ({_GEN_TAIL} if chars & _PATH else set()) | (
            {("ext+", ext, 0) for ext in EXTENSIONS} if "." in chars else set())
    ext, j = state[1], state[2]
    if j < len(ext):
        return {("ext+", ext, j + 1)} if ext[j] in chars else set()
    return {("tail", name) for ch, name in ((":", "c1"), ("(", "p1")) if ch in chars}


def _one_char(item: Any, icase: bool) -> frozenset[str] | None:
    """The characters of the alphabet a one-character item takes; None for any other item."""
    c = _sre_constants
    op, av = item
    if op is c.LITERAL:
        return _literal(av, icase)
    if op is c.NOT_LITERAL:
        return _ALPHABET - _literal(av, icase)
    if op is c.IN:
        return _charset(av, icase)
    if op is c.ANY:
        return _ALPHABET
    return None


def _walk(items: Any, states: frozenset[Any], icase: bool) -> frozenset[Any]:
    """The states a match starting inside PATH can be in after the items (from `states`); empty: it cannot get
    this far. Zero-width items are passed over (a match meets them and more conditions: the safe side)."""
    c = _sre_constants
    for op, av in items:
        if not states:
            return states
        took = _one_char((op, av), icase)
        if took is not None:
            states = _read(states, took)
        elif op in (c.AT, c.ASSERT, c.ASSERT_NOT):
            continue
        elif op is c.SUBPATTERN:  # (group, flags added, flags removed, items): `(?i:...)` changes the case
            inner = (icase or bool(av[1] & re.IGNORECASE)) and not av[2] & re.IGNORECASE
            states = _walk(av[3], states, inner)
        elif op is getattr(c, "ATOMIC_GROUP", None):
            states = _walk(av, states, icase)
        elif op is c.BRANCH:
            states = frozenset().union(*(_walk(alt, states, icase) for alt in av[1]))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)):
            states = _repeat(av, states, icase)
        else:
            raise _NotProven(op)  # a back-reference, a conditional: what it reads is not followed
    return states


def _repeat(av: Any, states: frozenset[Any], icase: bool) -> frozenset[Any]:
    """A repeat `{low,high}` of a body: the states after low copies, then every state more copies reach (a
    fixed point: the states are few, so it comes within a few rounds; a possessive or lazy repeat reads no
    more than a greedy one may)."""
    low, high, body = av
    if low > _MAX_COUNT:
        raise _NotProven("repeat count")
    for _ in range(low):
        states = _walk(body, states, icase)
    reached = states
    more = high - low
    while more > 0 and states:
        states = _walk(body, states, icase) - reached
        reached |= states
        more -= 1
    return reached


def _may_start_in_path(items: Any, icase: bool) -> bool:
    """Whether a match of the item list can start inside some PATH: it reads PATH characters, and may end there, or
    reads PATH's extension, the TAIL's `:`/`(` and its first digit (past that, not followed)."""
    try:
        return bool(_walk(items, _STARTS, icase))
    except _PastPath:
        return True


def _reads_back(items: Any) -> bool:
    """Whether the parse tree holds a look-behind or an item not known here."""
    c = _sre_constants
    for op, av in items:
        if op is c.AT:
            continue  # `^`, `\A`: false at any start past the path in both texts (no newline there); see path_blind
        if op in (c.ASSERT, c.ASSERT_NOT):
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
    difference (module docstring). False when unsure.

    A `^` or `\\A` is true only at 0 (a line holds no newline; a MULTILINE `^` past 0 would need one before it),
    inside the path: an alternative holding one can match only from 0, which the head test rules out, as it
    rules out every start inside the path, so it matches neither text (`^error: command` is blind; the
    `^(?=.*Y).*?` branches are not, their `.*?` may start anywhere)."""
    try:
        tree = _sre_parse.parse(regex.pattern, regex.flags)
        if _reads_back(tree):
            return False
        return not _may_start_in_path(tree, bool(regex.flags & re.IGNORECASE))
    except Exception:  # _NotProven, or a surprise of an internal module: not known to be blind
        return False


def string_path_blind(strings: Iterable[str], icase: bool = True) -> bool:
    """Whether none of `strings` can occur starting inside a PATH (then each is in a folded text where it is in
    the text: it lies in TAIL + R, which both hold)."""
    try:
        return not any(_may_start_in_path([(_sre_constants.LITERAL, ord(ch)) for ch in s], icase) for s in strings)
    except _NotProven:
        return False
