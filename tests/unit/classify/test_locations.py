"""normalize.location: the file and line of a diagnostic, the same with its necessary-string tests as without.

location() searches _LOC_RE only where the line holds `:` or `(` followed by a digit, and _LOC_LD_RE only where it
holds `:(.` (every match of each holds them), and asks for the lines before only where it reads them (a Python
exception's line). The reference below is location() without those tests, its lines before given at once.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_grep_accelerator import FIXTURES, bench_logs, messy_log

from legacy_gpu_patch.classify import normalize
from legacy_gpu_patch.classify.classifier import Classifier
from legacy_gpu_patch.classify.normalize import location


def _reference(text: str, before: Sequence[str]) -> tuple[str | None, int | None, int]:
    """location() as it was before its necessary-string tests."""
    m = normalize._LOC_CMAKE_RE.search(text)
    if m:
        return m.group("file"), int(m.group("line")), 0
    m = normalize._LOC_RE.search(text)
    if m and m.start() < 400:
        line = m.group("line") or m.group("line2")
        return m.group("file"), int(line), m.end()
    if normalize._PY_EXC_RE.match(text):
        for prev in reversed(before):
            pm = normalize._LOC_PY_RE.search(prev)
            if pm:
                return pm.group("file"), int(pm.group("line")), 0
    m = normalize._LOC_LD_RE.search(text)
    if m:
        return m.group("file"), None, 0
    return None, None, 0


_EDGES = [
    "src/a.cpp:12:3: error: x",
    "C:\\src\\a.cu(41): error: identifier \"x\" is undefined",
    "a.cu(41,7): error: y",
    "a.cpp:\u0661\u0662: error: Arabic-Indic digits are digits to \\d",
    "foo.o:(.text+0x1a): undefined reference to `bar'",
    "/usr/bin/ld: build/foo_bar.o: in function `f8450': undefined reference to `sym1341'",
    "nvcc fatal   : Unsupported gpu architecture 'compute_35'",
    "x" * 500 + " a.cpp:1:2: error: past the 400th character",
    "CMake Error at CMakeLists.txt:12 (project):",
    "a.cpp:x: (1) not a location :( ",
    "lib.so:(.data): ",
    "",
]


def _lines(tmp_path: Path) -> list[str]:
    raw = [ln for p in sorted(FIXTURES.rglob("*.log")) for ln in p.read_bytes().splitlines()]
    raw += messy_log(3, 400_000).splitlines()
    for log in bench_logs(tmp_path, 300_000, words=True):
        raw += log.splitlines()
    rnd = random.Random(5)
    texts = [normalize.normalize(b.decode("utf-8", "replace")) for b in raw]
    # lines cut at random places: a location's pieces apart
    texts += [t[: rnd.randrange(len(t) + 1)] for t in rnd.sample(texts, 2000) if t]
    return [*_EDGES, *texts]


def test_location_is_the_reference_on_every_line(tmp_path: Path) -> None:
    lines = _lines(tmp_path)
    before = ['  File "setup.py", line 12, in <module>']
    found = 0
    for text in lines:
        got = location(text, lambda: before)
        assert got == _reference(text, before), text
        found += got[0] is not None
    assert found > 1000  # the lines hold locations of every kind
    assert location(_EDGES[4], list) == ("foo.o", None, 0)
    assert location(_EDGES[3], list)[1] == 12


def test_the_lines_before_are_read_only_where_location_reads_them() -> None:
    calls: list[int] = []

    def before() -> list[str]:
        calls.append(1)
        return ['  File "setup.py", line 7, in <module>']

    assert location("a.cpp:3:1: error: x", before) == ("a.cpp", 3, 10)
    assert location("/usr/bin/ld: a.o: in function `f': undefined reference to `g'", before) == (None, None, 0)
    assert calls == []
    assert location("RuntimeError: CUDA error", before) == ("setup.py", 7, 0)
    assert calls == [1]


@pytest.mark.parametrize("lines", [
    [b'  File "setup.py", line 7, in <module>', b"RuntimeError: no CUDA GPUs are available"],
    [b"[1/2] Building CXX object a.o", b"a.cpp:9:2: error: 'x' was not declared in this scope"],
])
def test_a_kept_occurrence_has_its_location(lines: list[bytes]) -> None:
    """End to end: the second occurrence of a finding (a kept one) reads its location as the first did."""
    clf = Classifier(context_before=3)
    clf.feed(b"\n".join(lines * 2) + b"\n")
    found = [f for f in clf.close() if not f.secondary]
    assert found, lines
    first, second = found[0].occurrences[:2]
    assert (first.file, first.line) == (second.file, second.line)
    assert first.file in ("setup.py", "a.cpp")
