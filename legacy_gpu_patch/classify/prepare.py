"""What the matcher reads out of a rule set's patterns, once per rule set, kept in the cache with it (rulecache.py).

Reading a pattern (re's parser) costs about what compiling it does; the matcher reads every pattern for:
the literal index (which rules a line's literals select), the lead plan (which lead exceptions run as one regex,
which patterns are anchored, the raw fast path), each rule's necessary strings (fastpath.necessary_factors) and key
gate (keygate.py), and which rules can tell digits apart (shapes.py). For the shipped rules all of it is worked out
when their cache is written and read back at the next start with them; for other rule files, when first needed.
Only compiling is left to each run (and only for the patterns it reaches).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from legacy_gpu_patch.classify.casefold import lowered
from legacy_gpu_patch.classify.fastpath import _RAW_PREFIX_FIRST, _anchored, necessary_factors
from legacy_gpu_patch.classify.keygate import key_gate, led_gates
from legacy_gpu_patch.classify.literalindex import LiteralIndex
from legacy_gpu_patch.classify.normalize import RAW_PREFIX_RE
from legacy_gpu_patch.classify.rules import Rule, RuleSet
from legacy_gpu_patch.classify.shapes import digit_blind, digit_contexts, literals_blind
from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["LeadStep", "LiteralIndex", "Prepared", "lead_machinery", "prepared"]

_RAW_SKIP_IDS = ("command-echo", "include-chain", "progress-line", "cmake-status", "test-result-line")


@dataclass(frozen=True)
class LeadStep:
    """One step of the lead rules: one rule, or a run of exceptions without prefilter merged into one regex."""

    rules: tuple[int, ...]  # the rule (indices into RuleSet.rules), or the members of the run
    pattern: str | None  # the merged regex, each member in a group of its own; None: the rule's own regex
    groups: tuple[int, ...]  # each member's group number in the merged regex
    anchored: bool  # run with match(), not search() (fastpath._anchored)


@dataclass(frozen=True)
class Prepared:
    index: LiteralIndex
    lead: tuple[LeadStep, ...]
    raw_skip: bytes | None  # the raw fast path's pattern (Matcher._raw_skipped)
    factors: tuple[Optional[tuple[frozenset[str], ...]], ...]  # per rule, necessary strings
    gates: tuple[Optional[tuple[str, int]], ...]  # per rule, its key gate's (pattern, flags)
    aware: tuple[tuple[int, tuple[str, ...]], ...]  # digit-aware units (lead steps, then rules[lead:]), literals
    raw_blind: bool = False  # the raw fast path cannot tell digits apart: its decision is one per line shape
    lowered: tuple[tuple[Optional[str], Optional[str]], ...] = ()  # per rule, pattern and gate lowered (casefold.py)
    # per digit-aware unit, the literal runs through which alone it tells digits apart (shapes.digit_contexts)
    aware_runs: tuple[tuple[int, Optional[tuple[str, ...]]], ...] = ()
    # per rule, what a match starting inside a location's path holds there, its pattern's and its lowered twin's
    # (pathcontext.start_contexts; None: not proven, the whole line is searched; () for a rule set not shipped)
    starts: tuple[Optional[tuple[str, ...]], ...] = ()
    led: tuple[tuple[Optional[str], Optional[str]], ...] = ()  # per rule, `gates` and lowered as searched (led_gates)
    # the raw fast path's regex finds a match in a located line alike for every line of its path (pathstart.py)
    raw_path_decides: bool = False


def _lead_plan(rules: Sequence[Rule], lead: int) -> tuple[LeadStep, ...]:
    """The lead rules in order, runs of two or more exceptions without prefilter merged into one regex. Each member
    sits in a named group, so that the merged regex says its number without the member compiled alone."""
    steps: list[LeadStep] = []
    run: list[int] = []

    def close_run() -> None:
        if len(run) >= 2:
            parts = []
            for k, i in enumerate(run):
                scoped = f"(?i:{rules[i].pattern})" if rules[i].flags & re.IGNORECASE else rules[i].pattern
                parts.append(f"(?P<_lead{k}>{scoped})")
            try:
                merged = re.compile("|".join(parts))
            except re.error:  # duplicate group names across members: keep them apart
                pass
            else:
                groups = tuple(merged.groupindex[f"_lead{k}"] for k in range(len(run)))
                steps.append(LeadStep(tuple(run), merged.pattern, groups, _anchored(merged)))
                run.clear()
        steps.extend(LeadStep((i,), None, (), _anchored(rules[i].regex)) for i in run)
        run.clear()

    for i in range(lead):
        if rules[i].exception and not rules[i].prefilter:
            run.append(i)
        else:
            close_run()
            steps.append(LeadStep((i,), None, (), _anchored(rules[i].regex)))
    close_run()
    return tuple(steps)


def plain_units(rules: RuleSet, plan: Sequence[LeadStep]) -> list[tuple[str, int, tuple[str, ...]]]:
    """(pattern, flags, prefilter) of each unit as Matcher.plain_match numbers and runs it: each lead step (a merged
    run as lead_machinery compiles it, its members' flags scoped inside), then each rule past the lead."""
    units = [(rules.rules[s.rules[0]].pattern, rules.rules[s.rules[0]].flags, rules.rules[s.rules[0]].prefilter)
             if s.pattern is None else (s.pattern, 0, ()) for s in plan]
    return units + [(r.pattern, r.flags, r.prefilter) for r in rules.rules[rules.lead :]]


def _raw_skip(lead: Sequence[Rule]) -> bytes | None:
    """One bytes pattern for the raw fast path, or None where the rules do not allow it. Only exceptions preceded
    by exceptions alone qualify: whatever lead rule reads such a line first, it is not a finding."""
    parts = []
    for rule in lead:
        if not rule.exception:
            break
        src = rule.pattern
        if rule.id not in _RAW_SKIP_IDS or not src.startswith("^") or not src.isascii():
            continue
        group = b"(?i:" if rule.flags & re.IGNORECASE else b"(?:"
        parts.append(group + src[1:].encode() + b")")
    # the indentation once, before the alternation: its branches then start with a literal that sre tests first
    return b"[ \t]*(?:" + b"|".join(parts) + b")" if parts else None


def _raw_path_blind(skip: re.Pattern[bytes]) -> bool:
    """Whether Matcher._raw_skipped decides a line as it decides the line's shape: its regex and the prefixes it
    strips treat all digits alike, and the prefixes' first bytes hold all ten digits or none (its other tests look
    for digit-free strings and at the length)."""
    first = _RAW_PREFIX_FIRST
    uniform = first is None or len({d in first for d in b"0123456789"}) == 1
    return uniform and digit_blind(skip) and digit_blind(RAW_PREFIX_RE)


def prepare(rules: RuleSet) -> Prepared:
    """Everything Prepared holds, read from the patterns (every rule's pattern is compiled here)."""
    from legacy_gpu_patch.classify.pathcontext import start_contexts  # here: a start with the cache filled needs none
    from legacy_gpu_patch.classify.pathstart import path_decides

    plan = _lead_plan(rules.rules, rules.lead)
    gates = []
    for rule in rules.rules:
        gate = key_gate(rule.regex)
        gates.append((gate.pattern, gate.flags) if gate is not None else None)
    units = plain_units(rules, plan)
    aware = tuple(
        (u, pre) for u, (pattern, flags, pre) in enumerate(units)
        if not (literals_blind(pre) and digit_blind(re.compile(pattern, flags)))
    )
    raw_skip = _raw_skip(rules.rules[: rules.lead])
    factors = tuple(necessary_factors(r.regex) for r in rules.rules)
    lows = tuple((lowered(r.pattern, r.flags), lowered(*gate) if gate is not None else None)
                 for r, gate in zip(rules.rules, gates))
    return Prepared(
        # the lead rules' prefilter literals too: plain_match tests them against the index's answer (Matcher.held)
        index=LiteralIndex(rules, [*(s for need in factors if need for one in need for s in sorted(one)),
                                   *(lit for r in rules.rules[: rules.lead] for lit in r.prefilter)]),
        lead=plan,
        raw_skip=raw_skip,
        raw_blind=raw_skip is not None and _raw_path_blind(re.compile(raw_skip)),
        raw_path_decides=raw_skip is None or path_decides(re.compile(raw_skip)),
        factors=factors,
        gates=tuple(gates),
        aware=aware,
        aware_runs=tuple((u, digit_contexts(re.compile(units[u][0], units[u][1]), pre)) for u, pre in aware),
        lowered=lows,
        # read for the shipped rules only, whose reading is cached (~0.12 s): other rule files are read at every start
        starts=tuple(start_contexts(r.regex, low) for r, (low, _) in zip(rules.rules, lows)) if rules.shipped else (),
        led=led_gates(gates, lows),
    )


def _code() -> list[Path]:
    here = Path(__file__).resolve().parent
    return [here / name for name in ("prepare.py", "literalindex.py", "fastpath.py", "keygate.py", "shapes.py",
                                       "digitruns.py", "normalize.py", "casefold.py", "pathfold.py", "pathcontext.py",
                                       "pathstart.py")]


@lru_cache(maxsize=8)
def prepared(rules: RuleSet) -> Prepared:
    """prepare(rules); for the shipped rule set, from the cache (made when it is missing or stale)."""
    from legacy_gpu_patch.classify.rulecache import cached_for

    return cached_for(rules, "prepared", _code(), lambda: prepare(rules))


_Step = tuple[Rule, Optional[list[tuple[int, Rule]]], Callable[[str], Optional["re.Match[str]"]]]


@lru_cache(maxsize=8)
def lead_machinery(rules: RuleSet) -> tuple[re.Pattern[bytes] | None, list[_Step]]:
    """The raw fast-path regex and the lead steps (rule or stand-in, [(group, member)] or None, its matcher),
    compiled once per rule set (a Classifier is cheap to make)."""
    prep = prepared(rules)
    steps: list[_Step] = []
    for step in prep.lead:
        first = rules.rules[step.rules[0]]
        if step.pattern is None:
            regex = first.regex
            steps.append((first, None, regex.match if step.anchored else regex.search))
            continue
        merged = compile_re(step.pattern)
        members = [(g, rules.rules[i]) for g, i in zip(step.groups, step.rules)]
        stand_in = replace(first, pattern=merged.pattern, flags=merged.flags)
        steps.append((stand_in, members, merged.match if step.anchored else merged.search))
    raw = compile_re(prep.raw_skip) if prep.raw_skip is not None else None
    return raw, steps


def compile_gate(gate: tuple[str, int] | None) -> Any:
    return compile_re(gate[0], gate[1]) if gate is not None else None


def compile_lowered(source: str | None, flags: int) -> re.Pattern[str] | None:
    """A lowered pattern (casefold.py), compiled case-sensitively."""
    return compile_re(source, flags & ~re.IGNORECASE) if source is not None else None
