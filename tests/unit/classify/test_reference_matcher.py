"""The matcher's fast paths against a straightforward reference: every rule in priority order, its prefilter, its
own regex searched on the line. Same decision, same spans, on every rule's examples planted in generated
error-dense logs, on the fixture logs and on the lines with their case changed at random; the lowered patterns
(casefold.py) and the literal index (prepare.LiteralIndex) on their own too."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from legacy_gpu_patch.classify.casefold import LowMatch, lowered
from legacy_gpu_patch.classify.classifier import Classifier, Rule, classify_bytes, load_rules, normalize
from legacy_gpu_patch.classify.prepare import LiteralIndex, prepared
from legacy_gpu_patch.classify.shapes import digit_contexts

BENCH = Path(__file__).resolve().parents[3] / "bench"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def reference(text: str) -> Any:
    """The decision read off the rules one by one: None (no rule, or an exception), else rule id and all spans."""
    low = text.lower()
    for rule in load_rules().rules:
        if rule.prefilter and not any(lit in low for lit in rule.prefilter):
            continue
        m = rule.regex.search(text)
        if m:
            return None if rule.exception else (rule.id, [m.span(g) for g in range(m.re.groups + 1)])
    return None


def decision(hit: tuple[Rule, Any] | None, text: str) -> Any:
    if hit is None or hit[0].exception:
        return None
    rule, m = hit
    spans = [m.span(g) for g in range(rule.regex.groups + 1)]
    groups = [m.group(g) for g in range(rule.regex.groups + 1)]
    assert groups == [None if s < 0 else text[s:e] for s, e in spans]  # the group text is the line's own
    return rule.id, spans


def example_lines() -> list[str]:
    return [t for r in load_rules().rules for t in (*r.examples, *r.not_examples)]


def fixture_lines() -> list[str]:
    lines = []
    for path in sorted(FIXTURES.rglob("*.log")) + sorted(FIXTURES.rglob("*.corpus")):
        lines += path.read_text("utf-8", "replace").splitlines()
    return [t for t in lines if t.strip()]


def recase(text: str, rnd: random.Random) -> str:
    return "".join(ch.upper() if rnd.random() < 0.5 else ch.lower() for ch in text)


def dense_log(rnd: random.Random, lines: int = 6000) -> list[str]:
    """A failing build: progress lines, the bench's error shapes with random paths, and every rule's examples
    planted at random offsets (nothing after some of them)."""
    sys.path.insert(0, str(BENCH))
    try:
        import classify_logs
    finally:
        sys.path.remove(str(BENCH))
    examples = example_lines()
    out = []
    for i in range(lines):
        d, n = rnd.choice(classify_logs.DIRS), rnd.choice(classify_logs.NAMES)
        if i % 3 == 0:
            out.append(rnd.choice(classify_logs.DENSE_ERRORS).format(
                p=f"/src/{d}/{n}.cpp", l=rnd.randint(1, 9999), c=rnd.randint(1, 99), i=rnd.randint(1, 10**6), n=n))
        elif i % 7 == 0:
            out.append(rnd.choice(examples))
        else:
            out.append(f"[{i}/9999] Building CXX object {d}/{n}.cpp.o")
    return out


def test_the_matcher_decides_every_line_as_the_reference_does() -> None:
    rnd = random.Random(12)
    texts = [normalize(t) for t in (*example_lines(), *fixture_lines(), *dense_log(rnd))]
    texts += [recase(t, rnd) for t in texts[:3000]]
    shaped, plain = Classifier(), Classifier(use_shapes=False)
    for text in texts:
        want = reference(text)
        assert decision(plain.match(text), text) == want, text
        assert decision(shaped.match(text), text) == want, text  # the shape cache starts after 64 lines


def test_findings_on_a_dense_log_with_every_rule_planted_are_the_reference_findings() -> None:
    rnd = random.Random(5)
    data = ("\n".join(dense_log(rnd, 4000)) + "\n").encode()
    fast = classify_bytes(data)
    slow = classify_bytes(data, use_shapes=False, accelerate=False)
    assert [f.__dict__ for f in fast] == [f.__dict__ for f in slow]
    assert {f.rule for f in fast} >= {"compiler-error", "undefined-reference", "cusparse-removed"}


@pytest.mark.parametrize("which", ["rule", "gate"])
def test_lowered_patterns_match_lowercased_text_at_the_same_spans(which: str) -> None:
    rnd = random.Random(3)
    prep = prepared(load_rules())
    texts = [normalize(t) for t in (*example_lines(), *fixture_lines())]
    texts = [t for t in texts if t.isascii()]
    texts += [recase(t, rnd) for t in texts]
    checked = 0
    for rule, gate, (low_rule, low_gate) in zip(load_rules().rules, prep.gates, prep.lowered):
        if which == "rule":
            original, source = rule.regex, low_rule
        elif gate is not None:
            original, source = re.compile(*gate), low_gate
        else:
            continue
        if not original.flags & re.IGNORECASE:
            assert source is None
            continue
        assert source is not None, rule.id  # every case-insensitive pattern of the shipped rules is lowered
        low = re.compile(source, original.flags & ~re.IGNORECASE)
        checked += 1
        for text in texts:
            m, lm = original.search(text), low.search(text.lower())
            assert (m is None) == (lm is None), (rule.id, text)
            if m is not None and lm is not None:
                got = LowMatch(lm, low, text)
                assert [got.span(g) for g in range(original.groups + 1)] == [
                    m.span(g) for g in range(original.groups + 1)], (rule.id, text)
                assert got.groupdict() == m.groupdict() and got.groups() == m.groups()
    assert checked > 40


@pytest.mark.parametrize("pattern, text", [
    (r"[A-Z]+_ERROR", "x CUDA_ERROR y"),
    (r"[^a-z]x", "1X"),
    (r"(?P<q>ab)c(?P=q)", "ABcab"),
    (r"\bfoo\B", "FOOD"),
    (r"caf[eé]", "CAFE"),
    (r"(a|b)?c{2,3}?d*?(?=e)(?!f)(?<=d)(?<!x)e", "BCCDDE"),
    (r"(?:ab|ac|ad)+z", "ABACz"),
])
def test_lowered_handwritten_patterns(pattern: str, text: str) -> None:
    source = lowered(pattern, re.IGNORECASE)
    assert source is not None
    m = re.search(pattern, text, re.IGNORECASE)
    lm = re.search(source, text.lower())
    assert m is not None and lm is not None
    assert [m.span(g) for g in range(m.re.groups + 1)] == [lm.span(g) for g in range(m.re.groups + 1)]


@pytest.mark.parametrize("pattern, flags", [
    (r"abc", 0),  # case-sensitive: nothing to lower
    (r"a(?-i:b)c", re.IGNORECASE),  # a scoped flag
    (r"a b", re.IGNORECASE | re.VERBOSE),
])
def test_patterns_that_are_not_lowered(pattern: str, flags: int) -> None:
    assert lowered(pattern, flags) is None


def test_the_literal_index_selects_the_rules_whose_literals_a_line_holds() -> None:
    rules = load_rules()
    index = LiteralIndex(rules)  # the trie (after its first PLAIN_LINES lines)
    plain = LiteralIndex(rules)  # the strings tested one by one
    plain._plain_left = 1 << 30
    gated = dict(zip(rules.literals, rules.literal_rules))
    rnd = random.Random(9)
    # lines made of overlapping literal pieces, and real lines
    pieces = [lit[: rnd.randint(1, len(lit))] for lit in rules.literals] + list(rules.literals)
    texts = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 8))) for _ in range(3000)]
    texts += [normalize(t).lower() for t in (*example_lines(), *fixture_lines())]
    for low in texts:
        want = set(rules.always)
        for lit in rules.literals:
            if lit in low:
                want.update(gated[lit])
        assert index.rules_for(low) == sorted(want) == plain.rules_for(low), low
        assert index.holds(index.found(low)) == plain.holds(plain.found(low)) == {
            s for s in index.contained if s in low}


@pytest.mark.parametrize("pattern, prefilter, runs", [
    # a branch's alternative right after a run of literals: its first run joined after that run
    (r"cusparse(?:csr2csc|mv)\w*", (), ("cusparsecsr2csc",)),
    (r"error MSB(?:3721|3073)\b", ("error",), ("error msb3", "error msb3721", "error msb3073")),  # sre moves the 3 out
    (r"error C(?:2672|2665)\b", ("c2665",), ("error c26", "error c2672", "error c2665", "c2665")),
    (r"int(8|16)_t", (), ("int8", "int16")),  # a group's body: joined too
    (r"x(?:\w2|3)", (), ("2", "x3")),  # an alternative that starts with a class: its later run alone
    (r"a(?:b(?:c1|d2))", (), ("abc1", "abd2")),  # sre writes it ab(?:c1|d2)
    (r"a(b(c1|d2)|e3)", (), ("abc1", "abd2", "ae3")),  # groups: joined through each
    (r"cusparse(?:S|D)?(csrmm2?)", (), ("csrmm2",)),  # after a repeat: nothing before it to join
    (r"LNK1181: cannot open", ("lnk1181",), ("lnk1181: cannot open", "lnk1181")),
    (r"sm_[0-5]\d", (), None),  # a class with some digits
    (r"(?P<a>\w)(?P=a)", (), None),  # a back-reference
    (r"[^7]x", (), None),
    (r"\d+ errors", (), ()),  # blind
    (r"cusparse[SD]csrmm2?\b", (), ("csrmm2",)),  # an optional digit after literals: they and it together
    (r"(?i)Half2+x", (), ("half2",)),
    (r"\w2?", (), ("2",)),  # no literal before it: the digit alone
])
def test_digit_contexts(pattern: str, prefilter: tuple[str, ...], runs: tuple[str, ...] | None) -> None:
    assert digit_contexts(re.compile(pattern), prefilter) == runs


@pytest.mark.parametrize("first, second", [
    ('x.cu(1): error: identifier "cusparseScsr3csc" is undefined',  # no run: the unit is skipped for the shape
     'x.cu(1): error: identifier "cusparseScsr2csc" is undefined'),  # ...and this line holds `csr2csc`
    ("x.cpp:1:1: error MSB3722: nothing", "x.cpp:1:1: error MSB3721: nothing"),
    # `665` in the line but not after `error C2`: the joined run is not held, the shape's decision holds
    ("x.cpp:12:3: error: no matching function for call to 'launch4665(double*, float)'",
     "x.cpp:12:3: error: no matching function for call to 'launch4672(double*, float)'"),
    ("x.cpp:12:3: error: no matching function for call to 'launch4665(double*, float)'",
     "x.cpp(12): error C2665: 'launch4665': no overloaded function could convert all the argument types"),
    ("x.cpp(12): error C2666: 'launch': no overloaded function",
     "x.cpp(12): error C2665: 'launch': no overloaded function"),
    ("/usr/bin/ld: cannot find -lcusparse9", "LINK : fatal error LNK1181: cannot open input file 'x.lib'"),
    # a 2 elsewhere in the line, not after csrmm: the shape's decision holds; then one with csrmm2
    ('x2.cu(1): error: identifier "cusparseScsrmm7" is undefined',
     'x7.cu(1): error: identifier "cusparseScsrmm2" is undefined'),
])
def test_a_line_that_holds_a_digit_run_is_tried_where_its_shape_skips_the_rule(first: str, second: str) -> None:
    c = Classifier()
    for _ in range(70):  # past SHAPES_AFTER: the shape cache decides
        c.match(normalize("[1/2] Building CXX object a.o"))
    for text in (first, second, first, second):
        text = normalize(text)
        assert decision(c.match(text), text) == reference(text), text


def test_a_full_shape_cache_starts_again_with_the_same_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    from legacy_gpu_patch.classify import match as match_mod
    from legacy_gpu_patch.classify import shapes as shapes_mod

    monkeypatch.setattr(shapes_mod, "MAX_SHAPES", 16)
    monkeypatch.setattr(match_mod, "MAX_SHAPES", 16)
    data = ("\n".join(dense_log(random.Random(8), 3000)) + "\n").encode()
    c = Classifier()
    c.feed(data)
    small = c.close()
    assert c._shapes is not None and len(c._shapes.entries) <= 16
    assert [f.__dict__ for f in small] == [f.__dict__ for f in classify_bytes(data, use_shapes=False)]


def test_lines_of_one_shape_with_and_without_csrmm2_are_decided_as_the_reference() -> None:
    """`csrmm2?`: the shape cache re-runs the rule only on a line that holds `csrmm2` (shapes.digit_contexts);
    lines of the same shapes holding a 2 elsewhere, csrmm2, csrmm22 or csrmm12 are each decided as the reference."""
    rnd = random.Random(21)
    forms = [
        'x{a}.cu({b}): error: identifier "cusparseScsrmm{c}" is undefined',
        "x.cpp:{a}:{b}: error: 'cusparseDcsrmm{c}' was not declared in this scope",
        "lib{a}.so: undefined reference to `cusparseScsrmm{c}'",
        "x.cu:{b}: warning: cusparseZcsrmm{c} is deprecated ({a})",
    ]
    tails = ["", "2", "3", "22", "12", "21", "29", "92"]
    c = Classifier()
    for _ in range(70):  # past SHAPES_AFTER: the shape cache decides
        c.match(normalize("[1/2] Building CXX object a.o"))
    seen = set()
    for _ in range(3000):
        text = normalize(rnd.choice(forms).format(a=rnd.randint(1, 99), b=rnd.randint(10, 99), c=rnd.choice(tails)))
        want = reference(text)
        assert decision(c.match(text), text) == want, text
        seen.add(want[0] if want else None)
    assert c._shapes is not None and {"cusparse-csrmm2-removed", "cusparse-removed"} <= seen
