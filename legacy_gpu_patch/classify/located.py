"""The literal index's answer for a line that starts with a compiler location, without searching all of it.

A new message shape of an error-dense log costs ~20 us in the literal index (prepare.LiteralIndex: a trie tried at
every position of the lowered line); most such lines start with a location `PATH:L:C: ` or `PATH(L): `
(pathfold.location_path), and what makes their shapes new is the path (a build has thousands) combined with the
message (a few hundred shapes of its own). So the answer is put together from two parts, each searched once:

- the *head* `low[:cut + 1]`: the path and the location's `:` or `(`, keyed by itself;
- the *rest* `low[cut:]`, keyed by its shape (every ASCII digit 1-9 written 0, shapes.py) and by which of the
  index's strings that hold a digit it holds (those whose shapes its shape holds are tested with `in`).

Exact (tests/unit/classify/test_located_index.py compares it with the whole line's search): a string the line
holds lies in the head or in the rest, unless it starts in the path and covers the location's `:`/`(` and the
digit after it, which no string of the index can (`exact`, checked when the index is read: such a string would
start with PATH characters followed by `:` or `(` and a digit). A string without a digit lies in the rest exactly
where the rest's shape holds it (a digit of the rest is a `0` of its shape, and such a string takes neither); one
with a digit is tested on the rest itself. The strings held are the union of the parts', and the rules a line's
literals select are those of the strings it holds (LiteralIndex.implied: closed under containment).

Parts pay only where they repeat: a build of thousands of paths, each named once or twice (distinct identifiers
and directories), makes nearly every head new, and errors naming distinct identifiers in a few files make nearly
every rest new; a new part costs more than the whole line's one search (the digit strings its shape allows, the
unions). So while nearly every located line has a new head or a new rest shape (adaptive.py's Learning, over
located lines), search() searches the whole line,
which gives the same answer, learning no part (its tables stay small), and says no match starts past the path
(`starts` empty: every rule is searched from the line's start, as a line without a location is); where the head is
known and holds none of the index's strings (most paths), the rest alone is searched (the line holds what its rest
holds) and the head's `starts` are kept.
"""

from __future__ import annotations

from legacy_gpu_patch.classify.adaptive import Learning
from legacy_gpu_patch.classify.literalindex import LiteralIndex
from legacy_gpu_patch.classify.shapes import RAW_TO_ZERO
from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["LocatedIndex"]

# how a string that starts in a location's path (lowered: pathfold's PATH characters) and covers its `:`/`(` and
# first digit starts
_PAST_HEAD = compile_re(r"[a-z0-9_./+-]+[:(][0-9]")
_HAS_DIGIT = compile_re(r"[0-9]")
MAX_PARTS = 1 << 15  # heads, and rest shapes, kept (each table starts again when full)

_Part = tuple[frozenset[str], frozenset[int]]  # (strings held, rules they select)
_Head = tuple[frozenset[str], frozenset[int], frozenset[int]]  # and the rules no match of which starts in the path


class LocatedIndex:
    """LiteralIndex.holds/rules_of of a located line, from its head and its rest (module docstring)."""

    __slots__ = ("_contexts", "_digits", "_groups", "_heads", "_location_path", "_pairs", "_rests", "_selected",
                 "_starts", "_starts_by_present", "asked", "cut", "exact", "index", "learning", "starts", "unread")

    def __init__(self, index: LiteralIndex, starts: tuple[tuple[str, ...] | None, ...] = ()) -> None:
        """`index`: searched once its trie is compiled (search() is called only then: the parts are searched with
        it); what is read of its strings is read at the first search (start-up stays as it was). `starts`: per rule,
        pathcontext.start_contexts (Prepared.starts)."""
        self.index = index
        self.exact = False
        self.unread = True
        self._starts = starts
        self.cut = 0  # the last line searched: the length of its location's path (0: none)
        self.starts: frozenset[int] = frozenset()  # and the rules no match of which starts inside that path
        # a new head is a miss: while most are (adaptive.py), search() searches the whole line, learning no part
        self.learning = Learning()
        self.asked = 0  # located lines search() was asked of
        # the strings holding a digit, each with its shape: a rest holds one only where the rest's shape holds that
        self._digits: tuple[tuple[str, str], ...] = ()
        self._heads: dict[str, _Head] = {}
        self._pairs: dict[tuple[frozenset[str], frozenset[str]], frozenset[str]] = {}
        self._selected: dict[tuple[frozenset[int], frozenset[int]], list[int]] = {}
        self._groups: tuple[tuple[frozenset[str], frozenset[int]], ...] = ()  # rules by their start contexts
        self._contexts: tuple[str, ...] = ()
        self._starts_by_present: dict[frozenset[str], frozenset[int]] = {}
        # rest shape -> (the digit strings its shape allows, {the ones a rest holds: part})
        self._rests: dict[bytes, tuple[tuple[str, ...], dict[tuple[str, ...], _Part]]] = {}

    def search(self, text: str, low: str) -> tuple[frozenset[str], list[int]]:
        """(every string of the index `low` holds, the rules its literals select in priority order) for a line
        `text`, `low` = text.lower(): put together from its parts where it starts with a location."""
        if self.unread:
            self._read()
        cut = self.cut = self._location_path(text) if self.exact else 0
        if cut:
            self.asked += 1
            learning = self.learning
            part = self._heads.get(low[: cut + 1])
            if learning.on or self.asked >= learning.until:
                shape = low[cut:].encode("utf-8", "surrogatepass").translate(RAW_TO_ZERO)
                if (part is not None and shape in self._rests) or learning.miss(self.asked):
                    return self.answer(low, cut, shape)
            # new heads or new rests keep coming (a build of thousands of paths, or errors naming distinct
            # identifiers): no new part, no unions. A known head holding no string of the index: the line holds the
            # strings its rest holds (module docstring), so the rest alone is searched, and the head's rules that
            # cannot start in its path are skipped there; any other line searched whole (the same answer), no match
            # said to start past the path
            if part is not None and not part[0]:
                self.starts = part[2]
                return self.index.answer(low[cut:])
            self.starts = frozenset()
        return self.index.answer(low)

    def answer(self, low: str, cut: int, shape: bytes | None = None) -> tuple[frozenset[str], list[int]]:
        """(every string of the index `low` holds, the rules its literals select in priority order) for a lowered
        line whose location's path is `low[:cut]` (cut > 0; `shape`: its rest's shape, where known); `exact` must
        be true."""
        head = low[: cut + 1]
        part = self._heads.get(head)
        if part is None:
            part = self._head(head)
        self.starts = part[2]
        rest = low[cut:]
        if shape is None:
            shape = rest.encode("utf-8", "surrogatepass").translate(RAW_TO_ZERO)
        entry = self._rests.get(shape)
        if entry is None:
            if len(self._rests) >= MAX_PARTS:
                self._rests.clear()
            text = shape.decode("utf-8", "surrogatepass")
            entry = self._rests[shape] = (tuple(s for s, ds in self._digits if ds in text), {})
        allowed, parts = entry
        held_digits = tuple(s for s in allowed if s in rest) if allowed else ()
        other = parts.get(held_digits)
        if other is None:
            other = parts[held_digits] = self._part(rest)
        # the unions, one per pair of parts (a few thousand in a build): each part is one object, its hash cached
        pair = (part[0], other[0])
        held = self._pairs.get(pair)
        if held is None:
            held = self._pairs[pair] = part[0] | other[0]
        rules = self._selected.get((part[1], other[1]))
        if rules is None:
            if len(self._selected) >= MAX_PARTS or len(self._pairs) >= MAX_PARTS:
                self._selected.clear()
                self._pairs.clear()
            rules = self._selected[part[1], other[1]] = sorted(part[1] | other[1])
        return held, rules

    def _read(self) -> None:
        from legacy_gpu_patch.classify.pathfold import location_path  # here: a log with few error lines needs none

        self._location_path = location_path
        self.unread = False
        strings = self.index.contained
        self.exact = not any(_PAST_HEAD.match(s) for s in strings)
        self._digits = tuple((s, s.encode("utf-8", "surrogatepass").translate(RAW_TO_ZERO).decode("utf-8"))
                             for s in strings if _HAS_DIGIT.search(s))
        groups: dict[tuple[str, ...], set[int]] = {}
        for i, contexts in enumerate(self._starts):
            if contexts is not None:
                groups.setdefault(contexts, set()).add(i)
        self._groups = tuple((frozenset(contexts), frozenset(rules)) for contexts, rules in groups.items())
        self._contexts = tuple({s for contexts in groups for s in contexts})  # each tested once a head

    def _head(self, head: str) -> _Head:
        """A head's part, and the rules no match of which starts inside its path (none of their contexts in it)."""
        held, rules = self._part(head)
        present = frozenset(s for s in self._contexts if s in head)
        # one object per set of contexts present (a build has a handful): a set of rule indices is ~2 KB, and a
        # table of new heads held its own copy each (22 MiB at 12,600 heads of the 200 MB distinct-word log)
        starts = self._starts_by_present.get(present)
        if starts is None:
            starts = self._starts_by_present[present] = frozenset().union(
                *(r for contexts, r in self._groups if contexts.isdisjoint(present)))
        if len(self._heads) >= MAX_PARTS:
            self._heads.clear()
        part = self._heads[head] = (held, rules, starts)
        return part

    def _part(self, text: str) -> _Part:
        held, rules = self.index.answer(text)
        return held, frozenset(rules)
