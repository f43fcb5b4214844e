"""Anchored alternatives that read a location's path alike: what a match starting at 0 does with PATH.

pathfold's walk follows a match starting inside PATH only up to the location's first digit, so an alternative
`^...` whose matches may start at 0 and read on (`compiler-error`'s `^(?:\\S.*?(?::\\d+...:|...)...)?error...`,
`command-echo`'s `^(?=\\S*[ \\t]+[-/@])...gcc...[ \\t]+-`, `^\\S+::\\S+ PASSED`) was *aware* on every head
(pathcontext.py). For a located line `T = PATH + TAIL + R` and its folded line `F = TOKEN + TAIL + R`
(pathfold.py), such an alternative is tried at 0 only (a line holds no newline), and `alike(items)` proves that it
decides T as it decides F there, a match of T being F's with its start (0) kept and every other position past the
path shifted. sre tries the alternative's threads in a fixed order; the order is cut into parts, each of which
decides T as F (both miss, or their first threads that match are alike), so the first part that matches decides
both texts alike:

- `^`/`\\A` is true at 0; a group that neither captures nor sets flags is its items; `(A|B) R` is the threads of
  `A R`, then those of `B R`; an optional `X? R` (greedy or lazy, not possessive) those of `X R` and of `R`
  (`_parts`, to a bounded number of parts);
- a part that no match from 0 or inside PATH gets through (pathfold's walk from STARTS_TAIL: PATH, the whole
  TAIL up to its closing space; look-arounds and `\\b` passed over, the safe side) misses both texts: *dead*;
- a part `X? .*? BODY` or `X? .* BODY` (`X` one character item taking every PATH character, `.*` unbounded, lazy
  or greedy), BODY reading nothing backwards (no look-behind, see pathfold._reads_back) and unable to start
  inside PATH (pathfold's walk): `X` takes the first character of either path, the repeat then tries BODY at each
  place in a fixed order, in vain inside the path, and from the TAIL on both texts are the same characters (a `\\b`
  at the TAIL sees the extension's last letter in both): *synced*, its first thread that matches the same in both.

Anything else (a capturing group, a look-ahead before the repeat, an item the walk does not know) is not proven.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse
from legacy_gpu_patch.classify.pathfold import (
    _OPEN,
    _PATH,
    STARTS_TAIL,
    _charset,
    _literal,
    _may_start_in_path,
    _one_char,
    _PastPath,
    _reads_back,
    _walk,
)

__all__ = ["alike", "path_decides"]

_MAX_PARTS = 256  # parts followed before giving up (a pattern of many optionals)


class _TooMany(Exception):
    pass


def alike(items: list[Any], icase: bool) -> bool:
    """Whether the alternative `items` (a parse tree's item list, led by `^` or `\\A`) decides every located line
    at 0 as its folded line (module docstring). False when not proven."""
    c = _sre_constants
    if not items or items[0] not in ((c.AT, c.AT_BEGINNING), (c.AT, c.AT_BEGINNING_STRING)):
        return False
    try:
        return all(_dead(part, icase) or _synced(part, icase) for part in _parts(list(items[1:]), [0]))
    except Exception:  # _TooMany, pathfold's _NotProven, a surprise of an internal module: not proven
        return False


def _parts(seq: list[Any], count: list[int]) -> list[list[Any]]:
    """`seq`'s threads as parts in sre's order (module docstring), each an item list whose first item is not split
    further. Raises _TooMany past _MAX_PARTS."""
    c = _sre_constants
    count[0] += 1
    if count[0] > _MAX_PARTS:
        raise _TooMany
    if not seq:
        return [seq]
    (op, av), rest = seq[0], seq[1:]
    if op is c.AT and av in (c.AT_BEGINNING, c.AT_BEGINNING_STRING):
        return _parts(rest, count)  # true at 0, where every part starts
    if op is c.SUBPATTERN and av[0] is None and not av[1] and not av[2]:
        return _parts([*av[3], *rest], count)
    if op is c.BRANCH:
        return [part for alt in av[1] for part in _parts([*alt, *rest], count)]
    if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[0] == 0 and av[1] == 1:
        return [*_parts([*av[2], *rest], count), *_parts(rest, count)]
    return [seq]


def _dead(part: list[Any], icase: bool) -> bool:
    """Whether no match of `part` from 0 gets through PATH and its TAIL (then it matches neither text)."""
    try:
        return not _walk(part, STARTS_TAIL, icase)
    except _PastPath:
        return False


def _synced(part: list[Any], icase: bool) -> bool:
    """Whether `part` is `X? .*? BODY` or `X? .* BODY` (module docstring), BODY unable to start inside PATH."""
    c = _sre_constants
    if not part:
        return True  # nothing to read: both texts match at 0 with nothing
    k = 1 if part[0][0] in (c.IN, c.ANY, c.NOT_LITERAL) and _takes_path(part[0], icase) else 0
    if k >= len(part):
        return False
    op, av = part[k]
    if op not in (c.MAX_REPEAT, c.MIN_REPEAT) or av[0] != 0 or av[1] != c.MAXREPEAT or list(av[2]) != [(c.ANY, None)]:
        return False
    body = part[k + 1:]
    return not _reads_back(body) and not _may_start_in_path(body, icase)


def _takes_path(item: Any, icase: bool) -> bool:
    """Whether a one-character item takes every PATH character."""
    c = _sre_constants
    op, av = item
    if op is c.ANY:
        return True
    if op is c.NOT_LITERAL:
        return not _literal(av, icase) & _PATH
    return _charset(av, icase) >= _PATH


@lru_cache(maxsize=8)
def path_decides(regex: re.Pattern[Any]) -> bool:
    """Whether `regex.match(T)` finds a match or not alike on every located line `T = PATH + TAIL + R` of one PATH,
    whatever its TAIL and R (the raw fast path's regex, Matcher._raw_decided: knownclass.py). False when not proven.

    A match exists where one of its threads matches; `_sequences` writes the pattern out as the threads' item lists
    (alternations and plain groups expanded; a leading `[ \\t]*`-like repeat of characters no PATH starts with takes
    nothing at 0, PATH's first character being a PATH character). Each list is *dead* (pathfold's walk from
    STARTS_TAIL: no match from 0 gets through PATH and the whole TAIL, so it matches no located line) or a run of
    one-character items none of which takes the TAIL's `:`/`(`: such a run of k items matches T only where k <=
    len(PATH) (the item at len(PATH) would have to take the TAIL's first character), and then reads PATH alone.
    Atomic groups and possessive repeats are left as items: only a dead list may hold one (they only take matches
    away), and a back-reference is not followed by the walk (not proven)."""
    c = _sre_constants
    icase = bool(regex.flags & re.IGNORECASE)
    try:
        items = list(_sre_parse.parse(regex.pattern, regex.flags))
        if items and items[0][0] in (c.MAX_REPEAT, c.MIN_REPEAT) and items[0][1][0] == 0:
            body = list(items[0][1][2])
            took = _one_char(body[0], icase) if len(body) == 1 else None
            if took is not None and not took & _PATH:
                items = items[1:]  # it takes nothing of a located line at 0
        return all(_in_path(seq, icase) or _dead(seq, icase) for seq in _sequences(items, [0]))
    except Exception:  # _TooMany, pathfold's _NotProven, a surprise of an internal module: not proven
        return False


def _in_path(seq: list[Any], icase: bool) -> bool:
    """Whether `seq` is a run of one-character items none of which takes a `:` or `(` (path_decides)."""
    for item in seq:
        took = _one_char(item, icase)
        if took is None or took & _OPEN:
            return False
    return True


def _sequences(items: list[Any], count: list[int]) -> list[list[Any]]:
    """The item lists of `items`' threads: each alternation and each group that sets no flags written out (a
    capture changes no thread's reading). Raises _TooMany past _MAX_PARTS lists."""
    c = _sre_constants
    out: list[list[Any]] = [[]]
    for op, av in items:
        if op is c.BRANCH:
            alts = [s for alt in av[1] for s in _sequences(list(alt), count)]
        elif op is c.SUBPATTERN and not av[1] and not av[2]:
            alts = _sequences(list(av[3]), count)
        else:
            alts = [[(op, av)]]
        out = [[*head, *alt] for head in out for alt in alts]
        count[0] += len(out)
        if count[0] > _MAX_PARTS * 16:
            raise _TooMany
    return out
