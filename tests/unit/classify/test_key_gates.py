"""A rule's key gate (its key groups searched alone) finds a match in every line the rule's regex matches."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from legacy_gpu_patch.classify.classifier import load_rules, normalize
from legacy_gpu_patch.classify.keygate import _group_source, key_gate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def corpus_lines() -> list[str]:
    rules = load_rules().rules
    lines = [t for r in rules for t in (*r.examples, *r.not_examples)]
    for path in sorted(FIXTURES.rglob("*.log")):
        lines += path.read_text("utf-8", "replace").splitlines()
    lines = [normalize(t) for t in lines]
    # each line with its identifiers' case and its words shuffled: near misses of every rule
    rnd = random.Random(11)
    more = []
    for t in lines[:3000]:
        words = t.split(" ")
        rnd.shuffle(words)
        more += [" ".join(words), t.swapcase(), t.upper(), t.lower()]
    return lines + more


def test_every_gated_rule_matches_only_where_its_gate_does() -> None:
    lines = corpus_lines()
    gated = 0
    for rule in load_rules().rules:
        gate = key_gate(rule.regex)
        if gate is None:
            continue
        gated += 1
        for text in lines:
            if rule.regex.search(text):
                assert gate.search(text), (rule.id, text)
    assert gated > 50  # the identifier rules have gates


def test_the_identifier_rules_have_gates_that_reject_other_errors() -> None:
    rules = {r.id: r for r in load_rules().rules}
    other = "/src/a/SparseCUDABlas.cpp:12:3: error: 'sym12' was not declared in this scope"
    for rid in ("cuda-api-removed", "cuda-constant-removed", "cusparse-removed"):
        gate = key_gate(rules[rid].regex)
        assert gate is not None and gate.search(other) is None, rid


@pytest.mark.parametrize("pattern, gated", [
    (r"error: (?P<key>cuda\w+)", True),
    (r"a (?P<key>x+)|b (?P<key2>y+)", True),
    (r"a (?P<key>x+)|b y", False),  # an alternative without a key group
    (r"a (?P<key>x+)?", False),  # an optional key group
    (r"(?i:a (?P<key>x+))", False),  # a scoped flag: the group alone would lose it
    (r"(?P<q>['\"])(?P<key>\w+)(?P=q)", False),  # a back-reference
    (r"(?:pre|fix) (?P<key>[)\]]+x)", True),
    (r"no key (\w+)", False),
])
def test_which_patterns_get_a_gate(pattern: str, gated: bool) -> None:
    assert (key_gate(re.compile(pattern)) is not None) == gated


def test_group_source_reads_classes_and_escapes() -> None:
    assert _group_source(r"a(?P<key>[)\]](\)|b))c", "key") == r"[)\]](\)|b)"
    assert _group_source(r"(?P<key>[]x)])", "key") == "[]x)]"
    assert _group_source(r"(?P<other>x)", "key") is None
