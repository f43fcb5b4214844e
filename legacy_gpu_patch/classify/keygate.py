"""Key gates: a rule's `key` groups searched alone, before the rule's whole regex.

The identifier rules read `{PRE} name` or `name {POST}`: an alternation of some thirty phrases of every compiler
around a name pattern (`cusparse\\w+`, `CUDA_ERROR_\\w+`, `(?:cuda|cublas|...)[A-Z]\\w*`). On a line of another
error (`'x' was not declared`) search() tries the whole alternation at every position and fails, 5-50 us a rule,
and an error-dense log pays it on every line. Every match of such a rule holds a match of one of its key groups at
the same place of the same text, so where the key groups, searched alone (a literal-led pattern that sre skips
through at C speed, ~1 us), find nothing, the rule cannot match and is not run. Exact: only rules each of whose
alternatives must pass through a key group get a gate, and none whose key group sits under a scoped flag or that
uses back-references (tests/unit/classify/test_key_gates.py checks every rule against its examples and the logs).
"""

from __future__ import annotations

import re
from typing import Any

from legacy_gpu_patch.classify.fastpath import _sre_constants, _sre_parse

__all__ = ["key_gate"]


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
    try:
        return re.compile("|".join(dict.fromkeys(f"(?:{p})" for p in parts)), regex.flags)
    except re.error:  # a named group inside a key group, twice: no gate
        return None
