"""Which rule decides a normalized line: the lead rules first, then the rules whose prefilter literals it holds.

The rules of the lead files (anchored exceptions: command echoes, progress lines, warnings) are tried first, one
by one (runs of them merged into one regex, see fastpath.py); then the prefilter literals present in the line
select the rules worth a regex among the rest, in priority order. The first rule whose regex matches decides;
exception rules (warnings about deprecated things, command echoes, ...) decide "no finding".
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from legacy_gpu_patch.classify.adaptive import Learning
from legacy_gpu_patch.classify.casefold import LowMatch
from legacy_gpu_patch.classify.fastpath import _GLUE_FIRST, _MAY_BE_PREFIXED, MATCH_WINDOW, _strip_raw_prefixes
from legacy_gpu_patch.classify.foldshape import PathFold
from legacy_gpu_patch.classify.keygate import led_gates
from legacy_gpu_patch.classify.lead import LeadSteps
from legacy_gpu_patch.classify.literalindex import LiteralIndex
from legacy_gpu_patch.classify.located import LocatedIndex
from legacy_gpu_patch.classify.prepare import compile_gate, compile_lowered, lead_machinery, prepared
from legacy_gpu_patch.classify.rules import Rule, RuleSet, load_rules
from legacy_gpu_patch.classify.shapes import MAX_SHAPES, RAW_TO_ZERO, RuleMatch, ShapeCache

__all__ = ["Hit", "LiteralIndex", "Matcher"]

Hit = tuple[Rule, RuleMatch]

SHAPES_AFTER = 64  # lines matched the plain way before the shape cache starts (a log with a few error lines)
_UNKNOWN: Any = object()  # not read yet (a rule whose pattern gives no strings has None)


def _gated_search(entry: tuple[Any, Any, Any], rule: Rule, text: str, low: str, plain: bool, cut: int = 0
                  ) -> RuleMatch | None:
    """rule's match in `text` (`low`: text.lower(); `plain`: text is ASCII), or None. `entry`: the rule's key gate,
    the gate lowered and its pattern lowered (casefold.py): on an ASCII line the lowered ones search `low` and give
    the same spans; a gate that finds no key group means the rule cannot match (keygate.py). `cut`: no match starts
    in text[1:cut] (located.py, pathcontext.start_contexts): the search is at 0, then from `cut` on."""
    gate, low_gate, low_regex = entry
    if plain and low_gate is not None:
        if low_gate.search(low) is None:
            return None
    elif gate is not None and gate.search(text) is None:
        return None
    if plain and low_regex is not None:
        lm = (low_regex.match(low) or low_regex.search(low, cut)) if cut else low_regex.search(low)
        return LowMatch(lm, low_regex, text) if lm else None
    return (rule.regex.match(text) or rule.regex.search(text, cut)) if cut else rule.regex.search(text)


def _holds_all(need: tuple[frozenset[str], ...], held: frozenset[str]) -> bool:
    """Whether the line holds a string of each set of `need` (`held`: the index's strings it holds)."""
    for one in need:  # noqa: SIM110 - a loop, not all(genexpr): ~6 calls a new shape, most of one or two sets
        if held.isdisjoint(one):
            return False
    return True


@lru_cache(maxsize=8)
def _rule_searchers(rules: RuleSet) -> list[Any]:
    """Per rule, (its key gate (keygate.py), the gate lowered, the rule's pattern lowered (casefold.py)), compiled
    when the rule is first tried (shared by a rule set's matchers)."""
    return [_UNKNOWN] * len(rules.rules)


class Matcher(LeadSteps):
    """The rule set of a classifier, with its fast paths."""

    def __init__(self, rules: RuleSet | None = None, use_shapes: bool = True) -> None:
        """`use_shapes`: cache rule decisions per message shape (same results; False for the plain path)."""
        self.rules = rules or load_rules()
        self._rules = self.rules.rules
        self._lead = self.rules.lead
        self._literals = self.rules.literals
        self._literal_rules = self.rules.literal_rules
        self._always = self.rules.always
        prep = prepared(self.rules)
        self._raw_skip, self._lead_steps = lead_machinery(self.rules)
        self._index = prep.index
        self._located = LocatedIndex(self._index, prep.starts)
        self._lead_orders: dict[frozenset[str], tuple[int, ...]] = {}  # _lead_held's steps per index answer
        self._worth: dict[frozenset[str], list[int]] = {}  # _worth_trying's rules per index answer
        # per rule, strings one of which each match holds (ASCII lines only: lower() is per character there)
        self._factors = prep.factors
        self._gate_sources = prep.gates
        self._lowered = prep.lowered or ((None, None),) * len(self._rules)
        self._led = prep.led
        self._searchers = _rule_searchers(self.rules)
        self._aware = dict(prep.aware)
        self._aware_runs = dict(prep.aware_runs)
        self._matched = 0  # lines matched the plain way; past SHAPES_AFTER, by shape
        self._use_shapes = use_shapes
        self._shapes: ShapeCache | None = None
        # foldshape.py: a new located shape decided through its folded shape (the same decision; False: the plain
        # path, which tests compare it with)
        self.fold_paths = True
        # the index's strings the line of the last plain_match() holds (an ASCII line whose lead rules all missed)
        self.held: frozenset[str] | None = None
        # the raw fast path's decision per raw line shape (digits written 0), where it cannot tell digits apart
        self._raw_shapes: dict[bytes, bool] | None = {} if use_shapes and prep.raw_blind else None
        # whether the caches learn now: they rest while nearly every candidate line is new (adaptive.py)
        self.learning = Learning()

    def _raw_skipped(self, raw: bytes, ascii: bool = False) -> bool:
        """Whether a plain line is decided on its raw bytes (_raw_decided), once per line shape where allowed."""
        shapes = self._raw_shapes
        if shapes is None:
            return self._raw_decided(raw, ascii)
        key = raw.translate(RAW_TO_ZERO)
        found = shapes.get(key)
        if found is None:
            found = self._raw_decided(raw, ascii)
            if self.learning.on:  # resting: decided, not kept (adaptive.py)
                if len(shapes) >= MAX_SHAPES:
                    shapes.clear()
                shapes[key] = found
        return found

    def _raw_decided(self, raw: bytes, ascii: bool = False) -> bool:
        """Whether a plain line is decided on its raw bytes: a command echo, include chain or progress line.

        The raw regex (see _raw_skip_regex) reads the line as normalize() would leave it only when the line is
        ASCII and holds nothing that normalize() rewrites besides its prefixes (stripped here as there): colours,
        \\r, a progress message of another job glued in front ("Building x.o/src/a.cpp:1: error"), localized
        severity words of ASCII languages (they end the line with LOCAL_MARK, which an anchored `$` then misses).
        Then the same exception reads the normalized text, and the decode and normalisation are saved. A long line
        is read on its first MATCH_WINDOW bytes, as _line() reads it.
        """
        skip = self._raw_skip
        if skip is None or not (ascii or raw.isascii()):
            return False
        head = raw if len(raw) <= MATCH_WINDOW else raw[:MATCH_WINDOW]
        if head[:1] in _MAY_BE_PREFIXED:
            head = _strip_raw_prefixes(head)
        if skip.match(head) is None:
            return False
        # `in` on str: bytes' `in` first tries the needle as an int and pays for the TypeError, several times slower
        text = raw.decode("latin-1")
        if "\x1b" in text or "\r" in text or "\x1c" in text or "\x1d" in text or "\x1e" in text or "\x1f" in text:
            return False
        # normalize._local_re() rewrites a word only before a colon: most command echoes have none
        if ":" in text and ("ehler" in text or "rreur" in text or "rrore" in text):
            return False
        body = head.lstrip()
        if body and body[0] not in _GLUE_FIRST:
            return True
        return not (".o/" in text or ".obj" in text or ".o\\" in text)

    def match(self, text: str) -> Hit | None:
        """The first rule (exceptions included) that matches a normalized line.

        The rules of the lead files (anchored exceptions: command echoes, progress lines, warnings) are tried
        first, one by one; then the prefilter literals present in the line select the rules worth a regex among
        the rest, in priority order. After SHAPES_AFTER lines, the decision is cached per message shape
        (shapes.py): the same result, for a few regex searches a line where an error-dense log needs dozens.
        """
        shapes = self._shapes
        if shapes is not None:
            return shapes.match(self, text)
        self._matched += 1
        if self._matched >= SHAPES_AFTER and self._use_shapes:
            self._shapes = self._shape_cache()
            if self.fold_paths:  # a new located shape decided through its folded shape (foldshape.py: the same)
                self._shapes.fold = PathFold(self._shape_cache())
        found = self.plain_match(text)
        return None if found is None else (found[1], found[2])

    def _shape_cache(self) -> ShapeCache:
        return ShapeCache(self._aware, self._aware_runs, frozenset(self._index.contained))

    def plain_match(self, text: str, skip: frozenset[int] = frozenset()) -> tuple[int, Rule, RuleMatch] | None:
        """(unit, rule, match) of the first rule that matches, trying none of the units in `skip`.

        Units number the rules as they are tried: the lead steps (prepare.lead_machinery), then rules[lead:].
        """
        self.held = None
        low = text.lower()
        index = self._index
        held = None
        selected: list[int] | None = None  # the rules the line's literals select, where the index answered first
        located = index.compiled()  # not before: a log with few error lines should not pay for compiling it (~25 ms)
        if located:
            # every prefilter literal (the lead steps' too) and necessary string `low` holds (located.py)
            held, selected = self._located.search(text, low)
        lead = self._lead_first(text, skip, held)
        if lead is not None:
            return lead
        if held is None or selected is None:
            held, selected = index.answer(low)
        steps = self._lead_steps
        rules = self._rules
        plain = text.isascii()
        searchers = self._searchers
        first = len(steps) - self._lead
        cut, starts = (self._located.cut, self._located.starts) if located else (0, frozenset())
        if plain:
            self.held = held
            selected = self._worth_trying(held, selected)
        for i in selected:
            if skip and first + i in skip:
                continue
            entry = searchers[i]
            if entry is _UNKNOWN:  # compiled when the rule is first tried: start-up stays cheap
                entry = self._searcher(i)
            m = _gated_search(entry, rules[i], text, low, plain, cut if i in starts else 0)
            if m is not None:
                return first + i, rules[i], m
        return None

    def _worth_trying(self, held: frozenset[str], selected: list[int]) -> list[int]:
        """The rules of `selected` (those an ASCII line's literals select) whose necessary strings it holds (the others
        cannot match), kept per `held`, its index strings, which decide both; new lines find few such sets."""
        worth = self._worth.get(held)
        if worth is None:
            factors = self._factors
            worth = [i for i, need in zip(selected, map(factors.__getitem__, selected))
                     if need is None or _holds_all(need, held)]
            if len(self._worth) >= MAX_SHAPES:
                self._worth.clear()
            self._worth[held] = worth
        return worth

    def _searcher(self, i: int) -> tuple[Any, Any, Any]:
        gate_source = self._gate_sources[i]
        low_source, low_gate = self._lowered[i]
        # the gates led by the characters their matches start with (keygate.charset_led): read as yes or no only
        led, low_led = self._led[i] if self._led else led_gates([gate_source], [(low_source, low_gate)])[0]
        entry = (
            compile_gate((led, gate_source[1]) if gate_source is not None and led is not None else None),
            compile_lowered(low_led, gate_source[1]) if gate_source is not None else None,
            compile_lowered(low_source, self._rules[i].flags),
        )
        self._searchers[i] = entry
        return entry

    def _rule_match(self, i: int, text: str, low: str) -> Hit | None:
        """Whether rules[i] matches `text` (`low`: text.lower()), tested as plain_match() tests it."""
        plain = text.isascii()
        need = self._factors[i] if plain else None
        # one line, a few rules: `in` on it (the index's search pays for itself over dozens of rules, not here)
        if need is not None and not all(any(f in low for f in one) for one in need):
            return None
        entry = self._searchers[i]
        if entry is _UNKNOWN:
            entry = self._searcher(i)
        rule = self._rules[i]
        m = _gated_search(entry, rule, text, low, plain)
        return None if m is None else (rule, m)

    def unit_match(self, unit: int, text: str, low: str) -> Hit | None:
        """Whether one unit of plain_match() matches `text` (`low`: text.lower()), as plain_match() tries it."""
        steps = self._lead_steps
        if unit < len(steps):
            rule, group, find = steps[unit]
            if group is None and not _prefilter_holds(rule, low):
                return None  # as _lead_first skips the step
            return self._step_match(rule, group, find, text)
        i = unit - len(steps) + self._lead
        rule = self._rules[i]
        if not _prefilter_holds(rule, low):
            return None  # the literal index would not have selected it
        return self._rule_match(i, text, low)

    def held_unit(self, unit: int, text: str, low: str, held: frozenset[str], cut: int) -> Hit | None:
        """Whether one unit of plain_match() matches an ASCII located line as plain_match() tries it there, where
        the line's literals select it (a lead step: its prefilter passed): `held`, the index's strings the line
        holds, and `cut`, its location's path (located.py; `_located.starts` is the line's)."""
        steps = self._lead_steps
        if unit < len(steps):
            rule, group, find = steps[unit]
            return self._step_match(rule, group, find, text)
        i = unit - len(steps) + self._lead
        need = self._factors[i]
        if need is not None and not _holds_all(need, held):
            return None
        entry = self._searchers[i]
        if entry is _UNKNOWN:
            entry = self._searcher(i)
        rule = self._rules[i]
        m = _gated_search(entry, rule, text, low, True, cut if i in self._located.starts else 0)
        return None if m is None else (rule, m)

    def _match_excluding(self, text: str, header: Rule) -> Hit | None:
        """Like match(), for the joined text of a block: skipping block headers (the one that opened it too)."""
        low = text.lower()
        for rule in self._rules:
            if rule is header or rule.block is not None:
                continue
            if rule.prefilter and not any(lit in low for lit in rule.prefilter):
                continue
            m = rule.regex.search(text)
            if m:
                return rule, m
        return None

    def _own_message(self, text: str) -> bool:
        """Whether a line reads as a message of its own (a specific rule, or an exception such as a warning)."""
        hit = self.match(text)
        return hit is not None and not hit[0].generic


def _prefilter_holds(rule: Rule, low: str) -> bool:
    """Whether the lowered line holds one of the rule's prefilter literals (a rule without any always passes)."""
    return not rule.prefilter or any(lit in low for lit in rule.prefilter)
