"""The path-folding proof (pathfold.py): a rule it calls path-blind matches a located line as its folded form.

Checked on every shipped rule's own regex, on the rules' examples and the fixture logs' lines given locations of
many paths (digits in them, `error`/`cusparse`/`.pyx` in them, one character, long), on hand-written patterns of
each kind the proof must refuse, and on lines whose start is not a location.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from legacy_gpu_patch.classify.classifier import load_rules, normalize
from legacy_gpu_patch.classify.pathfold import FOLD_TOKEN, fold, location_path, path_blind, string_path_blind

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
PATHS = ["a.c", "x.cpp", "/src/error/a.cpp", "aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cu",
         "/tmp/pip-build-12345/torch_0/csrc/cuda/cusparse.cu", "lib/error.h", "C99.c", "/b/undefined_reference.cc",
         "src/x.pyx", "src/ErrorHandling.cpp", "k.h", "/usr/include/c++/12/bits/stl_vector.h", ".cu",
         "../a-b+c/d_9.hpp", "0.cuh", "src/FOO_BAR.h", "x.cu.inl"]
TAILS = [":12:3: ", ":4: ", "(45): ", "(7,9): "]


def message_lines() -> list[str]:
    """Every rule's examples and the fixture logs' lines, normalized, each without its location if it has one."""
    lines = [t for r in load_rules().rules for t in (*r.examples, *r.not_examples)]
    for path in sorted(FIXTURES.rglob("*.log")) + sorted(FIXTURES.rglob("*.corpus")):
        lines += path.read_text("utf-8", "replace").splitlines()
    out = []
    for t in lines:
        text = normalize(t)
        cut = location_path(text)
        rest = text[cut:]
        out.append(re.sub(r"^(?::[0-9]+){1,2}: |^\([0-9]+(?:,[0-9]+)?\): ", "", rest) if cut else text)
    return [t for t in dict.fromkeys(out) if t.strip()]


def spans(m: Any, shift: int = 0) -> Any:
    if m is None:
        return None
    return tuple((a + shift, b + shift) if a >= 0 else (a, b) for a, b in m.regs)


def located(rnd: random.Random, rest: str) -> str:
    return rnd.choice(PATHS) + rnd.choice(TAILS) + rest


def test_fold_takes_the_location_path_only() -> None:
    token = len(FOLD_TOKEN)
    assert fold("/src/a_12.cpp:12:3: error: x") == (FOLD_TOKEN + ":12:3: error: x", len("/src/a_12.cpp") - token)
    assert fold("k.cu(45): error: y") == (FOLD_TOKEN + "(45): error: y", 4 - token)
    assert fold("a.h(4,5): error C2039") == (FOLD_TOKEN + "(4,5): error C2039", 3 - token)
    assert fold("a.c:7: undefined") == (FOLD_TOKEN + ":7: undefined", 3 - token)
    assert fold("x.cuh:3: y") == (FOLD_TOKEN + ":3: y", 5 - token)
    for not_located in ["error: x", "a.c: error", "a.c:12 error", "C:\\src\\a.c(3): error", "a b.c:1:2: x",
                        "/src/dir/:1:2: x", "a.c:1:2:x", "  a.c:1:2: x", "a.c(1:2): x", "", "a:1:2: x",
                        "a.o:1:2: x", "lib.so(3): x", "a.CPP:1:2: x"]:
        assert fold(not_located) == (not_located, 0), not_located


@pytest.mark.parametrize(("pattern", "blind"), [
    (r"error: '(\w+)' was not declared", True),
    (r"\berror\b: (?P<key>\w+)", True),
    (r"undefined reference to `(?P<key>[^']+)'", True),
    (r": error: x", True),
    (r"(?:foo|bar) (x)", True),
    (r"(?:foo|bar)+ (x)", True),  # a repeat read to its fixed point: `foo` in a path is followed by `:`
    (r"\d+ errors? generated", True),  # a digit run then a space: in a path, a digit run ends at `:`
    (r"^error: command (x)|^foo bar", True),  # anchored where the path is: matches no located line
    (r"(?m): x|^error: ", True),
    (r"^(?=.*\berror\b).*?foo", False),  # reads the path (`error` in it) and starts at 0
    (r"\S+:\d+: error", False),  # a location pattern: matches from inside the path
    (r"(?<=x)error: a", False),  # looks back
    (r"cpp", False),  # matches inside a path
    (r"[a-z]+ error: x", True),  # letters in a path are followed by PATH characters or `:`, never a space
    (r"[a-z]+:? *x", False),  # truly aware: `ax` of `/src/ax.c` matches it
    (r"(?:ab){70,} x", False),  # a repeat count beyond what is followed
    (r"\w+:\d", False),  # the path's end, its colon and line
    (r"\w*\(\d", False),  # MSVC's location
    (r"(?i:\u212a)", False),  # the Kelvin sign matches the k of a path case-insensitively
    (r"(?-i:\u212a)", True),  # not case-insensitively
    (r"\u200b error", True),
    (r"(a)?\1 error", False),  # a back-reference: not followed
    (r"", False),  # the empty match at 0 starts in the path
])
def test_proof_on_hand_written_patterns(pattern: str, blind: bool) -> None:
    regex = re.compile(pattern, re.IGNORECASE)
    assert path_blind(regex) is blind
    if not blind:
        return
    rnd = random.Random(pattern)
    for rest in ["error: 'sym' was not declared", "foo bar x", "error: command x", "2 errors generated",
                 ": error: x", "x"]:
        for _ in range(20):
            line = located(rnd, rest)
            folded, shift = fold(line)
            assert spans(regex.search(line)) == spans(regex.search(folded), shift), line


def test_strings_that_can_sit_in_a_path() -> None:
    assert string_path_blind([": error", " undefined reference", "error: "])
    assert not string_path_blind(["error"])
    assert not string_path_blind([".pyx:"])  # a.pyx:3:4:
    assert not string_path_blind(["h:1"])  # a.h:12:
    assert string_path_blind(["(4", ":1"])  # they start in the TAIL, which both texts hold
    assert not string_path_blind(["cusparse"])


def test_every_path_blind_rule_matches_a_located_line_as_its_folded_form() -> None:
    rules = load_rules().rules
    blind = [r for r in rules if path_blind(r.regex)]
    aware = [r for r in rules if not path_blind(r.regex)]
    assert blind and aware  # both kinds exist in the shipped rules: the proof is neither vacuous nor total
    rnd = random.Random(12)
    lines = message_lines()
    checked = matched = 0
    for rest in lines:
        for _ in range(3):
            line = located(rnd, rest)
            folded, shift = fold(line)
            assert shift == location_path(line) - len(FOLD_TOKEN)
            for rule in blind:
                m = rule.regex.search(line)
                assert spans(m) == spans(rule.regex.search(folded), shift), (rule.id, line)
                checked += 1
                matched += m is not None
    assert matched > 100 and checked > 10_000


@pytest.mark.parametrize(("rule_id", "line"), [
    # the identifier rules' `^(?=...{HASERR})` branches: `error` in the path turns a warning into a finding
    ("cusparse-removed", '/src/error/a.cpp:12:3: warning #1444-D: function "cusparseScsrmm2" was declared deprecated'),
    # the generic rule's match holds the location itself
    ("compiler-error", "x.cpp:12:3: error: 'cusparseScsrmm2' is deprecated [-Werror=deprecated-declarations]"),
    # `.pyx:L:C:` is what the Cython rule reads
    ("cython-diagnostic", "src/x.pyx:12:3: Building CXX object c10/CMakeFiles/c10.dir/util/ErrorHandling.cpp.o"),
])
def test_a_path_aware_rule_really_reads_the_path(rule_id: str, line: str) -> None:
    """Rules the proof leaves aware whose decision or spans the fold does change: folding for them would be wrong."""
    rule = {r.id: r for r in load_rules().rules}[rule_id]
    assert not path_blind(rule.regex)
    folded, shift = fold(line)
    assert shift
    assert spans(rule.regex.search(line)) != spans(rule.regex.search(folded), shift)
