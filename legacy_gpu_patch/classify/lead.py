"""The lead steps of the matcher: the rules of the lead files (anchored exceptions: command echoes, progress lines,
warnings), tried first, one by one (runs of exceptions without prefilter merged into one regex: prepare.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from legacy_gpu_patch.classify.shapes import MAX_SHAPES

if TYPE_CHECKING:  # pragma: no cover - typing only (match.py imports this module)
    from legacy_gpu_patch.classify.prepare import _Step
    from legacy_gpu_patch.classify.rules import Rule
    from legacy_gpu_patch.classify.shapes import RuleMatch

__all__ = ["LeadSteps"]


class LeadSteps:
    """The lead half of match.Matcher (which sets `_lead_steps` and `_lead_orders`)."""

    _lead_steps: list[_Step]
    _lead_orders: dict[frozenset[str], tuple[int, ...]]  # _lead_held's steps per index answer

    @staticmethod
    def _step_match(rule: Rule, group: Any, find: Any, text: str) -> tuple[Rule, re.Match[str]] | None:
        """A lead step's regex on `text`, its prefilter (where it has one) already passed."""
        if group is not None:
            # consecutive exceptions without prefilter, as one regex: which one matched does not matter
            gm = find(text)
            if gm:
                for idx, member in group:
                    if gm.start(idx) >= 0:
                        return member, gm
            return None
        m = find(text)
        return (rule, m) if m else None

    def _lead_match(self, text: str) -> tuple[Rule, RuleMatch] | None:
        found = self._lead_first(text, frozenset(), None)
        return None if found is None else (found[1], found[2])

    def _lead_first(self, text: str, skip: frozenset[int], held: frozenset[str] | None
                    ) -> tuple[int, Rule, RuleMatch] | None:
        """The first lead step that matches; `held`: the index's strings the lowered text holds (None: unknown,
        each step's prefilter literals are then tested with `in`)."""
        if held is not None:
            return self._lead_held(text, skip, held)
        low = None
        for j, (rule, group, find) in enumerate(self._lead_steps):
            if skip and j in skip:
                continue
            if group is None and rule.prefilter:
                # the prefilter tested inline, not through _prefilter_holds: most steps stop at it (a call saved on
                # the hot path; unit_match, off it, calls the function)
                if low is None:
                    low = text.lower()
                for lit in rule.prefilter:
                    if lit in low:
                        break
                else:
                    continue
                m = find(text)  # the prefilter passed: what _step_match would do
                if m:
                    return j, rule, m
                continue
            hit = self._step_match(rule, group, find, text)
            if hit is not None:
                return j, hit[0], hit[1]
        return None

    def _lead_held(self, text: str, skip: frozenset[int], held: frozenset[str]) -> tuple[int, Rule, RuleMatch] | None:
        """_lead_first where the index's answer is known: the steps whose prefilter it passes, one list per answer
        (a new shape's ~25 prefilter tests are then a dict look-up; an error-dense log has a few dozen answers)."""
        steps = self._lead_steps
        order = self._lead_orders.get(held)
        if order is None:
            if len(self._lead_orders) >= MAX_SHAPES:
                self._lead_orders.clear()
            order = self._lead_orders[held] = tuple(
                j for j, (rule, group, _) in enumerate(steps)
                if not (group is None and rule.prefilter and held.isdisjoint(rule.prefilter)))
        for j in order:
            if skip and j in skip:
                continue
            rule, group, find = steps[j]
            hit = self._step_match(rule, group, find, text)
            if hit is not None:
                return j, hit[0], hit[1]
        return None
