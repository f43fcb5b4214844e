"""Key gates: a rule's `key` groups searched alone, before the rule's whole regex.

The identifier rules read `{PRE} name` or `name {POST}`: an alternation of some thirty phrases of every compiler
around a name pattern (`cusparse\\w+`, `CUDA_ERROR_\\w+`, `(?:cuda|cublas|...)[A-Z]\\w*`). On a line of another
error (`'x' was not declared`) search() tries the whole alternation at every position and fails, 5-50 us a rule,
and an error-dense log pays it on every line. Every match of such a rule holds a match of one of its key groups at
the same place of the same text, so where the key groups, searched alone (a literal-led pattern that sre skips
through at C speed, ~1 us), find nothing, the rule cannot match and is not run. Exact: only rules each of whose
alternatives must pass through a key group get a gate, and none whose key group sits under a scoped flag or that
uses back-references (tests/unit/classify/test_key_gates.py checks every rule against its examples and the logs).

A key group that every match of the rule follows with a non-word character or the end of the text (`\\b` after a
name, a quote, ` is undefined`: read from the parsed pattern, _follow) is searched as `(?:key)(?=[...])`:
`cusparse[SDCZ]csrmm2?` then rejects `cusparseScsrmm65` at C speed, where the whole regex took ~20 us to miss.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse
from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["charset_led", "key_gate", "led_gates"]


def _group_source(pattern: str, name: str) -> str | None:
    """The source text inside the group `(?P<name>...)` of `pattern`, or None if it is not plain to find."""
    head = f"(?P<{name}>"
    start = pattern.find(head)
    if start < 0 or pattern.find(head, start + 1) >= 0:
        return None
    i, depth, in_class = start + len(head), 1, False
    body_start = i
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1  # a `]` first in a class is a literal
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return pattern[body_start:i]
        i += 1
    return None


def _mandatory_groups(items: Any) -> set[int] | None:
    """Group numbers every match of the sequence `items` passes through; None where a scoped flag is met on the way
    (a group's text searched alone would lose it)."""
    c = _sre_constants
    out: set[int] = set()
    for op, av in items:
        if op is c.SUBPATTERN:
            group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                return None
            inner = _mandatory_groups(sub)
            if inner is None:
                return None
            out |= inner
            if group is not None:
                out.add(group)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[0] >= 1:
            inner = _mandatory_groups(av[2])
            if inner is None:
                return None
            out |= inner
    return out


_WORD = compile_re(r"\w")
_END = "END"  # in a first set: the text may end there
_CATEGORIES = {"CATEGORY_SPACE": r"\s", "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_DIGIT": r"\d",
               "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W"}


def _class_text(op: Any, av: Any) -> str | None:
    """One member of a character set written back as regex text (inside `[...]`), or None."""
    c = _sre_constants
    if op is c.LITERAL:
        return re.escape(chr(av))
    if op is c.RANGE:
        return f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}"
    if op is c.CATEGORY:
        return _CATEGORIES.get(str(av).replace("UNI_", ""))
    return None


def _ends_in_word(items: list[Any]) -> bool:
    """Whether every match of the sequence `items` ends in a word character (so a `\b` after it asks a non-word
    character or the end next)."""
    c = _sre_constants
    for i in range(len(items) - 1, -1, -1):
        op, av = items[i]
        if op is c.LITERAL:
            return _WORD.match(chr(av)) is not None
        if op is c.IN:
            return all((o is c.LITERAL and _WORD.match(chr(v)) is not None)
                       or (o is c.RANGE and v[1] - v[0] < 512
                       and all(_WORD.match(chr(ch)) for ch in range(v[0], v[1] + 1)))
                       or (o is c.CATEGORY and str(v).replace("UNI_", "") in ("CATEGORY_WORD", "CATEGORY_DIGIT"))
                       for o, v in av)
        if op is c.SUBPATTERN and not (av[1] or av[2]):
            return _ends_in_word(list(av[3]))
        if op is c.BRANCH:
            return all(_ends_in_word(list(alt)) for alt in av[1])
        if op is c.MAX_REPEAT or op is c.MIN_REPEAT:
            inner = _ends_in_word(list(av[2]))
            return inner if av[0] >= 1 else inner and _ends_in_word(items[:i])
        return False
    return False


def _first_chars(items: list[Any], word_before: bool) -> set[str] | None:
    """The characters a match of the sequence `items` can start with, as `[...]` members (_END: at the end of the
    text), or None where not worked out or where the sequence can match empty (what follows the whole match is
    unknown). `word_before`: the text just before is a word character (a `\b` here then asks a non-word one)."""
    c = _sre_constants
    for i, (op, av) in enumerate(items):
        rest = items[i + 1:]
        if op is c.LITERAL or op is c.IN:
            members = [_class_text(op, av)] if op is c.LITERAL else [_class_text(o, v) for o, v in av]
            return {m for m in members if m is not None} if None not in members else None  # NEGATE: None
        if op is c.AT:
            if av in (c.AT_END, c.AT_END_STRING):
                return {r"\n", _END}
            return {r"\W", _END} if av is c.AT_BOUNDARY and word_before else None
        if op is c.ASSERT or op is c.ASSERT_NOT:
            continue  # zero-width: what it asks is more than this needs
        if op is c.SUBPATTERN:
            return None if av[1] or av[2] else _first_chars(list(av[3]) + rest, word_before)
        if op is c.BRANCH:
            sets = [_first_chars(list(alt) + rest, word_before) for alt in av[1]]
            return None if None in sets else set().union(*sets)  # type: ignore[arg-type]
        if op is c.MAX_REPEAT or op is c.MIN_REPEAT:
            first = _first_chars(list(av[2]) + rest, word_before)
            if av[0] >= 1 or first is None:
                return first
            after = _first_chars(rest, word_before)
            return None if after is None else first | after
        return None
    return None


def _follow(items: list[Any], group: int, after: list[Any]) -> set[str] | bool | None:
    """The first set (_first_chars) of what follows the group numbered `group` in `items` followed by `after`;
    False where the group is not in `items`, None where not worked out."""
    c = _sre_constants
    for i, (op, av) in enumerate(items):
        rest = items[i + 1:] + after
        found: set[str] | bool | None = False
        if op is c.SUBPATTERN:
            if av[0] == group:
                return _first_chars(rest, _ends_in_word(list(av[3])))
            found = _follow(list(av[3]), group, rest)
        elif op is c.BRANCH:
            for alt in av[1]:
                one = _follow(list(alt), group, rest)
                if one is not False:
                    return one  # a group number is in one place of the pattern
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.ASSERT, c.ASSERT_NOT):
            found = None if _follow(list(av[-1]), group, []) is not False else False
        if found is not False:
            return found
    return False


def _lookahead(first: set[str] | None) -> str:
    """The look-ahead that a key group's match is followed by in every match of the rule ('' where unknown)."""
    if not first or (r"\w" in first and r"\W" in first):
        return ""
    chars = "".join(sorted(m for m in first if m != _END))
    end = r"|\Z" if _END in first else ""
    return f"(?=[{chars}]{end})"


def key_gate(regex: re.Pattern[str]) -> re.Pattern[str] | None:
    """A regex that finds a match in every text in which `regex` does (its key groups alone), or None."""
    names = [n for n in regex.groupindex if n.startswith("key")]
    src = regex.pattern
    if not names or "(?P=" in src or "(?(" in src or re.search(r"\\[1-9]|\\g<", src):
        return None  # back-references and conditionals read other groups: not searched alone
    c = _sre_constants
    try:
        parsed = list(_sre_parse.parse(src, regex.flags))
    except Exception:  # an internal module: any surprise means "no gate"
        return None
    # the alternatives of the pattern: a top-level alternation, possibly inside one non-capturing group
    while len(parsed) == 1 and parsed[0][0] is c.SUBPATTERN and parsed[0][1][0] is None and not any(parsed[0][1][1:3]):
        parsed = list(parsed[0][1][3])
    branches = parsed[0][1][1] if len(parsed) == 1 and parsed[0][0] is c.BRANCH else [parsed]
    keys = {regex.groupindex[n] for n in names}
    for branch in branches:
        groups = _mandatory_groups(branch)
        if groups is None or not groups & keys:
            return None
    parts = [_group_source(src, n) for n in names]
    if any(p is None for p in parts):
        return None
    whole = list(_sre_parse.parse(src, regex.flags))
    # one alternative per distinct key source (`key`, `key2`, `keyL` are often one name pattern), its look-ahead
    # the union of what follows each of its groups; none where one of them is not worked out
    follows: dict[str, set[str] | None] = {}
    for part, name in zip(parts, names):
        found = _follow(whole, regex.groupindex[name], [])
        one = found if isinstance(found, set) and found and not regex.flags & re.ASCII else None
        if part in follows:
            before = follows[part]
            one = None if before is None or one is None else before | one
        follows[str(part)] = one
    try:
        return re.compile("|".join(f"(?:{p}){_lookahead(f)}" for p, f in follows.items()), regex.flags)
    except re.error:  # a named group inside a key group, twice: no gate
        return None


def _led_by_literal(items: list[Any]) -> bool:
    """Whether sre skips through a text for this pattern's start at C speed already: it starts with a literal, a
    character set, or an alternation whose alternatives all start with a literal."""
    c = _sre_constants
    while items and items[0][0] is c.SUBPATTERN and not (items[0][1][1] or items[0][1][2]):
        items = list(items[0][1][3])
    if not items:
        return False
    op, av = items[0]
    if op is c.BRANCH:
        return all(alt and alt[0][0] is c.LITERAL for alt in av[1])
    return op is c.LITERAL or op is c.IN


def charset_led(source: str, flags: int) -> str:
    """A gate that finds a match wherever `source` does, led by the set of characters its matches start with.

    sre skips to a possible start at C speed only for a pattern led by a literal or a character set; a gate such as
    `_*[A-Z][A-Z0-9]*_...` or `(?:cuda|cublas|...)[A-Z]\\w*` is tried at every position of the line (~10 us). As
    `[F](?<=(?=(?:gate))[\\s\\S])` (F: the characters every match of the gate starts with, _first_chars) it is
    tried only where the line holds one of F; it matches where the gate matches at a position holding one of F,
    which is everywhere it matches. Its spans are not the gate's: only whether it matches is read."""
    parsed = list(_sre_parse.parse(source, flags))
    if _led_by_literal(parsed):
        return source
    first = _first_chars(parsed, False)
    if not first or _END in first:
        return source
    return f"[{''.join(sorted(first))}](?<=(?=(?:{source}))[\\s\\S])"


def led_gates(gates: Sequence[tuple[str, int] | None], lows: Sequence[tuple[str | None, str | None]]
              ) -> tuple[tuple[str | None, str | None], ...]:
    """Per rule, its gate's source and its lowered twin's (casefold.py, searched case-sensitively) as charset_led
    writes them: worked out when the rules are prepared (and cached with them), not at every start."""
    return tuple((None, None) if gate is None else
                 (charset_led(*gate), charset_led(low, gate[1] & ~re.IGNORECASE) if low is not None else None)
                 for gate, (_, low) in zip(gates, lows))
