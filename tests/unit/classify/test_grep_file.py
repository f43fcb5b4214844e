"""One GNU grep over a whole log file (grepfile.py) gives the findings of the search in Python, however the file is
read in chunks, when the file grows while it is read, when grep dies, and when the name points elsewhere."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path
from typing import Any

import pytest
from test_grep_accelerator import bench_logs, messy_log, summary

from legacy_gpu_patch.classify import grepscan
from legacy_gpu_patch.classify.classifier import Classifier, classify_file, classify_stream
from legacy_gpu_patch.classify.grepfile import FileSearch

needs_grep = pytest.mark.skipif(grepscan.gnu_grep() is None, reason="GNU grep is not installed")


def in_python(data: bytes, chunk: int = 4 << 20, **kwargs: Any) -> tuple[Any, ...]:
    c = classify_stream(io.BytesIO(data), Classifier(accelerate=False, **kwargs), chunk=chunk)
    return summary(c)


def by_file(path: Path, chunk: int, **kwargs: Any) -> Classifier:
    with open(path, "rb") as fh:
        c = Classifier(**kwargs)
        c.search_file(fh)
        assert c._file is not None  # the whole-file search runs
        return classify_stream(fh, c, chunk=chunk)


@needs_grep
@pytest.mark.parametrize("seed", [1, 2])
def test_any_chunking_of_a_file_gives_the_python_findings(seed: int, tmp_path: Path) -> None:
    data = messy_log(seed, grepscan.GREP_MIN * 3) + b"an unterminated last line: error: x"
    path = tmp_path / "messy.log"
    path.write_bytes(data)
    want = in_python(data)
    rnd = random.Random(seed)
    for chunk in (4 << 20, 300_000, 100_000, rnd.randint(1000, 9000)):
        assert summary(by_file(path, chunk)) == want, chunk
    # lines longer than max_line are cut and their rest skipped: the file's offsets must stay right past them
    assert summary(by_file(path, 5000, max_line=2500)) == in_python(data, 5000, max_line=2500)
    assert summary(classify_file(path)) == want


@needs_grep
def test_the_bench_logs_give_the_python_findings(tmp_path: Path) -> None:
    for i, data in enumerate(bench_logs(tmp_path, 2 << 20)):
        path = tmp_path / f"{i}.log"
        path.write_bytes(data)
        assert summary(classify_file(path)) == in_python(data)


@needs_grep
def test_a_file_that_grows_while_read_is_found_whole(tmp_path: Path) -> None:
    first = messy_log(5, grepscan.GREP_MIN * 2)
    more = b"/src/late.cpp:1:1: error: 'uint8_t' was not declared in this scope\n" * 3 + messy_log(6, 50_000)
    path = tmp_path / "growing.log"
    path.write_bytes(first)
    with open(path, "rb") as fh:
        c = Classifier()
        c.search_file(fh)
        with open(path, "ab") as out:  # the build writes on after the search started
            out.write(more)
        classify_stream(fh, c, chunk=100_000)
    assert summary(c) == in_python(first + more, 100_000)


@needs_grep
def test_a_grep_that_dies_leaves_the_search_to_python(tmp_path: Path) -> None:
    data = messy_log(7, grepscan.GREP_MIN * 4)
    path = tmp_path / "x.log"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        c = Classifier()
        c.search_file(fh)
        assert c._file is not None
        c.feed(fh.read(200_000))
        c._file._proc.kill()  # mid-way: what it said so far was taken only where it was complete
        classify_stream(fh, c, chunk=200_000)
    assert summary(c) == in_python(data, 200_000)


def test_no_file_search_for_small_files_pipes_or_other_files(tmp_path: Path) -> None:
    argv = ["grep", "-a", "-b", "-E", "-e", "error"]
    small = tmp_path / "small.log"
    small.write_bytes(b"error\n")
    with open(small, "rb") as fh:
        assert FileSearch.start(argv, fh, min_size=1024) is None
    r, w = os.pipe()
    with os.fdopen(r, "rb") as fh, os.fdopen(w, "wb"):
        assert FileSearch.start(argv, fh, min_size=0) is None  # a pipe: read once, by the classifier
    big = tmp_path / "big.log"
    big.write_bytes(b"error\n" * 1000)
    with open(big, "rb") as fh:
        big.rename(tmp_path / "moved.log")
        big.write_bytes(b"error\n" * 1000)  # the name now points at another file
        assert FileSearch.start(argv, fh, min_size=0) is None


@needs_grep
def test_grep_output_is_read_as_offsets_and_lengths_however_long_the_lines(tmp_path: Path) -> None:
    lines = [b"ok", b"x" * (3 << 20) + b" error", b"error: 1", b"", b"y" * 70_000 + b"error" + b"z" * 70_000, b"ok"]
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / "long.log"
    path.write_bytes(data)
    want, pos = [], 0
    for line in lines:
        if b"error" in line:
            want.append((pos, len(line)))
        pos += len(line) + 1
    argv = [str(grepscan.gnu_grep()), "-a", "-b", "-E", "-e", "error"]
    with open(path, "rb") as fh:
        search = FileSearch.start(argv, fh, min_size=0)
        assert search is not None
        try:
            assert search.line_starts(0, 3) == []
            assert search.line_starts(3, len(data)) == want
            assert search.line_starts(len(data), len(data) + 1) is None  # beyond the size at start
        finally:
            search.close()


def _parsed(pieces: list[bytes]) -> tuple[list[tuple[int, int]], bool]:
    """What FileSearch makes of grep's output arriving in these pieces: its entries, and whether it failed."""
    search = FileSearch.__new__(FileSearch)
    search._starts, search._lengths, search._head, search._offset, search._length = [], [], b"", -1, 0
    try:
        for piece in pieces:
            search._parse(piece)
    except ValueError:
        return list(zip(search._starts, search._lengths)), True
    return list(zip(search._starts, search._lengths)), bool(search._head or search._offset >= 0)


@pytest.mark.parametrize("seed", range(6))
def test_grep_output_cut_anywhere_is_parsed_as_line_by_line(seed: int) -> None:
    """The bulk parse of whole output lines and the line-by-line parse of the cut ones give one answer, wherever
    the pieces of grep's output are cut (inside an offset, right after its colon, at or next to a newline)."""
    rnd = random.Random(seed)
    lines, want, pos = [], [], 0
    for _ in range(rnd.randint(1, 400)):
        text = bytes(rnd.choice(b"ab:0123 \t") for _ in range(rnd.choice([0, 1, 5, 80, 3000])))
        lines.append(b"%d:%s\n" % (pos, text))
        want.append((pos, len(text)))
        pos += len(text) + rnd.randint(1, 10**6)
    out = b"".join(lines)
    cuts = sorted(rnd.sample(range(len(out) + 1), min(len(out) + 1, rnd.choice([0, 1, 3, 50, 2000]))))
    pieces = [out[a:b] for a, b in zip([0, *cuts], [*cuts, len(out)]) if b > a]
    assert _parsed(pieces) == (want, False)


@pytest.mark.parametrize("bad", [b"12:ok\nxx:no offset\n", b"12:ok\n\n", b"12:ok\nnocolon\n13:ok\n", b"1" * 30,
                                 b"x1:ok\n12:ok\n", b":ok\n12:ok\n", b"12:ok\n 13:ok\n14:ok\n", b"+12:ok\n13:ok\n",
                                 b"12:ok\n1_3:ok\n14:ok\n", b"nocolon\n12:ok\n"])
def test_output_that_is_not_grep_offsets_fails_the_search(bad: bytes) -> None:
    for cut in range(len(bad) + 1):
        pieces = [p for p in (bad[:cut], bad[cut:]) if p]
        entries, failed = _parsed(pieces)
        assert failed, (cut, entries)


@needs_grep
@pytest.mark.parametrize("long_line", [False, True])
def test_a_files_candidates_are_two_lists_of_ints_one_where_no_line_is_long(tmp_path: Path, long_line: bool) -> None:
    """TriggerSearch.spans over a file's grep: the starts and positions lines() pairs (the Python search's starts; a
    long line's first trigger where it puts it), as lists of ints, one list where no line is long (no pair a line)."""
    from legacy_gpu_patch.classify.classifier import load_rules
    from legacy_gpu_patch.classify.fastpath import MATCH_WINDOW
    from legacy_gpu_patch.classify.scan import TriggerSearch

    data = messy_log(3, grepscan.GREP_MIN * 2)
    if long_line:
        data += b"x" * (MATCH_WINDOW * 2) + b" error: late\n" + data
    path = tmp_path / "log"
    path.write_bytes(data)
    search = TriggerSearch(load_rules().triggers)
    half = data.index(b"\n", len(data) // 2) + 1
    with open(path, "rb") as fh:
        file = search.file_search(fh)
        assert file is not None
        try:
            for lo, hi in ((0, half), (half, len(data))):
                block = data[lo:]  # block[0] is byte `lo` of the file
                starts, hits = search.spans(block, 0, hi - lo, block.isascii(), file, lo)
                plain = search.python_lines(block, 0, hi - lo, block.isascii())
                assert starts == [s for s, _ in plain] and all(type(s) is int for s in starts + hits)
                assert list(zip(starts, hits)) == search.lines(block, 0, hi - lo, block.isascii())
                longs = [(s, h) for s, h in plain if block.index(b"\n", s) - s > MATCH_WINDOW]
                assert (hits is starts) is not longs and set(longs) <= set(zip(starts, hits))
        finally:
            file.close()
