"""The path-folding shape, used: a new message shape that starts with a compiler location is decided through the
shape of its folded line (pathfold.py), with the rules that could see the path tried on the line itself.

An error-dense log's message shapes hold the path of their location (the bench's 52 MB log: 20,300 shapes, ~450
once the path is folded), and a new shape pays the plain path (~30 us). For an ASCII line `T = PATH + TAIL + R`
(pathfold.location_path) and its folded line `F = FOLD_TOKEN + TAIL + R`, the first unit (lead step or rule, as
Matcher.plain_match numbers them) that matches T is found as follows (`PathFold.decide`):

- F's decision, with its match, comes from a ShapeCache of folded lines (exact for F: shapes.py).
- Each unit is *safe* for T's head (`low[:cut + 1]`: the path and the location's `:`/`(`) where it decides T as F,
  its spans shifted by `len(PATH) - len(FOLD_TOKEN)` (a start of 0 kept: a `^` branch, pathcontext.PathRead):
  its pattern's path_contexts are proven and the head holds none of them, and none of its prefilter literals that
  can start in a path (pathfold.string_path_blind) is in the head (then the literal is in T where it is in F: a
  literal of the index that starts in a path ends before the location's digit, `_PAST_HEAD`, so inside the head;
  a literal that F's own head `p.c:`/`p.c(` could hold makes the unit aware). A key gate, the necessary strings
  and the path skip (match._gated_search) only leave out what cannot match, and a lowered twin has its pattern's
  spans on an ASCII line (casefold.py): none of them changes a decision.
- Every other unit (`aware`: not proven, or its contexts in this head) is tried on T itself, in order, before the
  unit deciding F: a safe one misses T where it misses F. If one matches, it decides T. Else F's decider decides
  T, its spans shifted where it is safe; where it is aware it is tried on T, and where it misses T, or a span ends
  inside F's `p.c`, the plain path decides T (exact, rare).

tests/unit/classify/test_foldshape.py compares the decisions, spans and findings with the plain path on real and
adversarial lines (paths holding `error`, `cusparse`, digits, identifiers a rule reads).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

from legacy_gpu_patch.classify.casefold import SpanMatch, _shifted
from legacy_gpu_patch.classify.pathfold import FOLD_TOKEN
from legacy_gpu_patch.classify.rules import _any_of
from legacy_gpu_patch.classify.shapes import _END, MAX_SHAPES, NOT_FOLDED, TEXT_TO_ZERO, ShapeCache, shape_of
from legacy_gpu_patch.classify.srecache import compile_re

if TYPE_CHECKING:  # pragma: no cover - typing only (match.py imports shapes.py, which imports this module)
    from legacy_gpu_patch.classify.match import Matcher
    from legacy_gpu_patch.classify.rules import RuleSet

__all__ = ["NOT_FOLDED", "FoldTables", "PathFold", "fold_tables", "unit_contexts"]

# how a lowered string that starts in a location's path and covers its `:`/`(` and first digit starts (located.py)
_PAST_HEAD = compile_re(r"[a-z0-9_./+-]+[:(][0-9]")
_ASCII_DIGIT = compile_re(r"[0-9]")
_PATH_ONLY = compile_re(r"[a-z0-9_./+-]+")  # a string that a fold token may be made of (pathfold's PATH)
# per unit: None (aware on every head) or (its pattern's path contexts, its prefilter literals that can start in a
# path), lowered
_Units = tuple[tuple[tuple[str, ...], tuple[str, ...]] | None, ...]


def unit_contexts(rules: RuleSet, lead: tuple[Any, ...]) -> _Units:
    """Per unit (the lead steps of `lead`, prepare.LeadStep, then rules[rules.lead:]): None where it is aware on
    every head, else the lowered strings whose presence in a head bears on it: its pattern's path contexts
    (pathcontext.path_contexts), and its prefilter literals that can start in a path (module docstring)."""
    from legacy_gpu_patch.classify.pathcontext import path_contexts
    from legacy_gpu_patch.classify.pathfold import string_path_blind
    from legacy_gpu_patch.classify.prepare import plain_units

    out: list[tuple[tuple[str, ...], tuple[str, ...]] | None] = []
    for pattern, flags, prefilter in plain_units(rules, lead):
        read = path_contexts(re.compile(pattern, flags))
        literals = tuple(dict.fromkeys(lit.lower() for lit in prefilter if not string_path_blind((lit,))))
        if read is None or any(_PAST_HEAD.match(lit) for lit in literals):
            out.append(None)  # not proven, or a literal that may cover the location's digit (not in the head)
            continue
        out.append((read.contexts, literals))
    return tuple(out)


class FoldTables(NamedTuple):
    """What PathFold reads off the units' contexts, a function of them alone (kept in the lgpatch cache with them: a
    failing build's first error lines paid ~8 ms a run for it, the trie's source and the strings' containment)."""

    contexts: _Units
    always: frozenset[int]  # the units aware on every head
    regex: dict[str, frozenset[int]]  # a pattern's context -> its units
    literals: dict[str, frozenset[int]]  # a prefilter literal that can start in a path -> its units
    finder: str | None  # the trie of every string of both (None: there are none)
    contained: dict[str, frozenset[str]]  # each such string -> the strings it contains (itself too)
    digit_shapes: tuple[str, ...]  # the shapes of the strings that hold a digit


def fold_tables(contexts: _Units) -> FoldTables:
    """The FoldTables of `contexts` (unit_contexts)."""
    from legacy_gpu_patch.classify.literalindex import _trie

    regex: dict[str, set[int]] = {}
    literals: dict[str, set[int]] = {}
    for u, both in enumerate(contexts):
        for table, read in zip((regex, literals), both or ((), ())):
            for string in read:
                table.setdefault(string, set()).add(u)
    strings = sorted({*regex, *literals})
    return FoldTables(
        contexts=contexts,
        always=frozenset(u for u, c in enumerate(contexts) if c is None),
        regex={k: frozenset(v) for k, v in regex.items()},
        literals={k: frozenset(v) for k, v in literals.items()},
        # each string a head holds, in one search (a trie, as prepare.LiteralIndex searches a line): the longest
        # string found at each position stands for every string it starts with, and so for all it contains
        finder="(?=(" + _trie(strings) + "))" if strings else None,
        contained={x: frozenset(o for o in strings if o in x) for x in strings},
        digit_shapes=tuple(sorted({x.translate(TEXT_TO_ZERO) for x in strings if any(ch.isdigit() for ch in x)})),
    )


_NO_TABLES = fold_tables(())  # a PathFold's until its first decide() loads the rules' (_load)


def shipped_tables(rules: RuleSet, lead: tuple[Any, ...]) -> FoldTables:
    """fold_tables(unit_contexts()); for the shipped rule set, from the lgpatch cache (the proofs read every
    pattern: ~0.1 s)."""
    from pathlib import Path

    from legacy_gpu_patch.classify.rulecache import cached_for

    here = Path(__file__).resolve().parent
    code = [here / name for name in ("foldshape.py", "pathfold.py", "pathcontext.py", "pathstart.py",
                                        "prepare.py", "literalindex.py")]
    return cached_for(rules, "foldshape", code, lambda: fold_tables(unit_contexts(rules, lead)))


class PathFold:
    """The decisions of a Matcher's new located shapes, through their folded shapes (module docstring)."""

    __slots__ = ("_by_present", "_finder", "_gates", "_heads", "_interned", "_location_path", "_orders", "_splits",
                 "_unit_of", "folded", "held", "memo", "tables")

    def __init__(self, folded: ShapeCache) -> None:
        """`folded`: a ShapeCache of the matcher's, for folded lines (it must not fold: a folded line folds to
        itself). The proofs are read at the first decide(): a log whose shape cache meets no location needs none."""
        self.folded = folded
        self.tables = _NO_TABLES
        self._location_path: Any = None
        self._finder: Any = None  # the tables' finder, compiled: every unit's strings, searched once a head
        self._heads: dict[str, tuple[str, frozenset[int]]] = {}
        self._by_present: dict[tuple[frozenset[str], str], tuple[str, frozenset[int]]] = {}  # _head's, per strings
        self._interned: dict[frozenset[int], frozenset[int]] = {}  # one object per set: its hash is kept
        self._orders: dict[tuple[frozenset[str], frozenset[int]], tuple[int, ...]] = {}
        self._gates: dict[tuple[frozenset[int], int], Any] = {}
        self._splits: dict[tuple[frozenset[int], int], bool] = {}  # gate_splits()
        self._unit_of: dict[int, int] = {}
        self.held: frozenset[str] | None = None
        self.memo: dict[Any, bool] = {}  # knownfold's tests that depend on this fold's units only

    def _load(self, matcher: Matcher) -> None:
        from legacy_gpu_patch.classify.pathfold import location_path
        from legacy_gpu_patch.classify.prepare import prepared

        tables = self.tables = shipped_tables(matcher.rules, prepared(matcher.rules).lead)
        self._finder = compile_re(tables.finder).findall if tables.finder is not None else None
        # the unit of each rule a hit can name (a merged lead step's members: the step's)
        steps = matcher._lead_steps
        for j, (rule, group, _) in enumerate(steps):
            for member in [m for _, m in group] if group is not None else [rule]:
                self._unit_of[id(member)] = j
        rules = matcher.rules
        for i in range(rules.lead, len(rules.rules)):
            self._unit_of[id(rules.rules[i])] = len(steps) + i - rules.lead
        self._location_path = location_path

    def _present(self, text: str) -> set[str]:
        """The strings of the units' contexts that `text` holds."""
        if self._finder is None:
            return set()
        contained = self.tables.contained
        return {s for found in set(self._finder(text)) for s in contained[found]}

    def _head(self, head: str) -> tuple[str, frozenset[int]]:
        """(the fold token for a head, the units aware on it). The token is a PATH made of the head's literals
        that are PATH characters, `a/b/p.c`, so that a unit selected on the line through a literal of its path is
        selected on the folded line too. A unit is aware where it is always, where the head or the token's head
        holds a context of its pattern (its proof then says nothing), or where one of its literals is in one of the
        two heads and not in the other (then it may be selected on one line only)."""
        found = self._heads.get(head)
        if found is None:
            present = frozenset(self._present(head))
            # a pure function of the strings present and the head's last character: worked out once for them (a
            # build's paths hold a few sets of them)
            found = self._by_present.get((present, head[-1]))
            if found is None:
                found = self._by_present[present, head[-1]] = self._token_and_units(present, head[-1])
            if len(self._heads) >= MAX_SHAPES:
                self._heads.clear()
                self._by_present.clear()
            self._heads[head] = found
        return found

    def _token_and_units(self, present: frozenset[str], last: str) -> tuple[str, frozenset[int]]:
        """_head's answer for a head holding the strings `present`, ending in `last` (`:` or `(`)."""
        tables = self.tables
        words = sorted(s for s in present if s in tables.literals and _PATH_ONLY.fullmatch(s))
        token = "".join(w + "/" for w in words) + FOLD_TOKEN
        mine = self._present(token + last)
        units = set(tables.always)
        for s in present | mine:
            units |= tables.regex.get(s, frozenset())
        for s in present ^ mine:
            units |= tables.literals.get(s, frozenset())
        return token, self._interned.setdefault(frozenset(units), frozenset(units))

    def _order(self, matcher: Matcher, held: frozenset[str], rules: list[int], aware: frozenset[int]
               ) -> tuple[int, ...]:
        """The aware units that plain_match would try on a line whose index strings are `held` (`rules`: those its
        literals select), in order: a lead step whose prefilter it passes, a selected rule (one per pair)."""
        key = (held, aware)
        found = self._orders.get(key)
        if found is None:
            steps = matcher._lead_steps
            lead = [j for j, (rule, group, _) in enumerate(steps) if j in aware
                    and (group is not None or not rule.prefilter or not held.isdisjoint(rule.prefilter))]
            first = len(steps) - matcher.rules.lead
            if len(self._orders) >= MAX_SHAPES:
                self._orders.clear()
            found = self._orders[key] = (*lead, *(first + i for i in rules if first + i in aware))
        return found

    def trial_gate(self, matcher: Matcher, aware: frozenset[int], first: int) -> Any:
        """A search for the strings by which a line selects one of the `aware` units up to `first` for _order (a
        lead step's prefilter literals, a rule's literals of the index): on a lowered line that holds none of them,
        _order tries none of those units, whatever the index's answer. None where one is tried on every line (a
        merged lead step, a unit without literals)."""
        key = (aware, first)
        found = self._gates.get(key, False)
        if found is False:
            strings: set[str] = set()
            steps = matcher._lead_steps
            rules = matcher.rules
            gated = dict(zip(rules.literals, rules.literal_rules))
            found = None
            for u in sorted(v for v in aware if v <= first):
                if u < len(steps):
                    rule, group, _ = steps[u]
                    if group is not None or not rule.prefilter:
                        break
                    strings.update(rule.prefilter)  # in the index's answer only where in the line
                    continue
                i = u - len(steps) + rules.lead
                if i in matcher._index.always:
                    break
                strings.update(lit for lit, of in gated.items() if i in of)
            else:  # none tried on every line
                found = _any_of(strings)
            if len(self._gates) >= MAX_SHAPES:
                self._gates.clear()
                self._splits.clear()
            self._gates[key] = found
            self._splits[key] = found is not None and not any(
                _PAST_HEAD.match(s.lower()) or _ASCII_DIGIT.search(s) for s in strings)
        return found

    def gate_splits(self, aware: frozenset[int], first: int) -> bool:
        """Whether trial_gate(aware, first) (asked before) finds a string in a located line exactly where it finds one
        in its head `low[:cut + 1]` or in its rest `low[cut:]`, and in the rest exactly where it finds one in the
        rest's shape (shapes.py): none of its strings covers the location's `:`/`(` and the digit after it
        (`_PAST_HEAD`: an occurrence in neither part would), and none holds an ASCII digit (a digit-free string is in
        a text where it is in the text's shape: a digit of the text is a `0` there, and the string takes neither)."""
        return self._splits.get((aware, first), False)

    def _folded_match(self, matcher: Matcher, folded: str) -> Any:
        """F's decision (ShapeCache.match). An entry that keeps no rule because the line it was learnt from held
        one of its aware decider's runs (shapes.py: `needs`) is learnt again from F where F holds none (ShapeCache
        then keeps the rule, and the lines of F's shape are taken by it: knownfold.py, knownclass.py, instead of
        each going the long way). An entry learnt from any line of a shape decides every line of it as the plain
        path does (shapes.py), so which line it is learnt from changes no decision."""
        cache = self.folded
        shape = shape_of(folded)
        entry = cache.entries.get(shape)
        if entry is not None and entry[2] is None and entry[0] != _END and folded.isascii():
            runs = cache.contexts.get(entry[0])
            if runs:
                low, low_shape = folded.lower(), shape.decode().lower()
                if not any(r in low or r in low_shape for r in runs):
                    return cache._learn(matcher, folded, shape)
        return cache.match(matcher, folded)

    def decide(self, matcher: Matcher, text: str) -> Any:
        """matcher.plain_match(text) (unit, rule, match; None where nothing matches), or NOT_FOLDED where `text` has
        no location to fold, is not ASCII, or the literal index cannot answer for its parts (located.py). `held`:
        the index's strings the line holds, where it was folded."""
        located = matcher._located
        if self._location_path is None:
            if not matcher._index.compiled():
                return NOT_FOLDED  # before the index's trie: plain_match searches the whole line
            self._load(matcher)
            if located.unread:
                located._read()
        cut = self._location_path(text) if located.exact and text.isascii() else 0
        if not cut:
            return NOT_FOLDED
        low = text.lower()
        token, aware = self._head(low[: cut + 1])
        # F's decision first: learning it searches the index for F, which sets located's answer for F's path
        hit = self._folded_match(matcher, token + text[cut:])
        self.held, rules = located.answer(low, cut)  # and `located.starts` for this line's path
        first = _END if hit is None else self._unit_of[id(hit[0])]
        try_unit = matcher.held_unit
        held = self.held
        for u in self._order(matcher, held, rules, aware):
            if u > first:
                break
            found = try_unit(u, text, low, held, cut)  # F's decider too, where it is aware
            if found is not None:
                return u, found[0], found[1]
        if hit is None:
            return None
        if first in aware:  # it misses T, or T's literals do not select it: the plain path (exact, rare)
            return matcher.plain_match(text)
        rule, m = hit
        spans = _shifted(m.regs, cut - len(token), len(token))
        if spans is None:
            return matcher.plain_match(text)
        return first, rule, SpanMatch(m.re, text, spans)
