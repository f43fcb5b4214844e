"""Known folded lines (knownfold.py): a candidate line of a new raw shape taken by its folded shape's entry gives
the long way's findings, counts, line numbers and contexts.

Compared with the long way (the same classifier without the fold, and without known lines at all) on the bench's
error-dense log, test_shapes' dense log, pending-heavy, messy and fixture logs, and a log of the rules' examples and
the fixture lines given locations of paths that a rule reads (`error`, `cusparse`, `cmake_cuda_compiler`, digits,
`torch`, `.pyx`), with backquoted messages, in several chunkings and with the caps small and large. The head
classes (knownclass.py, tested in test_known_class.py) are off here: each new raw shape goes the folded way.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pytest
from test_foldshape import PATH_DECIDES, PATHS
from test_grep_accelerator import FIXTURES, bench_logs, messy_log, summary
from test_line_shortcuts import _pending_heavy_log
from test_pathfold import TAILS, message_lines
from test_shapes import dense_log

from legacy_gpu_patch.classify import knownclass, knownfold
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream


@pytest.fixture(autouse=True)
def _no_head_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(knownclass.ClassedLines, "classes", False)


FIXED_RESTS = ["error: `x' undeclared (first use in this function)",
               "error: 'cusparseScsrmm2' was not declared in this scope",
               "error: no matching function for call to 'f(int)' C2664"]


def _located_log(seed: int, every_path: bool = False) -> bytes:
    """Each message under many paths and locations (so that most lines are of a folded shape seen before), the
    lines whose path decides a rule among them, between progress lines. With `every_path`, the fixed messages also
    come under every path (paths of many lengths: an entry's spans are shifted for several cuts whatever the
    sample of the rules' examples and fixture lines is)."""
    rnd = random.Random(seed)
    rests = [*rnd.sample(message_lines(), 300), *FIXED_RESTS]
    lines = [rnd.choice(PATHS) + f":{rnd.randint(1, 999)}:{rnd.randint(1, 99)}: " + rest
             for rest in rests for _ in range(6)]
    if every_path:
        lines += [path + f":{rnd.randint(1, 999)}:{rnd.randint(1, 99)}: " + rest
                  for rest in FIXED_RESTS for path in PATHS for _ in range(2)]
    lines += [rnd.choice(PATHS) + rnd.choice(TAILS) + rnd.choice(rests) for _ in range(3_000)]
    lines += PATH_DECIDES * 3
    rnd.shuffle(lines)
    return "".join(f"[{i}/9] Building CXX object x.o\n{t}\n" if i % 3 else f"{t}\n"
                   for i, t in enumerate(lines)).encode("utf-8", "surrogateescape")


def _run(log: bytes, fold: bool, chunk: int = 4 << 20, **kwargs: Any) -> Classifier:
    c = Classifier(**kwargs)
    c.fold_paths = fold
    return classify_stream(io.BytesIO(log), c, chunk=chunk)


def _logs(tmp_path: Path) -> list[bytes]:
    fixtures = b"".join(p.read_bytes() for p in sorted(FIXTURES.rglob("*.log")))
    _, dense, _ = bench_logs(tmp_path, 1_500_000)
    return [dense, _located_log(1), fixtures + _located_log(2) + fixtures, dense_log(12_000, 3),
            _pending_heavy_log(3), messy_log(6, 400_000)]


@pytest.mark.parametrize("caps", [{}, {"max_findings": 7, "max_occurrences": 2}, {"max_findings": 5000}])
def test_a_line_taken_by_its_folded_shape_is_found_as_the_long_way_finds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caps: dict[str, int]) -> None:
    taken = {"folded": 0, "declined": 0}
    original = knownfold.FoldedLines._folded_line

    def counted(self: Any, *args: Any) -> int:
        done = original(self, *args)
        taken["folded" if done >= 0 else "declined"] += 1
        return done

    monkeypatch.setattr(knownfold.FoldedLines, "_folded_line", counted)
    for log in _logs(tmp_path):
        want = summary(_run(log, False, **caps))
        assert summary(_run(log, True, **caps)) == want
        if not caps:
            assert summary(_run(log, False, known_lines=False)) == want
            for chunk in (64 << 10, 1 << 20):  # lines cut across chunks, a waiting finding's next line in the next
                assert summary(_run(log, True, chunk, **caps)) == summary(_run(log, False, chunk, **caps))
    assert taken["folded"] > 1_000 and taken["declined"] > 50


def heard(log: bytes, max_findings: int, **settings: Any) -> tuple[list[tuple[str, int, bool]], Classifier]:
    """What a live display (on_finding) hears of `log` from a Classifier with the attributes `settings` set (the
    way under test on or off), and that classifier."""
    c = Classifier(max_findings=max_findings, max_occurrences=3)
    for name, value in settings.items():
        setattr(c, name, value)
    seen: list[tuple[str, int, bool]] = []
    c.on_finding = lambda f, new: seen.append((f.key, f.count, new))
    classify_stream(io.BytesIO(log), c)
    return seen, c


def test_a_live_display_hears_of_a_folded_line_as_of_the_long_ways(tmp_path: Path) -> None:
    log = _located_log(4)
    on, off = heard(log, 20, fold_paths=True)[0], heard(log, 20, fold_paths=False)[0]
    assert on == off and len(on) > 300


def test_a_raw_shape_learnt_from_its_folded_decision_decides_its_next_lines_as_the_long_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    learnt = {True: 0, False: 0}
    original = knownfold.FoldedLines._learn_folded

    def counted(self: Any, *args: Any) -> bool:
        ok = original(self, *args)
        learnt[ok] += 1
        return ok

    monkeypatch.setattr(knownfold.FoldedLines, "_learn_folded", counted)
    # lines of one path and message, the message's digits changed: some hold `csrmm2`, `C2664` (a digit string of
    # their entry: the long way), some not; paths without digits, with digits, and with digits in the shape of a
    # rule's context (`c2665`, `lnk1181`: learnt the long way, as another path of that shape may hold the context)
    rnd = random.Random(5)
    messages = ["{p}({l}): error: identifier \"cusparseScsrmm{i}\" is undefined",
                "{p}:{l}:{c}: error: no matching function for call to 'f{i}(int)' C{i}",
                "{p}:{l}:{c}: error: 'sym{i}' was not declared in this scope"]
    paths = ["/src/a/Sort.cu", "/src/c10/cuda/Loss.cu", "/src/error/x.cpp", "/src/torch/impl/y.cpp",
             "/src/c2665/z.cpp", "/w/lnk1181/v.cu", "/w/c1234/u.cu"]
    lines = [rnd.choice(messages).format(p=rnd.choice(paths), l=rnd.randint(1, 999), c=rnd.randint(1, 99),
                                         i=rnd.choice([2, 21, 2664, 2665, 5, 77, 123])) for _ in range(20_000)]
    log = "".join(f"[{i}/9] Building CXX object x.o\n{t}\n" for i, t in enumerate(lines)).encode()
    _, dense, _ = bench_logs(tmp_path, 1_000_000)
    for data in (log, dense):
        for caps in ({}, {"max_findings": 7, "max_occurrences": 2}):
            assert summary(_run(data, True, **caps)) == summary(_run(data, False, **caps))
    assert learnt[True] > 1_000 and learnt[False] > 10


def test_an_entrys_strings_and_shifted_spans_are_worked_out_once_and_read_per_cut() -> None:
    """FoldedLines._derived: the folded lines of the log are found as the long way finds them (the tests above), and
    the memo was read: entries with spans shifted for several paths' lengths, each shift what _shifted gives."""
    c = _run(_located_log(5, every_path=True), True)
    memo = c._entry_memo
    assert memo is not None and len(memo) > 20
    shifted = [(entry, key, moved) for entry, _, shifts in memo.values() for key, moved in shifts.items()]
    assert len(shifted) > 50 and max(len(shifts) for _, _, shifts in memo.values()) >= 3  # several cuts an entry
    for entry, (cut, token), moved in shifted:
        assert moved == knownfold._shifted(entry[4], cut - token, token)
