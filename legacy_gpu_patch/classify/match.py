"""Which rule decides a normalized line: the lead rules first, then the rules whose prefilter literals it holds.

The rules of the lead files (anchored exceptions: command echoes, progress lines, warnings) are tried first, one
by one (runs of them merged into one regex, see fastpath.py); then the prefilter literals present in the line
select the rules worth a regex among the rest, in priority order. The first rule whose regex matches decides;
exception rules (warnings about deprecated things, command echoes, ...) decide "no finding".
"""

from __future__ import annotations

import re

from legacy_gpu_patch.classify.fastpath import (
    _GLUE_FIRST,
    _MAY_BE_PREFIXED,
    MATCH_WINDOW,
    _lead_machinery,
    _strip_raw_prefixes,
)
from legacy_gpu_patch.classify.rules import Rule, RuleSet, load_rules

__all__ = ["Hit", "Matcher"]

Hit = tuple[Rule, "re.Match[str]"]


class Matcher:
    """The rule set of a classifier, with its fast paths."""

    def __init__(self, rules: RuleSet | None = None) -> None:
        self.rules = rules or load_rules()
        self._rules = self.rules.rules
        self._lead = self.rules.lead
        self._literals = self.rules.literals
        self._literal_rules = self.rules.literal_rules
        self._always = self.rules.always
        self._raw_skip, self._lead_steps = _lead_machinery(self._rules[: self._lead])

    def _raw_skipped(self, raw: bytes, ascii: bool = False) -> bool:
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
        # _LOCAL_RE rewrites a word only before a colon: most command echoes have none
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
        the rest, in priority order.
        """
        hit = self._lead_match(text)
        if hit is not None:
            return hit
        rules = self._rules
        low = text.lower()
        idx = set(self._always)
        for lit, gated in zip(self._literals, self._literal_rules):
            if lit in low:
                idx.update(gated)
        for i in sorted(idx):
            m = rules[i].regex.search(text)
            if m:
                return rules[i], m
        return None

    def _lead_match(self, text: str) -> Hit | None:
        low = None
        for rule, group, find in self._lead_steps:
            if group is not None:
                # consecutive exceptions without prefilter, as one regex: which one matched does not matter
                gm = find(text)
                if gm:
                    for idx, member in group:
                        if gm.start(idx) >= 0:
                            return member, gm
                continue
            if rule.prefilter:
                if low is None:
                    low = text.lower()
                for lit in rule.prefilter:
                    if lit in low:
                        break
                else:
                    continue
            m = find(text)
            if m:
                return rule, m
        return None

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
