"""GNU grep as the trigger search (grepscan.py) finds exactly the lines the search in Python finds, and the
classifier's findings, counts and totals are the same with and without it (and when grep fails)."""

from __future__ import annotations

import io
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from legacy_gpu_patch.classify import grepscan, scan
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream, load_rules
from legacy_gpu_patch.classify.fastpath import MATCH_WINDOW

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
BENCH = Path(__file__).resolve().parents[3] / "bench"

needs_grep = pytest.mark.skipif(grepscan.gnu_grep() is None, reason="GNU grep is not installed")


def messy_log(seed: int, size: int) -> bytes:
    """Fixture logs, every trigger, regex-special bytes, non-ASCII, NUL, \\r, colours and long lines, shuffled."""
    rnd = random.Random(seed)
    rules = load_rules()
    fixtures = [ln for p in sorted(FIXTURES.rglob("*.log")) for ln in p.read_bytes().splitlines()]
    trig = list(rules.triggers)
    filler = [b"[12/345] Building CXX object a.o", b"x" * 3000, b"\x1b[31merror\x1b[0m: red", b"\x00\xff\xfe",
              b"a(b)*c+d?e{1}|f^$g\\h[i]", b"progress\r 50%\r100%", "caf\u00e9 \u2018q\u2019".encode(), b""]
    out: list[bytes] = []
    total = 0
    while total < size:
        r = rnd.random()
        if r < 0.3:
            line = rnd.choice(fixtures)
        elif r < 0.5:
            # a trigger anywhere in a line, long lines included (the window is read around the first one)
            pad = rnd.choice([0, 10, MATCH_WINDOW - 5, MATCH_WINDOW + 50, 3 * MATCH_WINDOW])
            line = b"y" * pad + rnd.choice(trig) + b" tail " + rnd.choice(trig) * rnd.randint(0, 2)
        else:
            line = rnd.choice(filler)
        out.append(line)
        total += len(line) + 1
    return b"\n".join(out) + b"\n"


def bench_logs(tmp_path: Path, size: int, words: bool = False) -> list[bytes]:
    """The bench's quiet, error-dense and cmake-tail logs of `size` bytes; `words`: and its error-dense-words log."""
    sys.path.insert(0, str(BENCH))
    try:
        import classify_bench
    finally:
        sys.path.remove(str(BENCH))
    logs = []
    for name, gen in (("quiet", classify_bench.generate), ("dense", classify_bench.generate_dense),
                      ("tail", classify_bench.generate_cmake_tail),
                      *((("words", classify_bench.generate_dense_words),) if words else ())):
        path = tmp_path / f"{name}.log"
        gen(path, size)
        logs.append(path.read_bytes())
    return logs


def summary(c: Classifier) -> tuple[Any, ...]:
    return (c.errors, c.warnings, c.dropped, c.lines, [f.to_dict() for f in c.findings()])


def classify(data: bytes, accelerate: bool, chunk: int = 4 << 20, **kwargs: Any) -> Classifier:
    return classify_stream(io.BytesIO(data), Classifier(accelerate=accelerate, **kwargs), chunk=chunk)


@needs_grep
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_grep_finds_the_lines_the_python_search_finds(seed: int) -> None:
    rules = load_rules()
    search = scan.TriggerSearch(rules.triggers)
    grep = grepscan.GrepSearch(str(grepscan.gnu_grep()), rules.triggers)
    data = messy_log(seed, grepscan.GREP_MIN * 2)
    for start in (0, data.index(b"\n") + 1):
        plain = search.python_lines(data, start, len(data), data.isascii())
        found = grep.line_starts(data, start, len(data))
        assert found is not None
        assert [s for s, _ in found] == [s for s, _ in plain]
        assert all(data.index(b"\n", s) - s == n for s, n in found)
        # the first trigger of a long line is where the Python search puts it; any position of a short one
        got = search.lines(data, start, len(data), data.isascii())
        assert [s for s, _ in got] == [s for s, _ in plain]
        long_lines = [(s, h) for (s, h), (_, n) in zip(plain, found) if n > MATCH_WINDOW]
        assert long_lines and set(long_lines) <= set(got)


@needs_grep
@pytest.mark.parametrize("seed", [5, 6])
def test_findings_are_identical_with_and_without_grep_on_messy_logs(seed: int) -> None:
    data = messy_log(seed, 3 * grepscan.GREP_MIN)
    for chunk in (grepscan.GREP_MIN, 1 << 20, 4 << 20):
        fast = classify(data, True, chunk)
        assert summary(fast) == summary(classify(data, False, chunk))
    assert fast.errors > 100


@needs_grep
def test_findings_are_identical_with_and_without_grep_on_the_bench_logs(tmp_path: Path) -> None:
    errors = []
    for data in bench_logs(tmp_path, 3 << 19, words=True):
        fast = classify(data, True, max_findings=20000)
        assert summary(fast) == summary(classify(data, False, max_findings=20000))
        errors.append(fast.errors)
    assert errors[1] > 1000  # the error-dense log


@needs_grep
def test_findings_are_identical_with_and_without_grep_on_the_fixture_corpus() -> None:
    for path in sorted(FIXTURES.rglob("*.log")):
        # each fixture repeated past GREP_MIN, so that grep searches it
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            data += b"\n"
        data *= grepscan.GREP_MIN // max(len(data), 1) + 1
        assert summary(classify(data, True)) == summary(classify(data, False)), path.name


def test_a_failing_grep_falls_back_to_the_python_search(monkeypatch: pytest.MonkeyPatch) -> None:
    data = messy_log(9, grepscan.GREP_MIN * 2)
    expected = summary(classify(data, False))
    rules = load_rules()
    broken = grepscan.GrepSearch("/nonexistent/grep", rules.triggers)
    assert broken.line_starts(data, 0, len(data)) is None
    monkeypatch.setattr(grepscan, "gnu_grep", lambda: "/nonexistent/grep")
    monkeypatch.setattr(scan, "gnu_grep", lambda: "/nonexistent/grep")
    assert summary(classify(data, True)) == expected


def test_grep_is_used_only_when_enabled_and_gnu(monkeypatch: pytest.MonkeyPatch) -> None:
    grepscan.gnu_grep.cache_clear()
    try:
        monkeypatch.setenv("LGPATCH_CLASSIFY_GREP", "0")
        assert grepscan.gnu_grep() is None
        grepscan.gnu_grep.cache_clear()
        monkeypatch.delenv("LGPATCH_CLASSIFY_GREP")
        found = grepscan.gnu_grep()
        version = subprocess.run(["grep", "--version"], capture_output=True).stdout if found else b""
        assert (found is not None) == version.startswith(b"grep (GNU grep)")
    finally:
        grepscan.gnu_grep.cache_clear()


def test_ere_escapes_every_special_byte() -> None:
    import re

    for lit in (b"(killed)", b".pyx:", b"** WARNING", b"a|b", b"x{2}", b"^$\\[]?+"):
        assert re.fullmatch(grepscan._ere(lit), lit)


def test_a_trigger_grep_cannot_take_keeps_the_search_in_python() -> None:
    for odd in (b"two\nlines", b"nul\0byte"):
        search = scan.TriggerSearch((b"rror", odd))
        assert search._accelerator() is None
        data = (b"x rror\n" + odd + b" z\n") * (grepscan.GREP_MIN // 10)
        assert search.lines(data, 0, len(data), True) == search.python_lines(data, 0, len(data), True)
