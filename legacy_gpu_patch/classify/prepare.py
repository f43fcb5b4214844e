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

from legacy_gpu_patch.classify.fastpath import _RAW_PREFIX_FIRST, _anchored, necessary_factors
from legacy_gpu_patch.classify.keygate import key_gate
from legacy_gpu_patch.classify.normalize import RAW_PREFIX_RE
from legacy_gpu_patch.classify.rules import Rule, RuleSet
from legacy_gpu_patch.classify.shapes import digit_blind, literals_blind

__all__ = ["LeadStep", "LiteralIndex", "Prepared", "lead_machinery", "prepared"]

GRAM = 3
# Letters by how common they are in build logs, commonest first: a literal is indexed by its gram of the rarest ones.
_COMMON = "etaoinsrcdlup/_-.:mh1f20 gbC"
_RAW_SKIP_IDS = ("command-echo", "include-chain", "progress-line", "cmake-status", "test-result-line")


def _rarity(gram: str) -> int:
    return sum(_COMMON.find(ch) if ch in _COMMON else len(_COMMON) + 1 for ch in gram)


class LiteralIndex:
    """Which rules (after the lead ones) a lowercased line may match, by the prefilter literals it holds.

    Testing each of ~300 literals with `in` costs ~100 us a line, which an error-dense log pays on every line. Each
    literal is indexed by one of its 3-character grams (its rarest); a line's grams select the few literals worth an
    `in`. Exact: a literal in the line has its gram in the line.
    """

    __slots__ = ("always", "by_gram", "gated", "grams", "short")

    def __init__(self, rules: RuleSet) -> None:
        self.always = tuple(sorted(rules.always))
        self.gated = dict(zip(rules.literals, rules.literal_rules))
        self.by_gram: dict[str, list[str]] = {}
        self.short: list[str] = []
        for lit in rules.literals:
            if len(lit) < GRAM:
                self.short.append(lit)
                continue
            gram = max((lit[i : i + GRAM] for i in range(len(lit) - GRAM + 1)), key=_rarity)
            self.by_gram.setdefault(gram, []).append(lit)
        # a set, so that a line's grams & it walks the line's ~70 grams, not the index's hundreds of keys
        self.grams = frozenset(self.by_gram)

    def rules_for(self, low: str) -> list[int]:
        """Indices (priority order) of the rules whose prefilter literals occur in `low` (or that have none)."""
        idx = set(self.always)
        gated = self.gated
        grams = {low[i : i + GRAM] for i in range(len(low) - GRAM + 1)}
        for gram in grams & self.grams:
            for lit in self.by_gram[gram]:
                if lit in low:
                    idx.update(gated[lit])
        for lit in self.short:
            if lit in low:
                idx.update(gated[lit])
        return sorted(idx)


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
    plan = _lead_plan(rules.rules, rules.lead)
    gates = []
    for rule in rules.rules:
        gate = key_gate(rule.regex)
        gates.append((gate.pattern, gate.flags) if gate is not None else None)
    units: list[tuple[str, int, tuple[str, ...]]] = []
    for step in plan:
        first = rules.rules[step.rules[0]]
        units.append((step.pattern or first.pattern, first.flags, first.prefilter))
    units += [(r.pattern, r.flags, r.prefilter) for r in rules.rules[rules.lead :]]
    aware = tuple(
        (u, pre) for u, (pattern, flags, pre) in enumerate(units)
        if not (literals_blind(pre) and digit_blind(re.compile(pattern, flags)))
    )
    raw_skip = _raw_skip(rules.rules[: rules.lead])
    return Prepared(
        index=LiteralIndex(rules),
        lead=plan,
        raw_skip=raw_skip,
        raw_blind=raw_skip is not None and _raw_path_blind(re.compile(raw_skip)),
        factors=tuple(necessary_factors(r.regex) for r in rules.rules),
        gates=tuple(gates),
        aware=aware,
    )


def _code() -> list[Path]:
    here = Path(__file__).resolve().parent
    return [here / name for name in ("prepare.py", "fastpath.py", "keygate.py", "shapes.py", "normalize.py")]


@lru_cache(maxsize=8)
def prepared(rules: RuleSet) -> Prepared:
    """prepare(rules); for the shipped rule set, from the cache (made when it is missing or stale)."""
    if not rules.shipped:
        return prepare(rules)
    from legacy_gpu_patch.classify.rulecache import cached, code_files

    sources = [Path(f) for f in rules.files] + code_files() + _code()
    return cached("prepared", sources, lambda: prepare(rules))


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
        merged = re.compile(step.pattern)
        members = [(g, rules.rules[i]) for g, i in zip(step.groups, step.rules)]
        stand_in = replace(first, pattern=merged.pattern, flags=merged.flags)
        steps.append((stand_in, members, merged.match if step.anchored else merged.search))
    raw = re.compile(prep.raw_skip) if prep.raw_skip is not None else None
    return raw, steps


def compile_gate(gate: tuple[str, int] | None) -> Any:
    return re.compile(gate[0], gate[1]) if gate is not None else None
