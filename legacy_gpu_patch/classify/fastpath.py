"""Fast paths of the line matcher, each equal to the plain path (tests/unit/classify/test_classifier_fast_paths.py).

- Lead exceptions tested on the raw bytes of a plain line (ASCII, no colours, no \\r; CI prefixes stripped as
  normalize() strips them): the compiler command echoes, include chains, progress, CMake status and test lines that
  make up most trigger-holding lines of a build log, decided undecoded (see Matcher._raw_skipped).
- Anchored lead patterns run with match(), not search(); runs of lead exceptions without prefilter as one regex
  (the lead plan: prepare.py).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from legacy_gpu_patch.classify.normalize import RAW_PREFIX_RE


def _regex_internals() -> tuple[Any, Any]:
    """The regex parser and its constants, to tell anchored patterns and first bytes (re._parser from Python 3.11,
    sre_parse before: an internal module, so every use of it falls back to "not known" on any surprise)."""
    try:
        return importlib.import_module("re._constants"), importlib.import_module("re._parser")
    except ImportError:  # pragma: no cover - Python < 3.11
        return importlib.import_module("sre_constants"), importlib.import_module("sre_parse")


_sre_constants, _sre_parse = _regex_internals()


# A raw match means normalize() leaves the head as it is and the same exception reads it (on ASCII text a bytes
# pattern and its str twin agree, case-insensitive ones included, as long as the text holds none of \x1c-\x1f,
# which only str patterns count as whitespace).
MATCH_WINDOW = 2048  # bytes of a long line looked at: its head, or a window around its first trigger

# normalize() strips a glued progress message only from a text starting with one of these (see normalize)
_GLUE_FIRST = frozenset(b"BLGCS")


def _first_bytes(regex: re.Pattern[bytes]) -> frozenset[int] | None:
    """The bytes a match of `regex` can start with, or None when that is not plain to see."""
    if regex.flags & re.IGNORECASE:
        return None
    c = _sre_constants

    def first(items: Any) -> set[int] | None:
        for op, av in items:
            if op is c.AT:
                continue  # zero-width
            if op is c.LITERAL:
                return {av}
            if op is c.IN:
                out: set[int] = set()
                for iop, iav in av:
                    if iop is c.LITERAL:
                        out.add(iav)
                    elif iop is c.RANGE:
                        out.update(range(iav[0], iav[1] + 1))
                    elif iop is c.CATEGORY and iav is c.CATEGORY_DIGIT:
                        out.update(b"0123456789")
                    else:
                        return None
                return out
            if op is c.SUBPATTERN:
                return None if av[1] & re.IGNORECASE else first(av[3])
            if op is c.BRANCH:
                union: set[int] = set()
                for branch in av[1]:
                    f = first(branch)
                    if f is None:
                        return None
                    union |= f
                return union
            if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[0] >= 1:
                return first(av[2])
            return None
        return None

    try:
        found = first(_sre_parse.parse(regex.pattern, regex.flags))
    except Exception:  # an internal module: any surprise means "not known"
        return None
    return frozenset(found) if found is not None else None


_RAW_PREFIX_FIRST = _first_bytes(RAW_PREFIX_RE)
# printable ASCII characters no CI prefix starts with (normalize's `unprefixed`): none where the prefixes' first
# bytes are unknown; never a space or tab (strip_prefixes looks past them) nor \x1c-\x1f (str patterns' whitespace)
UNPREFIXED_FIRST: frozenset[str] = frozenset() if _RAW_PREFIX_FIRST is None else frozenset(
    chr(b) for b in range(0x21, 0x7F) if b not in _RAW_PREFIX_FIRST
)
# first bytes of a line _strip_raw_prefixes may change (all of them where the prefixes' first bytes are unknown)
_MAY_BE_PREFIXED = frozenset(
    bytes((b,)) for b in (range(256) if _RAW_PREFIX_FIRST is None else (*_RAW_PREFIX_FIRST, 0x20, 0x09))
)


def _strip_raw_prefixes(raw: bytes) -> bytes:
    """strip_prefixes() for an ASCII line without colours or \\r, in bytes (its indentation and end kept)."""
    text = raw
    for _ in range(8):
        body = text.lstrip(b" \t")
        if not body or (_RAW_PREFIX_FIRST is not None and body[0] not in _RAW_PREFIX_FIRST):
            break
        m = RAW_PREFIX_RE.match(body)
        if not m or not m.end():
            break
        text = body[m.end() :]
    return text


def _anchored(regex: re.Pattern[Any]) -> bool:
    """Whether every match of `regex` must start at the beginning of the text (each branch starts with `^`).

    Such a pattern is run with match(), not search(): search() tries it at every position of the line (sre only
    stops early for a pattern whose very first item is `^`, not for `(^a)|(^b)`), match() once. False when unsure.
    """
    if regex.flags & re.MULTILINE:
        return False
    try:
        parsed = _sre_parse.parse(regex.pattern, regex.flags)
    except Exception:  # an internal module: any surprise means "not known to be anchored"
        return False
    c = _sre_constants
    begin = (c.AT_BEGINNING, c.AT_BEGINNING_STRING)

    def starts(items: Any) -> bool:
        if not len(items):
            return False
        op, av = items[0]
        if op is c.AT:
            return av in begin
        if op is c.SUBPATTERN:
            add_flags = av[1]
            return not add_flags & re.MULTILINE and starts(av[3])
        if op is c.BRANCH:
            return all(starts(b) for b in av[1])
        if op is getattr(c, "ATOMIC_GROUP", None):
            return starts(av)
        return False

    return starts(parsed)


MIN_FACTOR = 3  # shorter necessary strings select too many lines to be worth a test
MAX_FACTOR_SETS = 3  # sets tested per rule (each costs a few `in`s)


def _selectivity(found: set[str]) -> tuple[float, int, int]:
    """How few lines a set of necessary strings lets through, as a sort key: names (camelCase, snake_case, digits:
    the identifiers a rule is about) before words, then fewer strings, then longer ones."""
    named = sum(1 for s in found if "_" in s or any(ch.isupper() for ch in s[1:]) or any(ch.isdigit() for ch in s))
    return (named / len(found), -len(found), min(len(s) for s in found))


def necessary_factors(regex: re.Pattern[str]) -> tuple[frozenset[str], ...] | None:
    """Sets of lowercased strings such that every match of `regex` holds one string of each set; None if none known.

    Read from the parsed pattern: a run of literals, an alternation (the union of each alternative's best set), a
    repeat of at least one, the inside of a lookaround; all of a sequence's sets are needed. A line (ASCII,
    lowercased) missing every string of one set cannot match, and the regex is not run: most rules after the lead
    ones look for named identifiers, which a line of another error does not hold.
    """
    c = _sre_constants
    zero_width = {c.AT, c.ASSERT_NOT}

    def factors(items: Any) -> list[set[str]]:
        conj: list[set[str]] = []
        run: list[str] = []
        for op, av in items:
            if op is c.LITERAL:
                run.append(chr(av))
                continue
            if op in zero_width:
                continue  # zero-width: the literals around it are still adjacent
            if op is c.BRANCH:
                # sre moves a common prefix out of an alternation ("cuda(?:ThreadExit|_Foo)"): put it back
                head = [(c.LITERAL, ord(ch)) for ch in run]
                parts = [factors(head + list(b)) for b in av[1]]
                if all(parts):
                    conj.append(set().union(*(max(p, key=_selectivity) for p in parts)))
                elif len(run) >= MIN_FACTOR:
                    conj.append({"".join(run)})
                run = []
                continue
            if len(run) >= MIN_FACTOR:
                conj.append({"".join(run)})
            run = []
            if op is c.SUBPATTERN:
                conj += factors(av[3])
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[0] >= 1:
                conj += factors(av[2])
            elif op is c.ASSERT:
                conj += factors(av[1])
        if len(run) >= MIN_FACTOR:
            conj.append({"".join(run)})
        return conj

    try:
        found = factors(_sre_parse.parse(regex.pattern, regex.flags))
    except Exception:  # an internal module: any surprise means "not known"
        return None
    if not found:
        return None
    best = sorted(found, key=_selectivity, reverse=True)[:MAX_FACTOR_SETS]
    return tuple(frozenset(s.lower() for s in found_set) for found_set in best)
