"""Path contexts: the rules that read a location's path only through look-aheads at the line's start.

The identifier rules hold a branch `^(?=.*Y)(?=.*Z).*?BODY` (the localized reading: `Y` is the marker at the end of
a translated line, `Z` is `\\berror\\b`). pathfold.path_blind rejects it: its `.*?` starts at 0, inside the path.
Yet it reads the path only twice: (1) a look-ahead `(?=.*Y)` / `(?!.*Y)` at 0 is true where `Y` matches anywhere in
the line, so it reads the path only through a `Y` match starting there; (2) `.*?` then takes the first place where
BODY and what follows match, which cannot be in the path where BODY cannot start there (pathfold's proof). So the
branch decides a located line as its folded form where no `Y` match can start in either path: where `Y` cannot
start in a path at all (the end-of-line marker), or where a `Y` match starting in a path must end before the
location's first digit (pathfold's walk says so) and hold a run of literals of `Y` (its *context*, `error`) that
neither text's path and the location's first character hold. Its match then starts at 0 in both texts (not
shifted) and every other span is shifted.

An alternative whose matches may lie in a path but must end before the location's first digit (pathfold's walk)
reads it only through what it matches there: it holds one of the alternative's required strings (`identifier` of
`\\bidentifier[ \\t]*KEY`), its contexts too. `path_contexts(regex)` says this of a whole pattern: each top-level
alternative either cannot start in a path (pathfold), or is such a branch, or such an alternative. At 0 the
alternatives before the branch miss in both texts, so the branch decides there; at every other place in the path all
alternatives miss; from the location on, the texts are alike.

Such an alternative need not end before the digit (`_prefix_inside`): its leading items that the walk follows
without reaching the location's digit are matched, from a start in a path, within the path and its `:`/`(`, so one
of their required strings is there (`CMAKE_CUDA_COMPILER` of `CMAKE_CUDA_COMPILER:?\\s*\\S*...`, `cusparse` of
`^(?!...)\\W*cusparse\\w+\\b.*...`). A top-level group whose body is one branch, naming or scoping IGNORECASE only,
is read as its alternatives (`_split`: a merged lead step, a rule written `(?P<key>A|B|...)`). An alternative
`^...` that decides a located line at 0 as its folded line (pathstart.py: `compiler-error`'s optional location
prefix, the command echoes of the lead step) has no context.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse
from legacy_gpu_patch.classify.pathfold import _STARTS, FOLD_TOKEN, _may_start_in_path, _PastPath, _reads_back, _walk
from legacy_gpu_patch.classify.pathstart import alike

__all__ = ["PathRead", "path_contexts", "start_contexts"]


class PathRead(NamedTuple):
    """How a pattern reads a located line: `contexts`, lowercased strings that the path and the location's first
    character must not hold; `pinned`, whether a match may start at 0 (then a start of 0 is not shifted)."""

    contexts: tuple[str, ...]
    pinned: bool


def _lazy_any(item: Any) -> bool:
    c = _sre_constants
    op, av = item
    return op is c.MIN_REPEAT and av[0] == 0 and av[1] == c.MAXREPEAT and list(av[2]) == [(c.ANY, None)]


def _greedy_any(item: Any) -> bool:
    c = _sre_constants
    op, av = item
    return op is c.MAX_REPEAT and av[0] == 0 and av[1] == c.MAXREPEAT and list(av[2]) == [(c.ANY, None)]


def _required(items: list[Any]) -> tuple[str, ...] | None:
    """Strings (ASCII, lowercased) one of which every match of `items` holds within its span: a run of top-level
    literals, or one string of each alternative of a branch, or of a group; the candidate whose shortest string is
    longest. None when there is none."""
    c = _sre_constants
    candidates: list[tuple[str, ...]] = []
    run = ""
    for op, av in [*items, (None, None)]:
        if op is c.LITERAL and av < 128:
            run += chr(av)
            continue
        if run:
            candidates.append((run.lower(),))
            run = ""
        if op is c.BRANCH:
            each = [_required(list(alt)) for alt in av[1]]
            if all(e is not None for e in each):
                candidates.append(tuple(dict.fromkeys(x for e in each if e is not None for x in e)))
        elif op is c.SUBPATTERN:
            inner = _required(list(av[3]))
            if inner is not None:
                candidates.append(inner)
    return max(candidates, key=lambda strings: min(map(len, strings))) if candidates else None


def _look_context(body: list[Any], icase: bool) -> tuple[str, ...] | None:
    """For a look-ahead `(?=.*Y)` at 0: () where no `Y` match can start in a path, (its context,) where one
    must end before the location's first digit and hold that run, None when not proven."""
    c = _sre_constants
    if len(body) == 1 and body[0][0] is c.BRANCH:  # (?=.*Y|.*Z): true where either is; the contexts of both
        each = [_look_context(list(alt), icase) for alt in body[0][1][1]]
        return None if any(e is None for e in each) else tuple(x for e in each if e is not None for x in e)
    if not body or not _greedy_any(body[0]):
        return None
    y = body[1:]
    if _reads_back(y):
        return None
    try:
        if not _walk(y, _STARTS, icase):
            return ()
    except _PastPath:
        return None  # a match starting in the path may run past it: not followed
    return _required(y)


def _anchored_branch(items: list[Any], icase: bool) -> tuple[str, ...] | None:
    """The contexts of an alternative `^ (look-aheads at 0) .*? BODY`, None when it is not one or not proven."""
    c = _sre_constants
    if not items or (items[0] != (c.AT, c.AT_BEGINNING) and items[0] != (c.AT, c.AT_BEGINNING_STRING)):
        return None
    contexts: list[str] = []
    n = 1
    while n < len(items) and items[n][0] in (c.ASSERT, c.ASSERT_NOT):
        direction, body = items[n][1]
        found = _look_context(list(body), icase) if direction == 1 else None
        if found is None:
            return None
        contexts += found
        n += 1
    if n >= len(items) or not _lazy_any(items[n]):
        return None
    rest = items[n + 1:]
    if _reads_back(rest):
        return None
    if _may_start_in_path(rest, icase):  # `.*?` finds the body in a path only where it holds a required string
        inside = _prefix_inside(rest, icase)
        if inside is None:
            return None
        contexts += inside
    return tuple(contexts)


def _inside_path(items: list[Any], icase: bool) -> tuple[str, ...] | None:
    """For an alternative a match of which may start in a path but must then end before the location's first
    digit: the strings one of which such a match holds (it lies in the path and the location's first character,
    so where they hold none of them, it does not start there); None when not proven."""
    try:
        _walk(items, _STARTS, icase)
    except _PastPath:
        return None
    return _required(items)


def _prefix_inside(items: list[Any], icase: bool) -> tuple[str, ...] | None:
    """For an alternative a match of which may start in a path: strings one of which such a match holds within
    the path and the location's `:`/`(`; None when not proven. The longest run of leading items that pathfold's
    walk follows without reaching the location's digit is matched, from a start in the path, within those
    characters (the whole alternative where it ends there: `_inside_path`); one of its required strings is then
    there. () where the walk says no match can start in a path."""
    states = _STARTS
    k = 0
    try:
        for k, item in enumerate(items):  # noqa: B007 - k is read after the loop
            states = _walk([item], states, icase)
            if not states:
                return ()  # no match starting in a path gets past this item
        k = len(items)
    except _PastPath:
        pass
    return _required(items[:k])


def _split(items: list[Any], icase: bool) -> list[tuple[list[Any], bool]]:
    """An alternative as the alternatives of the group it is (a match of the group is a match of one of them, at
    the same place, with the same spans): a group that only names or scopes IGNORECASE, whose body is one branch,
    is split, recursively; anything else is itself."""
    c = _sre_constants
    if len(items) == 1 and items[0][0] is c.SUBPATTERN:
        _, add, remove, body = items[0][1]
        if not remove and not add & ~re.IGNORECASE:
            inner = icase or bool(add & re.IGNORECASE)
            body = list(body)
            if len(body) == 1 and body[0][0] is c.BRANCH:
                return [part for alt in body[0][1][1] for part in _split(list(alt), inner)]
            return _split(body, inner)
    return [(items, icase)]


def _top_alternatives(regex: re.Pattern[str]) -> tuple[list[list[Any]], bool]:
    """`regex`'s parse tree as its top-level alternatives (one when it has no top-level `|`), and whether it
    ignores case."""
    tree = list(_sre_parse.parse(regex.pattern, regex.flags))
    branch = len(tree) == 1 and tree[0][0] is _sre_constants.BRANCH
    alternatives = [list(a) for a in tree[0][1][1]] if branch else [tree]
    return alternatives, bool(regex.flags & re.IGNORECASE)


def path_contexts(regex: re.Pattern[str]) -> PathRead | None:
    """How `regex` reads a located line (module docstring), or None when not proven."""
    try:
        alternatives, icase = _top_alternatives(regex)
        contexts: list[str] = []
        pinned = False
        for alt, case in [part for top in alternatives for part in _split(top, icase)]:
            if _reads_back(alt):
                return None
            if not _may_start_in_path(alt, case):
                continue
            if alike(alt, case):  # `^...`: decides a located line at 0 as its folded line (pathstart.py)
                pinned = True
                continue
            found = _anchored_branch(alt, case)
            if found is not None:
                contexts += found
                pinned = True
                continue
            inside = _prefix_inside(alt, case)
            if inside is None:
                return None
            contexts += inside
        token = FOLD_TOKEN.lower()
        if any(s in token + ":" or s in token + "(" for s in contexts):
            return None  # the folded text's own path would hold one
        return PathRead(tuple(dict.fromkeys(contexts)), pinned)
    except Exception:  # an internal module: any surprise means "not proven"
        return None


def start_contexts(regex: re.Pattern[str], lowered: str | None = None) -> tuple[str, ...] | None:
    """start_contexts of `regex` and of its `lowered` twin (casefold.py, searched case-sensitively) together."""
    if lowered is None:
        return _start_contexts(regex)
    both = [_start_contexts(regex), _start_contexts(re.compile(lowered, regex.flags & ~re.IGNORECASE))]
    return None if None in both else tuple(dict.fromkeys(s for b in both if b is not None for s in b))


def _start_contexts(regex: re.Pattern[str]) -> tuple[str, ...] | None:
    """Strings (lowercased) one of which a match of `regex` that starts inside a location's path, after its first
    character, holds within the path and the location's `:`/`(`; () where no match can start there; None when not
    proven. Where a located line's head (path and `:`/`(`) holds none of them, the line's leftmost match is its match
    at 0, if any, else its leftmost one from the location on (`regex.match(t) or regex.search(t, cut)`, the same
    match as `regex.search(t)`, for less: sre tries no start inside the path).

    Per top-level alternative: one that starts with `^`/`\\A` matches only at 0 (a line holds no newline); one whose
    matches cannot start in a path (pathfold's walk) does not start there; one whose matches may start there but
    must end before the location's first digit holds one of its required strings there (`_inside_path`). Nothing
    is compared with another text, so look-behinds and `\\b` need no proof here: the walk passes over every
    zero-width item (the safe side)."""
    try:
        alternatives, icase = _top_alternatives(regex)
        c = _sre_constants
        contexts: list[str] = []
        anchors = [(c.AT, c.AT_BEGINNING_STRING)] + ([] if regex.flags & re.MULTILINE else [(c.AT, c.AT_BEGINNING)])
        for alt in alternatives:
            if (alt and alt[0] in anchors) or not _may_start_in_path(alt, icase):
                continue
            inside = _inside_path(alt, icase)
            if inside is None:
                return None
            contexts += inside
        return tuple(dict.fromkeys(contexts))
    except Exception:  # an internal module: any surprise means "not proven"
        return None
