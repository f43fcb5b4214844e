"""Known lines (known.py): a line of a raw shape decided before is taken as the long way takes it.

The findings, contexts, counts and line numbers with the known-line path equal those without it (the per-line path
with the shape cache) and those of the plain path, on generated error-dense logs (the bench's generator and
test_shapes' one), messy and fixture logs, in small and big chunks, with the caps low and high, and with a
live-display callback; plain_shape is checked against normalize() on every fixture and example line, each with its
digits changed.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pytest
from test_grep_accelerator import FIXTURES, bench_logs, messy_log, summary
from test_line_shortcuts import _pending_heavy_log
from test_shapes import classified, dense_log, redigit

from legacy_gpu_patch.classify import known, knownbatch
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream, load_rules
from legacy_gpu_patch.classify.fastpath import UNPREFIXED_FIRST
from legacy_gpu_patch.classify.normalize import normalize


def _raw_lines() -> list[bytes]:
    rules = load_rules().rules
    lines = [t for r in rules for t in (*r.examples, *r.not_examples)]
    for path in sorted(FIXTURES.rglob("*.log")) + sorted(FIXTURES.rglob("*.corpus")):
        lines += path.read_text("utf-8", "replace").splitlines()
    edges = ["a.cpp:1:2: error: x ", "a.cpp:1:2: error: x\t", "Building x.o/src/a.cpp:1: error: y",
             "a.cpp:1: Fehler: x", "a.cpp:1: `x' is undefined", "[ 50%] error: x", "\x1b[31merror\x1b[0m",
             "error: x\r", "error: x\x1c", " error: x", "0 error: x", "9 errors generated."]
    return [t.encode("utf-8", "replace") for t in lines + edges]


def test_a_plain_shape_is_left_as_it_is_or_only_requoted_by_normalize_in_each_of_its_lines() -> None:
    rnd = random.Random(5)
    plain = quoted = 0
    for raw in _raw_lines():
        for variant in (raw, redigit(raw.decode("latin-1"), rnd).encode("latin-1"), raw.replace(b"0", b"7")):
            kind = known.plain_shape(variant)
            if kind != known.plain_shape(raw):
                raise AssertionError(variant)  # a property of the shape, not of the digits
            if kind:
                decoded = variant.decode("ascii")
                text = decoded.replace("`", "'") if kind == known.QUOTED else decoded
                assert ("`" in decoded) is (kind == known.QUOTED)
                assert normalize(decoded, UNPREFIXED_FIRST) == text, variant
                assert normalize(decoded) == text, variant
                plain += 1
                quoted += kind == known.QUOTED
    assert plain > 500 and quoted > 10
    for raw in (b" error: x", b"error: x ", b"\x1b[1merror", b"error\r", b"[ 1%] x",
                b"caf\xc3\xa9 error", b"", b"0 error", b"error: x\x1f", b"Linking x.o/src/a.cpp:1: error: y"):
        assert not known.plain_shape(raw), raw


def _dense_logs(tmp_path: Path) -> list[bytes]:
    fixtures = b"".join(p.read_bytes() for p in sorted(FIXTURES.rglob("*.log")))
    quiet, dense, tail = bench_logs(tmp_path, 1_000_000)
    return [dense, dense_log(12_000, 3), fixtures + dense_log(6_000, 4) + fixtures, _pending_heavy_log(3),
            messy_log(6, 400_000), tail, quiet + dense]


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"known": 0}
    original = known.KnownLines._known_line

    def counted(self: Any, *args: Any) -> int:
        calls["known"] += 1
        return original(self, *args)

    monkeypatch.setattr(known.KnownLines, "_known_line", counted)
    # every known line through _known_line, none counted by the scan's run (test_known_batch.py compares the two)
    monkeypatch.setattr(knownbatch.BatchLines, "batch", False)
    return calls


@pytest.mark.parametrize("caps", [{}, {"max_findings": 7, "max_occurrences": 2}, {"max_findings": 5000}])
def test_the_known_line_path_gives_the_per_line_paths_findings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caps: dict[str, int]) -> None:
    calls = _counting(monkeypatch)
    for log in _dense_logs(tmp_path):
        want = classified(log, known_lines=False, **caps)
        assert classified(log, **caps) == want
        if not caps:  # the plain path too (the slowest: once)
            assert classified(log, use_shapes=False) == want
        for chunk in (64 << 10, 1 << 20) if not caps else (64 << 10,):  # lines cut across chunks, a waiting
            # finding's progress line in the next one
            shortcut = classify_stream(io.BytesIO(log), Classifier(**caps), chunk=chunk)
            long_way = classify_stream(io.BytesIO(log), Classifier(known_lines=False, **caps), chunk=chunk)
            assert summary(shortcut) == summary(long_way)
    assert calls["known"] > 10_000  # the known-line path decides most error lines


def test_the_known_line_path_tells_a_live_display_what_the_long_way_does(tmp_path: Path) -> None:
    log = _dense_logs(tmp_path)[0]
    seen: dict[bool, list[tuple[str, int, bool]]] = {True: [], False: []}
    for on in (True, False):
        c = Classifier(known_lines=on, max_findings=40, max_occurrences=3)
        c.on_finding = lambda f, new, on=on: seen[on].append((f.key, f.count, new))
        c.feed(log)
        c.close()
    assert seen[True] == seen[False] and len(seen[True]) >= 40


def test_a_known_shape_line_holding_a_digit_string_is_decided_the_long_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines of one shape where some hold a digit string an aware rule or the decider's spans need (C2664 of MSVC's
    no-matching-function, csrmm2 of cuSPARSE): the entry keeps those strings and the line that holds one is not
    taken from it."""
    calls = _counting(monkeypatch)
    rows = []
    for i in range(3000):
        rows.append(f"/src/a/Sort.cpp:{100 + i % 900}:{1 + i % 9}: error: no matching function for call to "
                    f"'launch{1000 + i}(double*, float)'")
        rows.append(f"[{i}/9999] Building CXX object a{i}.o")
        if i % 7 == 0:
            rows.append(f"/src/a/Sort.cpp:{100 + i % 900}:{1 + i % 9}: error: no matching function for call to "
                        f"'launch{2664 if i % 2 else 2672}(double*, float)'")
        if i % 11 == 0:
            rows.append(f'/src/a/Conv.cu({1000 + i}): error: identifier "cusparseScsrmm{2 if i % 2 else 3}" '
                        "is undefined")
    data = ("\n".join(rows) + "\n").encode()
    assert classified(data) == classified(data, known_lines=False) == classified(data, use_shapes=False)
    assert calls["known"] > 2000


def test_plain_shape_decides_as_its_regex_form_did() -> None:
    """plain_shape's `in`s on the decoded line against the regex search they replace (one alternation of what
    normalize() rewrites), on every fixture and example line and on lines built of those pieces."""
    import re

    rewritten, glued = re.compile(rb"[\x1b\r]|%\]|ehler|rreur|rrore"), re.compile(rb"\.o/|\.obj|\.o\\")

    def regex_form(raw: bytes) -> int:
        if not raw or not raw.isascii() or raw[:1] not in known._UNPREFIXED or raw[-1] in known._SPACE:
            return 0
        if rewritten.search(raw) or (raw[:1] in b"BLGCS" and glued.search(raw)):
            return 0
        return known.QUOTED if b"`" in raw else known.PLAIN

    rnd = random.Random(8)
    pieces = [b"ehler", b"rreur", b"rrore", b"%]", b"%", b"]", b"\x1b", b"\r", b"`", b".o/", b".obj", b".o\\", b"B",
              b"L", b"G", b"C", b"S", b"a", b"error: ", b" ", b"\t", b"0", b"\xc3\xa9", b"[", b"-", b"e", b"r"]
    lines = _raw_lines() + [b"".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 8))) for _ in range(20_000)]
    kinds = [known.plain_shape(raw) for raw in lines]
    assert kinds == [regex_form(raw) for raw in lines]
    assert kinds.count(0) > 1000 and kinds.count(known.PLAIN) > 1000 and kinds.count(known.QUOTED) > 300
