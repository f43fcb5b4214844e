"""The shape cache (shapes.py) decides exactly what the plain path decides: same rule, same match, same findings.

Checked on the fixture logs and the rules' examples with their digits changed at random (lines of one shape), and
on generated error-dense and quiet logs, with the cache on from the first line against the cache off.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from legacy_gpu_patch.classify import match as match_mod
from legacy_gpu_patch.classify.classifier import Classifier, load_rules, normalize
from legacy_gpu_patch.classify.match import Matcher
from legacy_gpu_patch.classify.shapes import digit_blind, literals_blind, shape_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
DIGITS = re.compile(r"\d")


def fixture_lines() -> list[str]:
    rules = load_rules().rules
    lines = [t for r in rules for t in (*r.examples, *r.not_examples)]
    for path in sorted(FIXTURES.rglob("*.log")) + sorted(FIXTURES.rglob("*.corpus")):
        lines += path.read_text("utf-8", "replace").splitlines()
    return [normalize(t) for t in lines if t.strip()]


def redigit(text: str, rnd: random.Random) -> str:
    """The text with each digit replaced by a random one: a line of the same shape."""
    return DIGITS.sub(lambda m: str(rnd.randrange(10)) if m.group().isascii() else m.group(), text)


def as_plain(hit: Any) -> Any:
    if hit is None:
        return None
    rule, m = hit
    return rule.id, m.span(), m.groups(), m.groupdict(), m.re.pattern, [m.span(g) for g in range(m.re.groups + 1)]


@pytest.mark.parametrize("pattern, blind", [
    (r"error: '(?P<key>\w+)' was not declared", True),
    (r"\.cpp:\d+:\d+: error", True),
    (r"[^0-9a-z]x", True),
    (r".+\S*", True),
    (r"sm_35", False),  # a literal digit
    (r"compute_[0-5]\d", False),  # a class with some digits
    (r"[^5]", False),
    (r"(?P<q>\w)(?P=q)", False),  # a back-reference
    (r"(?i)uint8_t", False),
    (r"[\d_]+", True),
])
def test_which_patterns_are_digit_blind(pattern: str, blind: bool) -> None:
    assert digit_blind(re.compile(pattern)) is blind


def test_literals_with_digits_are_aware() -> None:
    assert literals_blind(("error", "not declared"))
    assert not literals_blind(("error", "c++17"))


def test_shape_writes_every_digit_zero_and_keeps_the_rest() -> None:
    assert shape_of("a.cpp:12:7: error: 'sym390' \u00e9") == "a.cpp:00:0: error: 'sym000' \u00e9".encode()


def test_a_blind_rule_matches_a_line_where_it_matches_its_shape() -> None:
    """The claim the cache rests on, rule by rule, on every fixture line and its re-digited twins."""
    rnd = random.Random(5)
    lines = fixture_lines()
    for rule in load_rules().rules:
        if not digit_blind(rule.regex):
            continue
        for text in lines:
            shape = shape_of(text).decode()
            a, b = rule.regex.search(text), rule.regex.search(shape)
            assert (a is None) == (b is None), (rule.id, text)
            if a is not None and b is not None:
                assert a.span() == b.span(), (rule.id, text)
            twin = redigit(text, rnd)
            assert (rule.regex.search(twin) is None) == (a is None), (rule.id, twin)


def test_the_cached_decision_equals_the_plain_one_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(match_mod, "SHAPES_AFTER", 0)
    rnd = random.Random(9)
    cached, plain = Matcher(), Matcher(use_shapes=False)
    lines = fixture_lines()
    # each line, then twins of its shape: the second and later ones are decided by the cache
    for text in lines:
        for variant in (text, redigit(text, rnd), redigit(text, rnd), text):
            assert as_plain(cached.match(variant)) == as_plain(plain.match(variant)), variant
    assert cached._shapes is not None and len(cached._shapes.entries) > 100


def dense_log(n: int, seed: int) -> bytes:
    """A failing build: error lines of a few shapes with changing names and numbers, between progress lines."""
    rnd = random.Random(seed)
    names = ["Sort", "Loss", "Conv", "SparseCUDABlas", "Half"]
    errors = [
        "/src/{d}/{n}.cpp:{l}:{c}: error: 'sym{i}' was not declared in this scope",
        '/src/{d}/{n}.cu({l}): error: identifier "cusparseScsrmm{i}" is undefined',
        "/src/{d}/{n}.cpp:{l}:{c}: error: 'uint{b}_t' was not declared in this scope",
        "/src/{d}/{n}.cpp:{l}:{c}: error: no matching function for call to 'launch{i}(double*, float)'",
        "/usr/bin/ld: {n}.o: in function `f{i}': undefined reference to `sym{i}'",
        "nvcc fatal   : Unsupported gpu architecture 'compute_{l}'",
        "nvcc fatal   : Unsupported gpu architecture 'sm_{b}'",
        "/src/{d}/{n}.cpp:{l}:{c}: error: 'nullptr_t' in namespace 'std' does not name a type; c++{b} needed",
        "make[{c}]: *** [CMakeFiles/x{i}.dir/build.make:{l}: x.o] Error {c}",
        "/src/{d}/{n}.cpp:{l}:{c}: warning: unused variable 'v{i}' [-Wunused-variable]",
    ]
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(rnd.choice(errors).format(
                d=rnd.choice(["aten", "c10/cuda"]), n=rnd.choice(names), l=rnd.randint(1, 999),
                c=rnd.randint(1, 9), i=rnd.randint(1, 99999), b=rnd.choice([8, 11, 14, 16, 17, 20, 32, 35, 64])))
        else:
            out.append(f"[{i}/99999] Building CXX object torch_cpu.dir/__/aten/{rnd.choice(names)}.cpp.o")
    return ("\n".join(out) + "\n").encode()


def classified(data: bytes, **kwargs: Any) -> tuple[list[dict[str, Any]], tuple[int, ...]]:
    c = Classifier(**kwargs)
    c.feed(data)
    found = c.close()
    return [f.to_dict() for f in found], (c.errors, c.warnings, c.dropped, c.lines)


@pytest.mark.parametrize("seed", [1, 2])
def test_findings_with_and_without_the_cache_are_identical(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    data = dense_log(20_000, seed)
    fixtures = b"".join(p.read_bytes() for p in sorted(FIXTURES.rglob("*.log")))
    for log in (data, fixtures + data, data + fixtures):
        want = classified(log, use_shapes=False)
        monkeypatch.setattr(match_mod, "SHAPES_AFTER", 0)
        assert classified(log) == want
        monkeypatch.setattr(match_mod, "SHAPES_AFTER", 1000)
        assert classified(log) == want
        assert want[1][0] > 1000  # the log is error-dense: the cache decides most of its lines


def test_the_raw_fast_path_decides_a_shape_as_each_of_its_lines() -> None:
    from test_classifier_fast_paths import edge_lines

    cached, plain = Matcher(), Matcher(use_shapes=False)
    assert cached._raw_shapes is not None and plain._raw_shapes is None  # the shipped rules allow it
    rnd = random.Random(13)
    raw_lines = [line.encode("utf-8", "replace") for line in edge_lines() + fixture_lines()]
    skipped = 0
    for raw in raw_lines:
        for variant in (raw, redigit(raw.decode("latin-1"), rnd).encode("latin-1"), raw):
            want = plain._raw_skipped(variant)
            assert cached._raw_skipped(variant) is want, variant
            skipped += want
    assert skipped > 100 and len(cached._raw_shapes) < len(raw_lines) * 2
