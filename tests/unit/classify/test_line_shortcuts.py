"""The per-line shortcuts of the error-dense path decide as the long way does (docs/errors.md, "Error-dense work, a
fourth session" and "a sixth session"): normalisation of a line no CI prefix can start, the raw progress-line test of
a pending join, the lead steps gated by the literal index's answer, the before-context taken once a chunk, and the
progress line that ends a pending finding handled in the scan loop."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from test_grep_accelerator import FIXTURES, bench_logs, messy_log, summary

from legacy_gpu_patch.classify import linereader
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream
from legacy_gpu_patch.classify.collect import Collector
from legacy_gpu_patch.classify.fastpath import _RAW_PREFIX_FIRST, UNPREFIXED_FIRST
from legacy_gpu_patch.classify.normalize import normalize


def _lines(tmp_path: Path) -> list[str]:
    """Fixture lines, the bench logs' lines and messy ones (colours, \\r, NUL, non-ASCII, prefixes), decoded."""
    raw = [ln for p in sorted(FIXTURES.rglob("*.log")) for ln in p.read_bytes().splitlines()]
    raw += [ln for log in bench_logs(tmp_path, 200_000) for ln in log.splitlines()[:3000]]
    raw += messy_log(5, 400_000).splitlines()
    return [ln.decode("utf-8", "replace") for ln in raw]


def _mutants(lines: list[str], seed: int) -> list[str]:
    """Each line with a character of every kind put in front, so each first character is tried."""
    rnd = random.Random(seed)
    firsts = [chr(c) for c in range(0x00, 0x80)] + ["\ufeff", "\u00a0", "\u3000", "\u2018", "\x85"]
    return [rnd.choice(firsts) + ln for ln in rnd.sample(lines, min(len(lines), 4000))]


def test_unprefixed_first_characters_start_no_prefix() -> None:
    assert _RAW_PREFIX_FIRST is not None  # else the shortcut is off (an empty set), which this test would not see
    assert UNPREFIXED_FIRST and "/" in UNPREFIXED_FIRST  # `/src/x.cpp:1:2: error ...`: the commonest error line
    assert not UNPREFIXED_FIRST & {" ", "\t", "\x1c", "\x1d", "\x1e", "\x1f", "[", "#", "0", "9", "E", ">", "|"}


def test_normalize_of_an_unprefixed_line_is_the_long_way(tmp_path: Path) -> None:
    lines = _lines(tmp_path)
    lines += [*_mutants(lines, 1), "", " ", "/x\r", "/\x1b[31merror\x1b[0m", "/a ", "a\u3000", "/ \x1c"]
    taken = 0
    for line in lines:
        assert normalize(line, UNPREFIXED_FIRST) == normalize(line), repr(line)
        taken += line[:1] in UNPREFIXED_FIRST
    assert taken > 1000  # the shortcut is exercised, not only the long way


def test_the_raw_progress_test_implies_the_decoded_one(tmp_path: Path) -> None:
    rnd = random.Random(2)
    raws = [ln.encode("utf-8", "surrogatepass") for ln in _lines(tmp_path)]
    raws += [b"[%d/%d] Building x" % (rnd.randint(0, 10**6), rnd.randint(0, 10**6)) for _ in range(200)]
    raws += [b"[" + b"1" * 300 + b"/2] x", b"[ 45%] x", b"[100%]\tx", b"[1000%] x", b"[1/2]x", b"[\t7%] y", b"[/1] z"]
    hits = 0
    for raw in raws:
        if raw[:1] == b"[" and linereader._PROGRESS_RAW.match(raw, 0, 256):
            hits += 1
            assert linereader._PROGRESS_START.match(raw[:256].decode("utf-8", "replace")), raw
    assert hits > 100


def test_lead_steps_gated_by_the_index_decide_as_the_prefilters_do(tmp_path: Path) -> None:
    matcher = Collector()
    index = matcher._index
    lines = _lines(tmp_path)
    for line in lines + _mutants(lines, 3):
        held = index.holds(index.found(line.lower()))
        gated, plain = matcher._lead_first(line, frozenset(), held), matcher._lead_first(line, frozenset(), None)
        assert (gated is None) == (plain is None), line
        if gated is not None and plain is not None:
            assert (gated[0], gated[1].id, gated[2].regs) == (plain[0], plain[1].id, plain[2].regs), line


@pytest.mark.parametrize("chunk", [4 << 20, 5000, 777])
def test_before_context_across_chunks_is_unchanged(chunk: int) -> None:
    """The lines before a finding come from this chunk and the last lines of the one before (taken once a chunk):
    the same context, however the log is cut, as when the whole log is one chunk."""
    data = messy_log(7, 300_000)
    whole = summary(classify_stream(io.BytesIO(data), Classifier(accelerate=False), chunk=len(data) + 1))
    cut = summary(classify_stream(io.BytesIO(data), Classifier(accelerate=False), chunk=chunk))
    assert cut[:3] == whole[:3]
    assert len(whole[4]) > 20
    assert [f["context"] for f in cut[4]] == [f["context"] for f in whole[4]]


def _pending_heavy_log(seed: int) -> bytes:
    """Errors that wait one line (generic, 72+ characters, cut mid-word), each followed by a progress line, a CMake
    block, a wrapped continuation or another error; few enough distinct ones that after-context is collected."""
    rnd = random.Random(seed)
    errors = [b"/src/a/x%d.cpp:%d:3: error: expected ';' before '}' token" % (i % 7, i) for i in range(40)]
    errors += [b"src/sparse.cu(42): error: identifier \"cusparseScs", b"/s/k.cu(9): error: identifier \"cusparse",
               b"error: command 'gcc' failed with exit status 1 while building the extension module torch._C now",
               b"CMake Error at CMakeLists.txt:12 (find_package):", b"  Could not find CUDA"]
    nexts = [b"[%d/99] Building CXX object x.o", b"[ %d%%] Linking CXX shared library libx.so", b"rmm2\" is undefined",
             b"[%d/4] Building", b"[1/2]x", b"[abc] not progress", b"", b"  indented %d", b"make: *** [all] Error 2"]
    out = []
    for _error in range(3000):
        out.append(rnd.choice(errors))
        for _ in range(rnd.choice([1, 1, 1, 2, 4])):
            nxt = rnd.choice(nexts)
            out.append(nxt % rnd.randint(1, 99) if b"%" in nxt else nxt)
    return b"\n".join(out) + b"\n"


@pytest.mark.parametrize("chunk", [4 << 20, 4099])
def test_a_progress_line_ending_a_pending_finding_in_the_scan_loop_is_the_long_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    logs = [_pending_heavy_log(1), _pending_heavy_log(2), *bench_logs(tmp_path, 300_000), messy_log(4, 300_000)]
    logs += [p.read_bytes() for p in sorted(FIXTURES.rglob("*.log"))]
    taken = 0
    original = linereader.LineReader._progress_ends_pending

    def counted(self: linereader.LineReader, block: bytes, s: int) -> bool:
        nonlocal taken
        done = original(self, block, s)
        taken += done
        return done

    monkeypatch.setattr(linereader.LineReader, "_progress_ends_pending", counted)
    shortcut = [summary(classify_stream(io.BytesIO(d), Classifier(known_lines=False), chunk=chunk)) for d in logs]
    assert taken > 2000  # the shortcut is exercised
    monkeypatch.setattr(linereader.LineReader, "_progress_ends_pending", lambda self, block, s: False)
    long_way = [summary(classify_stream(io.BytesIO(d), Classifier(known_lines=False), chunk=chunk)) for d in logs]
    assert shortcut == long_way
    assert any(f["context"]["after"] for s in long_way for f in s[4])  # after-context was collected too


def test_the_run_ends_a_new_lines_pending_finding_at_a_progress_line_and_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new error line (the long way: no cache knows it) whose generic finding waits, followed by a progress line:
    the candidate run (knownbatch.py) ends the finding there and goes on, as the scan loop's next turn would; the same
    findings, contexts and counts as with that shortcut off, in far fewer runs than error lines."""
    from legacy_gpu_patch.classify.knownbatch import BatchLines

    _, _, _, words = bench_logs(tmp_path, 600_000, words=True)
    errors = sum(1 for ln in words.splitlines() if not ln.startswith(b"["))
    runs = 0
    original = BatchLines._run

    def run(self: BatchLines, *args: object) -> tuple[int, int, int, int]:
        nonlocal runs
        runs += 1
        return original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(BatchLines, "_run", run)
    # past the caps (20 findings here) a new finding opens no after-context: only the waiting ends the run
    shortcut = summary(classify_stream(io.BytesIO(words), Classifier(max_findings=20), chunk=1 << 20))
    assert errors > 1000 and runs < errors / 10  # the run went on past the error lines' progress lines
    monkeypatch.setattr(linereader.LineReader, "_progress_ends_pending", lambda self, block, s: False)
    assert summary(classify_stream(io.BytesIO(words), Classifier(max_findings=20), chunk=1 << 20)) == shortcut
