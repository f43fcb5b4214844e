"""The literal index: which of the rules' strings a lowercased line holds, and which rules they select.

Kept apart from prepare.py (which builds it from the rule set and keeps it in the rule cache with the rest of what
is read out of the patterns).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from legacy_gpu_patch.classify.srecache import compile_re

if TYPE_CHECKING:  # pragma: no cover - typing only
    from legacy_gpu_patch.classify.rules import RuleSet

__all__ = ["MAX_ANSWERS", "PLAIN_LINES", "LiteralIndex"]

PLAIN_LINES = 64  # lines whose strings are tested one by one before the trie is compiled
MAX_ANSWERS = 1 << 12  # answers kept per set of strings found (the table starts again when full)

_Answer = tuple[frozenset[str], list[int]]


class LiteralIndex:
    """Which strings of the rules a lowercased line holds: the prefilter literals (which rules after the lead ones
    it may match) and the necessary strings of every rule (fastpath.necessary_factors: which of them can match).

    Testing each of ~350 literals and the factor sets with `in` costs ~40 us a line, which every new message
    shape of an error-dense log pays. All the strings are searched at once instead, by one regex: a trie of them
    (`a(?:bc|d)`, each branch led by its own literal character, which sre tests cheaply), in a look-ahead so that
    findall() tries it at every position and returns the longest string starting there. Exact: a string the line
    holds either starts where findall reports one, and is then a prefix of it, or lies inside a longer one found;
    both are contained in a string found, and each string found stands for every string it contains (`contained`,
    and the rules of the literals among them, `implied`).

    An ASCII line (nearly every line of a build log) is searched with a trie of the ASCII strings alone: a string
    holding another character cannot be in it, so findall reports the same strings, and sre tries ~40 branches a
    position instead of ~50 (the non-ASCII words of localized tools start 11 of them): ~10 % of the search.

    answer() keeps what holds() and rules_of() make of a set of strings found, per set: both are functions of the
    set alone, and lines of distinct identifiers and paths, though each is new, find few distinct sets (the bench's
    words log: 360 sets over 39,000 searches), while the unions and the sort cost ~3 us a line.
    """

    __slots__ = ("_answers", "_ascii_finder", "_finder", "_plain_left", "always", "ascii_source", "contained",
                 "implied", "source")

    def __init__(self, rules: RuleSet, extra: Sequence[str] = ()) -> None:
        """`extra`: more lowercased strings to look for (the rules' necessary strings)."""
        self.always = frozenset(rules.always)
        gated = dict(zip(rules.literals, rules.literal_rules))
        strings = list(dict.fromkeys([*rules.literals, *(s for s in extra if s)]))
        by_length = sorted(strings, key=len)
        self.contained = {s: frozenset(o for o in by_length[: bisect_right(by_length, len(s), key=len)] if o in s)
                          for s in strings}
        self.implied = {s: frozenset(i for o in self.contained[s] if o in gated for i in gated[o]) for s in strings}
        self.source = "(?=(" + _trie(strings) + "))" if strings else None
        ascii = [s for s in strings if s.isascii()]
        self.ascii_source = "(?=(" + _trie(ascii) + "))" if len(ascii) < len(strings) else self.source
        self._finder: Any = None  # the whole trie's findall (lines that are not ASCII)
        self._ascii_finder: Any = None
        self._plain_left = PLAIN_LINES
        self._answers: dict[frozenset[str], _Answer] = {}

    def __getstate__(self) -> tuple[Any, ...]:
        return self.always, self.contained, self.implied, self.source, self.ascii_source

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.always, self.contained, self.implied, self.source, self.ascii_source = state
        self._finder = self._ascii_finder = None
        self._plain_left = PLAIN_LINES
        self._answers = {}

    def found(self, low: str) -> set[str]:
        """The longest string of the index starting at each position of `low` (see the class docstring)."""
        return set(self._found(low))

    def _found(self, low: str) -> Iterable[str]:
        if self.source is None:
            return ()
        if self._plain_left > 0 and not self.compiled():
            # the trie costs ~20 ms to compile: a log with a few error lines tests the strings one by one (every
            # string held, a superset of what findall reports, closed under containment: the same holds())
            self._plain_left -= 1
            return [s for s in self.contained if s in low]
        if low.isascii():  # the ASCII strings' trie (class docstring), compiled when first needed
            finder = self._ascii_finder
            if finder is None:
                finder = self._ascii_finder = compile_re(self.ascii_source or self.source).findall
        else:
            finder = self._finder
            if finder is None:
                finder = self._finder = compile_re(self.source).findall
        found: Iterable[str] = finder(low)
        return found

    def compiled(self) -> bool:
        """Whether found() searches with a trie (one is compiled at the first search after PLAIN_LINES)."""
        return self._finder is not None or self._ascii_finder is not None

    def holds(self, found: Iterable[str]) -> frozenset[str]:
        """Every string of the index the line holds, from found()."""
        contained = self.contained
        return frozenset().union(*(contained[s] for s in found))

    def rules_of(self, found: Iterable[str]) -> list[int]:
        """Indices (priority order) of the rules whose prefilter literals the line holds (or that have none)."""
        idx = set(self.always)
        implied = self.implied
        for s in found:
            idx |= implied[s]
        return sorted(idx)

    def answer(self, low: str) -> _Answer:
        """(holds(found(low)), rules_of(found(low))), kept per set found (class docstring). The list is shared by
        the lines of the set: read it, never change it."""
        key = frozenset(self._found(low))
        got = self._answers.get(key)
        if got is None:
            if len(self._answers) >= MAX_ANSWERS:
                self._answers.clear()
            got = self._answers[key] = (self.holds(key), self.rules_of(key))
        return got

    def rules_for(self, low: str) -> list[int]:
        """rules_of(found(low))."""
        return self.rules_of(self.found(low))


def _trie(words: Sequence[str]) -> str:
    """A regex matching exactly the words, longest first at each point (greedy optional tails)."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + emit(node[ch]) for ch in sorted(k for k in node if k)]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return "(?:" + body + ")?" if "" in node else body

    return emit(root)
