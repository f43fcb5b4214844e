"""The scan's run over a chunk's candidate lines (knownbatch.py): lines it counts itself are counted as
KnownLines._known_line counts them.

Findings, contexts, counts, line numbers and the live display's calls with the counting on equal those with it off
(every known line through _known_line) and those of the long way, on the bench's error-dense log, error-dense logs of
test_shapes' generator, pending-heavy, messy, fixture and located logs, and logs built to stop the counting at each
of its conditions, in small and big chunks, with the caps low and high; the run is checked to have counted lines
where it may, and not where it may not.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from test_grep_accelerator import FIXTURES, bench_logs, messy_log, summary
from test_known_folded import _located_log, heard
from test_line_shortcuts import _pending_heavy_log
from test_shapes import dense_log

from legacy_gpu_patch.classify import knownbatch, knowndigits
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream


def _run(log: bytes, batch: bool, chunk: int = 4 << 20, **kwargs: Any) -> Classifier:
    c = Classifier(**kwargs)
    c.batch = batch
    return classify_stream(io.BytesIO(log), c, chunk=chunk)


def _edges() -> bytes:
    """Known lines next to what ends a run: a digit string of the entry (csrmm2, C2664), a backquoted linker line, a
    waiting finding whose next line is a candidate, not a progress line, a percent progress, a line cut by the
    chunk's end, a warning, a block rule, findings under and past the caps."""
    rows = []
    for i in range(4000):
        rows.append(f"/src/a/Sort.cpp:{100 + i % 900}:{1 + i % 9}: error: no matching function for call to "
                    f"'launch{1000 + i % 700}(double*, float)'")
        rows.append(f"[{i}/9999] Building CXX object a{i}.o" if i % 5 else f"[{i % 100:3d}%] Linking x{i}")
        if i % 7 == 0:
            rows.append(f"/src/a/Sort.cpp:{100 + i % 900}:{1 + i % 9}: error: no matching function for call to "
                        f"'launch{2664 if i % 2 else 2672}(double*, float)'")
        if i % 3 == 0:
            rows.append(f"/usr/bin/ld: a{i % 50}.o: in function `f{i % 300}': undefined reference to `sym{i % 40}'")
        if i % 11 == 0:
            rows.append(f'/src/a/Conv.cu({1000 + i}): error: identifier "cusparseScsrmm{2 if i % 2 else 3}" '
                        "is undefined")
        if i % 13 == 0:
            rows.append(f"a.cpp:{i}:1: warning: unused variable 'v{i % 9}' [-Wunused-variable]")
        if i % 97 == 0:
            rows.append(f"CMake Error at CMakeLists.txt:{i}:")
            rows.append("  Could not find CUDA")
        if i % 17 == 0:
            rows.append(f"/src/b/K.cpp:{i}:2: error: 'x{i % 30}' was not declared in this scope and the line is long")
            rows.append(f"/src/b/K.cpp:{i}:2: error: 'y{i % 30}' was not declared in this scope")
    return ("\n".join(rows) + "\n").encode()


def _logs(tmp_path: Path) -> list[bytes]:
    fixtures = b"".join(p.read_bytes() for p in sorted(FIXTURES.rglob("*.log")))
    quiet, dense, _ = bench_logs(tmp_path, 1_000_000)
    return [dense, _edges(), dense_log(12_000, 3), fixtures + dense_log(6_000, 4) + fixtures, _pending_heavy_log(3),
            messy_log(6, 400_000), _located_log(1), quiet + dense]


@pytest.mark.parametrize("caps", [{}, {"max_findings": 7, "max_occurrences": 2}, {"max_findings": 5000}])
def test_the_run_of_known_lines_counts_as_the_scan_loops_turn(tmp_path: Path, caps: dict[str, int]) -> None:
    taken = 0
    for k, log in enumerate(_logs(tmp_path)):
        batched = _run(log, True, **caps)
        off = _run(log, False, **caps)
        want = summary(off)
        assert summary(batched) == want, k
        if not caps:
            assert summary(_run(log, False, known_lines=False)) == want, k
        for chunk in (64 << 10, 1 << 20) if k < 3 else (64 << 10,):  # lines cut across chunks, a progress line
            # ending a waiting finding in the next chunk
            assert summary(_run(log, True, chunk, **caps)) == summary(_run(log, False, chunk, **caps)), (k, chunk)
        assert off.batched == 0
        taken += batched.batched
    assert taken > 1_000 if caps != {"max_findings": 5000} else taken > 500  # the run took known lines


def test_the_run_is_off_where_a_live_display_hears_of_each_finding(tmp_path: Path) -> None:
    log = bench_logs(tmp_path, 1_000_000)[1]
    seen: dict[bool, list[tuple[str, int, bool]]] = {}
    for on in (True, False):
        seen[on], c = heard(log, 40, batch=on)
        assert c.batched == 0
    assert seen[True] == seen[False] and len(seen[True]) >= 40


def test_the_run_stops_at_each_line_it_does_not_take() -> None:
    """Each condition that ends a run ends it there: the lines after are the scan loop's until the next run."""
    log = _edges()
    c = _run(log, True, max_findings=7, max_occurrences=2)
    candidates = sum(1 for line in log.splitlines() if b"rror" in line or b"ndefined" in line)
    assert 1_000 < c.batched < candidates - 1_000  # lines taken, and lines left to the scan loop


@pytest.mark.parametrize("after", ["[{i}/999] Building CXX object a{i}.o", "[note] not a progress line {i}",
                                   "  [{i}/999] indented", "[ {i}%] x"])
def test_a_waiting_line_is_taken_only_before_a_progress_line_that_ends_it(after: str) -> None:
    """The run takes a waiting line (72+ characters) only where the next line ends it at once: a progress line, not
    another line starting with `[` (a waiting finding may join it); the findings are the scan loop's either way."""
    rows = []
    for i in range(3000):
        rows.append(f"/src/a/Sort.cpp:{100 + i % 900}:{1 + i % 9}: error: no matching function for call to "
                    f"'launch{1000 + i % 50}(double*, float)'")
        rows.append(after.format(i=i % 100))
    log = ("\n".join(rows) + "\n").encode()
    c = _run(log, True, max_findings=7, max_occurrences=2)
    assert summary(c) == summary(_run(log, False, max_findings=7, max_occurrences=2))
    if after.startswith("[{i}/") or after.startswith("[ {i}%"):
        assert c.batched > 2_500
    else:
        assert c.batched == 0


def test_an_entrys_digit_strings_are_found_as_the_loop_over_all_of_them_finds_them() -> None:
    """knowndigits.digit_test (the strings holding no other; a trie search past FEW of them), as the entry keeps it
    for the run, against `any(t in low)` over all the strings, for the shipped rules' tuples on this log's entries and
    for tuples where strings hold others."""
    import random

    c = _run(_edges(), True)
    entries = [found for found in (c._known or {}).values() if found.__class__ is tuple]
    tuples = {found[4] for found in entries if found[4]}
    tuples |= {("672", "c2672", "error c2"), ("ab", "abc", "b", "x1", "x12", "y", "z9", "q"), ("0",)}
    assert any(len(t) > knowndigits.FEW for t in tuples) and any(len(t) <= knowndigits.FEW for t in tuples)
    counts = 0
    for found in entries:  # each entry's count (known.known_entry): the fields the run reads, read off the rest
        rule, _, _, waits, tests, key_span, quoted, count = found
        if rule is None or key_span is None:
            assert count is None
            continue
        counts += 1
        assert count == (rule.id, rule.severity == "error", waits, count[3], *key_span, quoted)
        assert count[3] is (knowndigits.digit_test(tests) if tests else None)
    assert counts > 10
    rnd = random.Random(4)
    for tests in tuples:
        pieces = [*tests, *(t[:-1] for t in tests), *(t[1:] for t in tests), " ", "c2", "0", "/src/a.cpp:1:2: "]
        held = 0
        for _ in range(2000):
            low = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 5)))
            want = any(t in low for t in tests)
            found = knowndigits.holds_test(low, knowndigits.digit_test(tests))
            # it never misses a string; it finds only them, but where it searches for a piece they all hold
            assert found is want or (found and len(knowndigits.digit_test(tests)) == 1 < len(tests)), (tests, low)
            held += want
        assert 0 < held < 2000


@pytest.mark.parametrize("tests, test", [
    (("error c2", "c2672", "c2664", "672"), ("error c2", "c2664", "672")),  # no piece of 2+ in all that hold no other
    (("error c2", "c2672", "c2664", "c2665", "c2784", "c2782", "c2976", "c2977"), ("c2",)),
    (("error msb3721", "error msb3073"), ("error msb3",)),
    (("lnk1104", "lnk1181"), ("lnk11",)),
    (("csr2csc", "csrsv2", "bsrsm2"), ("csr2csc", "csrsv2", "bsrsm2")),  # `sr`: no digit
    (("int8", "int16"), ("int8", "int16")),  # `int`: no digit
    (("csrmm2",), ("csrmm2",)),
])
def test_an_entrys_digit_strings_are_searched_through_a_piece_holding_a_digit_that_each_holds(
        tests: tuple[str, ...], test: tuple[str, ...]) -> None:
    got = knowndigits.digit_test(tests)
    assert (got if got.__class__ is tuple else None) == test if len(test) <= knowndigits.FEW else callable(got)


def test_the_run_counts_a_line_holding_a_digit_string_harmless_there() -> None:
    """A known line holding one of its entry's digit strings where a digit follows it and it is harmless there
    (`csrmm2` of `cusparseScsrmm21355`: knowndigits.py) is counted in the run, as _known_line would count it (the
    entry learnt from a line of the shape holding none, `cusparseScsrmm31355`); one holding a string that is not
    harmless there still leaves the run."""
    rows, plain = [], 0
    for i in range(3000):
        n = 1000 + (i * 7919) % 9000
        rows.append(f'/src/a/Conv.cu({1000 + i}): error: identifier "cusparseScsrmm{n}" is undefined')
        rows.append(f"[{i}/9999] Building CXX object a{i}.o")
        plain += not str(n).startswith("2")
        if i % 100 == 0:  # `csrmm2` with no digit after it: the long way
            rows.append(f'/src/a/Conv.cu({1000 + i}): error: identifier "cusparseScsrmm2" is undefined x{i}')
    log = ("\n".join(rows) + "\n").encode()
    for caps in ({"max_findings": 7, "max_occurrences": 2}, {}):
        c = _run(log, True, **caps)
        assert summary(c) == summary(_run(log, False, **caps)) == summary(_run(log, False, known_lines=False, **caps))
        if caps:  # the harmless lines past the caps too, not only those holding no `csrmm2`
            assert c.batched > plain + 100, (c.batched, plain)


def test_the_run_ends_past_the_progress_line_of_the_last_waiting_line_it_counts(monkeypatch: pytest.MonkeyPatch
                                                                               ) -> None:
    """Where the candidates run out after a waiting line the run counted, where the scan goes on is past the progress
    line that ended it (found then, not for each line counted)."""
    rows = []
    for i in range(3000):
        rows.append(f"/src/a/Sort.cpp:{100 + i % 900}:{1 + i % 9}: error: no matching function for call to "
                    f"'launch{1000 + i % 50}(double*, float)'")
        rows.append(f"[{i}/999] Building CXX object a{i}.o")
    log = ("\n".join(rows) + "\n").encode()
    seen = []
    original = knownbatch.BatchLines._count_run

    def counted(self: Any, block: bytes, starts: list[int], hits: list[int], i: int, *args: Any) -> Any:
        found = original(self, block, starts, hits, i, *args)
        if found[2] is None and self.batched:
            last = block.index(b"\n", starts[-1]) + 1  # the last candidate's progress line starts here
            seen.append((found[1], block.index(b"\n", last) + 1))
        return found

    monkeypatch.setattr(knownbatch.BatchLines, "_count_run", counted)
    _run(log, True, 64 << 10, max_findings=7, max_occurrences=2)
    assert len(seen) >= 3 and all(pos == want for pos, want in seen)
