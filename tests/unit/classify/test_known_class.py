"""Head classes (knownclass.py): a new raw shape learnt from its head's class and its rest's shape gives the findings,
counts, line numbers and contexts of the folded way (classes off) and of the long way (no fold, no known lines).

Compared on the bench's error-dense log, test_shapes' dense log, pending-heavy, messy and fixture logs, the located
log of test_known_folded, and a log built for the classes: each message under many paths of one class with its digit
runs' lengths changed, and under paths that leave a class or change it (digits, `error`, `ehler`, `.o/`, a first
letter of `BLGCS`, a CI prefix's first character, progress words the raw fast path reads, `cusparse`, `cuda`),
backquoted, holding an entry's digit strings (`csrmm2`, `C2664`); in several chunkings, the caps small and large.
The proofs: pathstart.path_decides against the raw fast path's regex on located lines of many paths, tails and
rests, and on hand-written patterns; PathFold.gate_splits against the gate on the whole line.
"""

from __future__ import annotations

import io
import random
import re
from pathlib import Path
from typing import Any

import pytest
from test_foldshape import PATH_DECIDES, PATHS, _located_lines
from test_grep_accelerator import FIXTURES, bench_logs, messy_log, summary
from test_known_folded import _located_log, heard
from test_line_shortcuts import _pending_heavy_log
from test_pathfold import TAILS, message_lines
from test_shapes import dense_log

from legacy_gpu_patch.classify import knownclass
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream
from legacy_gpu_patch.classify.foldshape import PathFold
from legacy_gpu_patch.classify.match import Matcher
from legacy_gpu_patch.classify.pathfold import location_path
from legacy_gpu_patch.classify.pathstart import path_decides
from legacy_gpu_patch.classify.shapes import RAW_TO_ZERO

_HEADS = ["/src/pytorch/aten/src/ATen/native/{d}/Sort{n}.cpp", "/src/torch/csrc/{d}/Loss{n}.cu", "src/{d}/x{n}.cpp",
          "/a/error/{d}/y{n}.cpp", "/a/fehler/{d}/z{n}.cpp", "/a/b.o/{d}/w{n}.cpp", "Build/{d}/v{n}.cpp",
          "Copying/{d}/u{n}.cpp", "copying/{d}/t{n}.cpp", "2024/{d}/s{n}.cpp", "/a/cusparse/{d}/r{n}.cu",
          "/w/c2664/{d}/q{n}.cpp", "/w/lnk1181/{d}/p{n}.cu", "creating/{d}/o{n}.c", "/a/imp/{d}/n{n}.cpp",
          "/a/cuda/{d}/m{n}.cu", "Lib/{d}/l{n}.cpp", "/x/{d}/k{n}.pyx"]
_MESSAGES = ["{p}:{l}:{c}: error: 'sym{i}' was not declared in this scope",
             '{p}({l}): error: identifier "cusparseScsrmm{i}" is undefined',
             "{p}:{l}:{c}: error: no member named 'fn{i}' in namespace 'at'",
             "{p}:{l}:{c}: error: no matching function for call to 'launch{i}(double*, float)' C{i}",
             "{p}:{l}: error: `x{i}' undeclared (first use in this function)",
             "{p}({l},{c}): warning: variable 'v{i}' set but not used",
             "{p}:{l}:{c}: note: candidate expects {i} arguments",
             "{p}:{l}:{c}: error: expected ';' before '}}' token {i} "]


def _class_log(seed: int, count: int = 30_000) -> bytes:
    """Each message under many paths of a few classes (digit runs of several lengths), and under paths that leave a
    class or change it (module docstring), between progress lines."""
    rnd = random.Random(seed)
    dirs = ["a", "bb", "cuda", "imp", "torch", "x9", "error", "warning"]
    lines = []
    for k in range(count):
        path = rnd.choice(_HEADS).format(d=rnd.choice(dirs), n=rnd.choice(["", "A", "Bc", "7", "12"]))
        text = rnd.choice(_MESSAGES).format(p=path, l=rnd.randint(1, 9999), c=rnd.randint(1, 99),
                                            i=rnd.choice([2, 21, 2664, 2665, 5, 77, 123, 98765, rnd.randint(1, 10**6)]))
        lines.append(f"[{k}/99] Building CXX object x.o\n{text}\n" if k % 4 else f"{text}\n")
    return "".join(lines).encode()


def _run(log: bytes, classes: bool, chunk: int = 4 << 20, fold: bool = True, **kwargs: Any) -> Classifier:
    c = Classifier(**kwargs)
    c.classes = classes
    c.fold_paths = fold
    return classify_stream(io.BytesIO(log), c, chunk=chunk)


@pytest.mark.parametrize("caps", [{}, {"max_findings": 7, "max_occurrences": 2}, {"max_findings": 5000}])
def test_a_line_learnt_by_its_head_class_is_found_as_the_folded_and_the_long_way_find_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caps: dict[str, int]) -> None:
    learnt = {"class": 0, "none": 0}
    original = knownclass.ClassedLines._learn_by_class

    def counted(self: Any, raw: bytes, key: bytes) -> Any:
        found = original(self, raw, key)
        learnt["class" if found is not None else "none"] += 1
        return found

    monkeypatch.setattr(knownclass.ClassedLines, "_learn_by_class", counted)
    fixtures = b"".join(p.read_bytes() for p in sorted(FIXTURES.rglob("*.log")))
    _, dense, _ = bench_logs(tmp_path, 1_500_000)
    for log in (_class_log(1), dense, _located_log(1), fixtures + _class_log(2, 5_000) + fixtures,
                dense_log(12_000, 3), _pending_heavy_log(3), messy_log(6, 400_000)):
        want = summary(_run(log, False, **caps))
        assert summary(_run(log, True, **caps)) == want
        if not caps:
            assert summary(_run(log, False, fold=False)) == want
            assert summary(_run(log, False, known_lines=False)) == want
            for chunk in (64 << 10, 1 << 20):  # lines cut across chunks, a waiting finding's next line in the next
                assert summary(_run(log, True, chunk, **caps)) == summary(_run(log, False, chunk, **caps))
    assert learnt["class"] > 3_000 and learnt["none"] > 500


def test_a_live_display_hears_of_a_line_learnt_by_its_class_as_of_the_folded_ways() -> None:
    log = _class_log(4, 8_000)
    on, off = heard(log, 20, classes=True)[0], heard(log, 20, classes=False)[0]
    assert on == off and len(on) > 300


def test_the_classes_are_kept_for_heads_of_a_class_and_not_for_the_others() -> None:
    c = _run(_class_log(5), True)
    assert c._heads is not None and c._by_class is not None and c._class_ids is not None
    classed = {h for h, found in c._heads.items() if found is not None}
    assert len(classed) > 100 and len(c._class_ids) < len(classed) / 10  # many heads, few classes
    for head in classed:  # clean heads only: none a CI prefix may start, no string plain_shape looks for
        assert not head.startswith((b"2024", b"Copying", b"copying", b"creating")), head
        assert b"fehler" not in head and b".o/" not in head
    assert any(h.startswith(b"Build/") for h in classed) and any(h.startswith(b"/a/error/") for h in classed)


def _skip() -> re.Pattern[bytes]:
    skip = Matcher()._raw_skip
    assert skip is not None
    return skip


def test_the_raw_fast_path_s_regex_reads_a_located_line_s_path_alone() -> None:
    """path_decides holds for the shipped regex, and the regex finds a match in every located line of a path
    exactly where it finds one in the others: paths of the tests, paths the regex reads (progress words), tails,
    rests of every rule's examples and fixture lines."""
    skip = _skip()
    assert path_decides(skip)
    rnd = random.Random(7)
    rests = [r.encode("utf-8", "surrogateescape") for r in rnd.sample(message_lines(), 200)]
    paths = [*PATHS, "copying/x.c", "Copying.cpp", "Cythonizing.pyx", "creating/a.cu", "Installing/b.cpp",
             "byte-compiling/x.py", "Building.c", "running.c", "cd.c", "gcc.c", "gcc-9.c", "--.c", "-.c", "x/cl.c",
             *(t.split(":")[0].split("(")[0] for t in PATH_DECIDES)]
    found = set()
    for path in paths:
        answers = {skip.match(path.encode() + tail.encode() + rest) is not None
                   for tail in TAILS for rest in rests}
        assert len(answers) == 1, path
        found |= answers
    assert found == {True, False}


@pytest.mark.parametrize(("pattern", "proven"), [
    (rb"[ \t]*(?:copying|Cythonizing|[Cc]reating)", True),  # runs of characters no `:`/`(` is: read in the path
    (rb"(?:Building (?:CXX|C) object|Installing)", True),  # a space: dead; a word: in the path
    (rb"(?:gcc|cc)[ \t]+-", True),  # a space after a path character: dead
    (rb"\S+::\S+ PASSED", True),  # no `::` in a location
    (rb"\S+:", False),  # reads the location's `:`
    (rb"[ \t]*(?:a.c:)", False),
    (rb".*error", False),  # reads on into the rest
    (rb"abc(?=:)", False),  # a look-ahead: not a run of characters
    (rb"(?>ab)", False),  # an atomic group: only a dead thread may hold one
    (rb"a(b)\1", False),  # a back-reference
    (rb"abc$", False),
])
def test_path_decides_on_hand_written_patterns(pattern: bytes, proven: bool) -> None:
    assert path_decides(re.compile(pattern)) is proven


def test_a_gate_that_splits_finds_a_string_where_the_head_or_the_rest_s_shape_holds_one() -> None:
    """PathFold.gate_splits: for every gate that splits, the gate finds a string in the lowered line exactly where it
    finds one in its head or in its rest, and in the rest exactly where in the rest's shape."""
    m = Matcher()
    fold = PathFold(m._shape_cache())
    fold.decide(m, "a.c:1:2: x")  # reads the proofs
    units = len(fold.tables.contexts)
    lines = [t for t in _located_lines(9, 3_000) if t.isascii()]
    lines += [t.decode() for t in _class_log(6, 3_000).splitlines() if location_path(t.decode())]
    checked = split = 0
    for text in lines:
        low = text.lower()
        cut = location_path(text)
        _, aware = fold._head(low[: cut + 1])
        for first in {min(aware, default=0), max(aware, default=0), units, 1 << 30}:
            gate = fold.trial_gate(m, aware, first)
            if gate is None or not fold.gate_splits(aware, first):
                continue
            split += 1
            rest = low[cut:]
            shape = rest.encode().translate(RAW_TO_ZERO).decode()
            whole = gate(low) is not None
            assert whole == (gate(low[: cut + 1]) is not None or gate(rest) is not None), text
            assert (gate(rest) is not None) == (gate(shape) is not None), text
            checked += whole
    assert split > 2_000 and checked > 50


def test_a_heads_token_and_units_kept_per_strings_present_are_those_worked_out_for_the_head() -> None:
    """PathFold._head keeps its answer per (strings present, last character): the same as working it out for each
    head (the code before that memo, written out here), on the heads of many located lines, in any order."""
    from legacy_gpu_patch.classify.foldshape import _PATH_ONLY, FOLD_TOKEN

    m = Matcher()
    fold = PathFold(m._shape_cache())
    fold.decide(m, "a.c:1:2: x")  # reads the proofs
    lines = [t for t in _located_lines(11, 2_000) if t.isascii()]
    lines += [t.decode() for t in _class_log(8, 2_000).splitlines() if location_path(t.decode())]
    heads = sorted({t.lower()[: location_path(t) + 1] for t in lines})
    random.Random(3).shuffle(heads)
    for head in heads:
        present = fold._present(head)
        words = sorted(s for s in present if s in fold.tables.literals and _PATH_ONLY.fullmatch(s))
        token = "".join(w + "/" for w in words) + FOLD_TOKEN
        mine = fold._present(token + head[-1])
        units = set(fold.tables.always)
        for s in present | mine:
            units |= fold.tables.regex.get(s, frozenset())
        for s in present ^ mine:
            units |= fold.tables.literals.get(s, frozenset())
        assert fold._head(head) == (token, frozenset(units)), head
    assert len(heads) > 500 and len(fold._by_present) < len(heads) / 5


def test_a_paths_digit_contexts_answer_is_worked_out_alike_with_or_without_a_digit() -> None:
    """knownfold._path_alike answers a path without an ASCII digit at once (no context of a digit in it): the same as
    testing each digit context's shape on the path's shape (the code before that shortcut, written out here), on the
    heads of many located lines, digits in their paths or not, and heads made to hold the contexts' shapes (the
    shipped rules' path contexts hold no digit today: the contexts here are such strings' shapes)."""
    from types import SimpleNamespace

    from legacy_gpu_patch.classify.knownfold import _path_alike
    from legacy_gpu_patch.classify.shapes import TEXT_TO_ZERO

    shapes = ("c0000", "int00_t", "sm_00", "cuda0.h", "lib0/x")
    lines = [t for t in _located_lines(12, 2_000) if t.isascii()]
    heads = {t.lower()[: location_path(t) + 1] for t in lines}
    heads |= {f"src/{s.replace('0', '7')}/a.c:" for s in shapes} | {f"src/{s}/a.c(" for s in shapes}
    heads |= {f"src/{s.replace('0', '')}/a.c:" for s in shapes}  # the context's letters without its digit
    told = set()
    for head in sorted(heads):
        fold = SimpleNamespace(memo={}, tables=SimpleNamespace(digit_shapes=shapes))
        expected = not any(s in head.translate(TEXT_TO_ZERO) for s in shapes)
        assert _path_alike(fold, head) == expected, head
        told.add((expected, any(ch.isdigit() for ch in head)))
    assert told == {(True, True), (True, False), (False, True)} and len(heads) > 50


def test_a_folded_entry_that_keeps_no_rule_is_learnt_again_from_a_line_holding_none_of_its_runs() -> None:
    """PathFold._folded_match: the first lines of a folded shape hold `672` (a run of no-matching-function, a digit-
    aware rule; the shape cache starts after 64 lines): its entry keeps no rule, and each line of the shape went the
    long way; a later line of the shape holding none of the runs learns it again, with the rule. Findings as with
    classes off, no fold, no known lines."""
    from legacy_gpu_patch.classify.shapes import shape_of

    rnd = random.Random(4)
    digits = [*(f"672{rnd.randint(100, 999)}" for _ in range(200)), *(str(rnd.randint(300_000, 999_999))
                                                                     for _ in range(3_000))]
    dirs = ["".join(rnd.choice("abcdefgh") for _ in range(6)) for _ in range(500)]  # new line shapes: decided anew
    lines = [f"/src/{rnd.choice(dirs)}/Sort.cpp:{rnd.randint(100, 999)}:{rnd.randint(10, 99)}: error: no matching "
             f"function for call to 'launch{i}(double*, float)'" for i in digits]
    log = "".join(f"[{k}/9] Building CXX object x.o\n{t}\n" for k, t in enumerate(lines)).encode()
    c = _run(log, True)
    folded = "p.c:000:00: error: no matching function for call to 'launch000000(double*, float)'"
    assert c._shapes is not None and c._shapes.fold is not None
    entry = c._shapes.fold.folded.entries[shape_of(folded)]
    assert entry[2] is not None and entry[2].id == "no-matching-function"
    want = summary(_run(log, False, fold=False))
    assert summary(c) == want == summary(_run(log, False)) == summary(_run(log, False, known_lines=False))
    for caps in ({"max_findings": 7, "max_occurrences": 2}, {"max_findings": 5000}):
        assert summary(_run(log, True, **caps)) == summary(_run(log, False, fold=False, **caps))


def test_the_proofs_kept_in_the_rule_cache_are_those_worked_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """Prepared.raw_path_decides (the rule cache's) is path_decides of the raw fast path's regex, and the harmless
    digit strings read back from the rule cache are those harmless_strings works out."""
    from legacy_gpu_patch.classify.knowndigits import harmless_strings
    from legacy_gpu_patch.classify.prepare import prepare, prepared
    from legacy_gpu_patch.classify.rules import load_rules

    monkeypatch.setenv("LGPATCH_CACHE", str(tmp_path))
    rules = load_rules()
    assert rules.shipped and prepared(rules).raw_path_decides is True
    assert prepare(rules).raw_path_decides is path_decides(_skip()) is True
    first, second = Classifier(), Classifier()
    want = harmless_strings(first.rules, prepared(first.rules).lead, first._aware_runs)
    assert first._harmless_strings() == want  # built and written
    assert list(tmp_path.rglob("harmless-*.pickle"))
    assert second._harmless_strings() == want and want  # read back
