"""Digit strings harmless where a digit follows them (knowndigits.py): a known or folded line holding `csrmm2` only
before a digit is decided by its entry, as the long way decides it.

The analysis is checked on hand-written patterns (what makes a string harmful: a digit, the pattern's end, a
possessive or atomic group, a look-ahead, the string as a plain run or prefilter literal), its claim by brute force
(the line and its shape matched alike at the same spans), and the classifier against the long way (known lines
off, and the plain path) on logs of adversarial lines: `csrmm2` and `__half2` before digits, letters, quotes,
parentheses, spaces and the line's end, under paths that hold digits and digit strings.
"""

from __future__ import annotations

import io
import random
import re
from pathlib import Path
from typing import Any

import pytest
from test_grep_accelerator import bench_logs, summary

from legacy_gpu_patch.classify import known
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream
from legacy_gpu_patch.classify.knowndigits import digits_follow, harmless_contexts, harmless_strings
from legacy_gpu_patch.classify.prepare import prepared
from legacy_gpu_patch.classify.shapes import digit_contexts

HARMLESS = [
    r"cusparse[SDCZ]csrmm2?\b",
    r"(?P<k>csrmm2?)(?:['\"])?(?:\s*\([^)]*\))?:?[ \t]*(?:is undefined|not found)",
    r"csrmm2?(?:x|\b)",
    r"csrmm2??[ (]",
    r"csrmm2?x?\b",
    r"(?:a|b)(?:csrmm2?)(?:\s*\()",
    r"(?i:CSRMM2?)\b",
]
# harmful: a line holding `csrmm2` before a digit is matched otherwise than its shape (the brute force finds one)
HARMFUL = [
    r"csrmm2?\d",  # a digit may follow
    r"csrmm2?",  # the match may end after it
    r"csrmm2?x?",
    r"csrmm2?.",
    r"csrmm2?\w",
    r"csrmm2?[^a]",
    r"csrmm2*\b",  # more than one digit
]
# not read (so not harmless), though no line tells: `$`, possessive and atomic groups, look-aheads, repeats around
# it, the string as a run of literals too
UNREAD = [
    r"csrmm2?\s*$",
    r"csrmm2?+\b",
    r"(?>csrmm2?)\b",
    r"csrmm2?(?=\b)",
    r"(?:csrmm2?\b)+",
    r"csrmm2\b|csrmm2?\b",
]


@pytest.mark.parametrize("pattern", HARMLESS)
def test_a_joined_digit_followed_by_what_cannot_take_a_digit_is_harmless(pattern: str) -> None:
    assert harmless_contexts(pattern, 0, ()) == {"csrmm2"}
    assert harmless_contexts(pattern, 0, ("csrmm2",)) == frozenset()  # a prefilter literal: it gates the rule


@pytest.mark.parametrize("pattern", HARMFUL + UNREAD)
def test_a_joined_digit_that_a_digit_or_the_end_may_follow_is_not(pattern: str) -> None:
    assert "csrmm2" not in harmless_contexts(pattern, 0, ())


@pytest.mark.parametrize("pattern, contexts, harmless", [
    (r"x(?:y2?\b|z)", ("xy2",), {"xy2"}),  # a branch's first run joined after the run before it, as digit_contexts
    (r"w(?:xy2?\b|z)", ("wxy2",), {"wxy2"}),
    (r"x(?:y2|z)|xy2?\b", ("xy2",), set()),  # `xy2` is also a plain run (joined through the branch): not harmless
    (r"error C(?:2665|2672)\b", ("error c26", "error c2665", "error c2672"), set()),
])
def test_runs_joined_through_a_branch_are_read_as_digit_contexts_reads_them(
        pattern: str, contexts: tuple[str, ...], harmless: set[str]) -> None:
    assert digit_contexts(re.compile(pattern), ()) == contexts
    assert harmless_contexts(pattern, 0, ()) == harmless


def test_the_shipped_rules_harmless_strings() -> None:
    c = Classifier()
    found = harmless_strings(c.rules, prepared(c.rules).lead, c._aware_runs)
    assert "csrmm2" in found and "c2664" not in found and "lnk1181" not in found
    runs = {s for r in c._aware_runs.values() if r for s in r}
    assert found <= runs


def _zero(text: str) -> str:
    return text.translate(str.maketrans("123456789", "000000000"))


def test_a_line_holding_a_harmless_string_before_digits_matches_as_its_shape() -> None:
    """The claim, by brute force: every pattern called harmless matches a line whose `csrmm2`s are all followed by
    a digit exactly as it matches the line's shape (same spans); the harmful ones are each caught out."""
    rnd = random.Random(11)
    pieces = ["csrmm2", "csrmm", "CSRMM2", "2", "0", "7", "x", " ", "(", ")", "'", ":", "a", "b", "is undefined",
              "not found", "cusparseScsrmm2", "cusparseDcsrmm", "csrmm25", "CSRMM20"]
    lines = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 8))) for _ in range(60_000)]
    lines = [t for t in lines if "csrmm2" in t.lower() and digits_follow(t.lower(), "csrmm2")]
    assert len(lines) > 5_000
    for pattern in HARMLESS:
        regex = re.compile(pattern)
        assert digit_contexts(regex) == ("csrmm2",)
        for t in lines:
            m, s = regex.search(t), regex.search(_zero(t))
            assert (m and m.regs) == (s and s.regs), (pattern, t)
    for pattern in HARMFUL:
        regex = re.compile(pattern)
        assert any((m := regex.search(t)) and m.regs != ((s := regex.search(_zero(t))) and s.regs)
                   for t in lines), pattern


def _adversarial_log(seed: int) -> bytes:
    rnd = random.Random(seed)
    paths = ["/src/pytorch/aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cu", "/src/c10/cuda/Loss.cu",
             "/w/csrmm2x/a.cu", "/w/half21/b.cu", "/src/error/x.cpp", "/w/c2664/u.cu", "/src/a/Sort.cu"]
    names = ["cusparseScsrmm2{i}", "cusparseDcsrmm{i}", "cusparseScsrmm2", "cusparseCcsrmm2x{i}", "csrmm2{i}",
             "__half2{i}", "__half2", "__half2float{i}", "cusparseZcsrmm2_{i}"]
    messages = ['{p}({l}): error: identifier "{n}" is undefined',
                "{p}:{l}:{c}: error: '{n}' was not declared in this scope",
                "{p}:{l}:{c}: error: {n} is not defined",
                "{p}:{l}:{c}: error: {n}(int) is undefined",
                "{p}:{l}:{c}: error: no matching function for call to '{n}(int)'",
                "/usr/bin/ld: x.o: undefined reference to `{n}'",
                "{p}:{l}:{c}: warning: {n} is deprecated",
                "{p}:{l}:{c}: error: call ends in {n}"]
    out = []
    for k in range(30_000):
        name = rnd.choice(names).format(i=rnd.choice([1, 2, 5, 21, 345, 2664, 90, 7]))
        if k < 10_000:  # the shapes first learnt from lines without the strings (else they take the long way)
            name = name.replace("2", "3")
        line = rnd.choice(messages).format(p=rnd.choice(paths), l=rnd.randint(1, 99), c=rnd.randint(1, 9), n=name)
        out.append(line if k % 3 else f"[{k}/9] Building CXX object x.o\n{line}")
    return ("\n".join(out) + "\n").encode()


def _run(log: bytes, harmless: bool, chunk: int = 4 << 20, **kwargs: Any) -> Classifier:
    with pytest.MonkeyPatch.context() as mp:
        if not harmless:  # the long way for every line holding a digit string of its entry
            mp.setattr(known.KnownLines, "_harmless_strings", lambda self: frozenset())
        return classify_stream(io.BytesIO(log), Classifier(**kwargs), chunk=chunk)


@pytest.mark.parametrize("caps", [{}, {"max_findings": 7, "max_occurrences": 2}])
def test_lines_holding_harmless_strings_are_found_as_the_long_way_finds_them(tmp_path: Path, caps: dict[str, int]
                                                                            ) -> None:
    taken = {"known": 0, "folded": 0}
    original_known, original_folded = known.KnownLines._known_line, Classifier._folded_line

    def known_line(self: Any, found: Any, lineno: int, raw: bytes, *args: Any) -> int:
        done = original_known(self, found, lineno, raw, *args)
        taken["known"] += done >= 0 and b"csrmm2" in raw
        return done

    def folded_line(self: Any, lineno: int, raw: bytes, *args: Any) -> int:
        done = original_folded(self, lineno, raw, *args)
        taken["folded"] += done >= 0 and b"csrmm2" in raw
        return done

    _, dense, _ = bench_logs(tmp_path, 2_000_000)
    for log in (_adversarial_log(1), dense):
        want = summary(_run(log, False, **caps))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(known.KnownLines, "_known_line", known_line)
            mp.setattr(Classifier, "_folded_line", folded_line)
            assert summary(_run(log, True, **caps)) == want
        assert summary(_run(log, True, known_lines=False, **caps)) == want
        if not caps:
            assert summary(_run(log, True, 64 << 10)) == want
    assert taken["known"] > 1_000 and taken["folded"] > 100, taken
    plain = _adversarial_log(2)[:400_000]
    plain = plain[: plain.rindex(b"\n") + 1]
    assert summary(_run(plain, True)) == summary(_run(plain, False, use_shapes=False))
