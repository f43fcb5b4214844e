"""A rule's key gate (its key groups searched alone) finds a match in every line the rule's regex matches."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from legacy_gpu_patch.classify.classifier import load_rules, normalize
from legacy_gpu_patch.classify.keygate import _group_source, charset_led, key_gate
from legacy_gpu_patch.classify.prepare import prepared

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


@pytest.mark.parametrize("pattern, tail", [
    (r"error: (?P<key>cuda\w+)\b", r"(?=[\W]|\Z)"),  # \b after a name: a non-word character or the end
    (r"(?P<key>\w+)(?:'|\s+is)", r"(?=['\s])"),
    (r"(?P<key>\w+)[ \t]*(?:is|was) undefined", r"(?=[\	\ iw])"),  # the spaces optional: their follow too
    (r"(?P<key>\w+)$", r"(?=[\n]|\Z)"),
    (r"(?P<key>\w+)(?=x)y", r"(?=[y])"),  # a look-ahead asks more than the next character: skipped
    (r"(?P<key>\w+)", ""),  # nothing after it: anything may follow the match
    (r"(?P<key>\w+)\s*", ""),  # may be followed by nothing
    (r"(?P<key>a\W?)\b", ""),  # may end in a non-word character: `\b` then asks a word one
    (r"(?P<key>\w+)[^x]", ""),  # a negated set: not worked out
    (r"(?:(?P<key>\w+),)+", ""),  # inside a repeat: what follows it is not worked out
])
def test_a_key_group_s_gate_holds_what_every_match_puts_after_it(pattern: str, tail: str) -> None:
    gate = key_gate(re.compile(pattern))
    assert gate is not None
    assert gate.pattern.endswith(")" + tail) if tail else "(?=" not in gate.pattern


def test_each_key_group_gets_the_look_ahead_of_its_own_alternative() -> None:
    gate = key_gate(re.compile(r"a (?P<key>x+) end|b (?P<key2>y+)"))
    assert gate is not None and gate.pattern == r"(?:x+)(?=[\ ])|(?:y+)"


def test_the_csrmm2_gate_rejects_a_longer_name_the_rule_cannot_match() -> None:
    rule = {r.id: r for r in load_rules().rules}["cusparse-csrmm2-removed"]
    gate = key_gate(rule.regex)
    assert gate is not None
    near = '/src/a.cpp(336): error: identifier "cusparseScsrmm65" is undefined'
    assert rule.regex.search(near) is None and gate.search(near) is None
    assert gate.search(near.replace("65", "2")) is not None


def test_a_charset_led_gate_matches_exactly_where_its_gate_does() -> None:
    """charset_led's form of every rule's gate (and of its lowered twin, on lowercased lines) against the gate
    itself on the corpus lines: the same yes or no on each; the slow gates are the ones rewritten."""
    lines = corpus_lines()
    prep = prepared(load_rules())
    rewritten = set()
    for rule, gate, (_, low_gate), (led_gate, led_low) in zip(load_rules().rules, prep.gates, prep.lowered,
                                                              prep.led):  # prep.led: what the matcher compiles
        if gate is None:
            assert (led_gate, led_low) == (None, None)
            continue
        forms = [(gate[0], gate[1], lines, led_gate)]
        if low_gate is not None:
            forms.append((low_gate, gate[1] & ~re.IGNORECASE, [t.lower() for t in lines if t.isascii()], led_low))
        for source, flags, texts, led in forms:
            assert led == charset_led(source, flags)
            if led == source:
                continue
            rewritten.add(rule.id)
            plain, fast = re.compile(source, flags), re.compile(led, flags)
            for text in texts:
                assert (plain.search(text) is None) == (fast.search(text) is None), (rule.id, text)
    assert {"cuda-api-removed", "uppercase-identifier-undefined", "cuda-compiler-not-found"} <= rewritten


@pytest.mark.parametrize("source, led", [
    (r"cuda\w+", False),  # a literal first: sre skips through the line already
    (r"(?:ab|cd)x", False),
    (r"[A-Z]\w+_", False),
    (r"_*[A-Z]+", True),
    (r"(?:cu|nv)[A-Z]", False),
    (r"(?:cuda|c\d)[A-Z]", False),
    (r"(?:[ab]x|cd)", True),
    (r"x?\w*", False),  # may match empty: no first set
    (r"^\w+", False),
    (r"$|x", False),
])
def test_which_gates_are_led_by_a_character_set(source: str, led: bool) -> None:
    out = charset_led(source, 0)
    assert (out != source) == led
    if led:
        plain, fast = re.compile(source), re.compile(out)
        for text in ("", "x", "ABC", "__A", "zz_q", "bx", "cd", "a\nbx", "\n", "-- _Z"):
            assert (plain.search(text) is None) == (fast.search(text) is None), text


def test_key_groups_of_one_source_are_one_alternative_with_the_union_of_their_look_aheads() -> None:
    """`key`, `key2` and `keyL` of a rule are often one name pattern: one search of it, not one per group."""
    gate = key_gate(re.compile(r"a (?P<key>x+)'|(?P<key2>x+) is|b (?P<key3>y+)"))
    assert gate is not None and gate.pattern == r"(?:x+)(?=['\ ])|(?:y+)"
    gate = key_gate(re.compile(r"a (?P<key>x+)'|(?P<key2>x+)"))  # one not worked out: no look-ahead for x+
    assert gate is not None and gate.pattern == r"(?:x+)"
