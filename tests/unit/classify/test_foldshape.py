"""The path-folding shape in the matcher (foldshape.py): a new located shape decided through its folded shape, the
rules that could see its path tried on the line itself, gives the plain path's decision, spans and findings.

Checked decision by decision (unit, rule, every span) against Matcher.plain_match on the rules' examples and the
fixture logs' lines given locations of many paths (paths holding `error`, `cusparse`, `torch`, `cuda`, digits,
identifiers a rule reads, `.pyx`), and finding by finding on the bench's error-dense log, test_shapes' dense log,
pending-heavy, messy and fixture logs.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from test_grep_accelerator import FIXTURES, bench_logs, messy_log
from test_line_shortcuts import _pending_heavy_log
from test_pathfold import TAILS, message_lines
from test_shapes import dense_log

from legacy_gpu_patch.classify import foldshape
from legacy_gpu_patch.classify.casefold import _shifted
from legacy_gpu_patch.classify.classifier import Classifier, load_rules
from legacy_gpu_patch.classify.foldshape import PathFold, unit_contexts
from legacy_gpu_patch.classify.literalindex import PLAIN_LINES
from legacy_gpu_patch.classify.match import Matcher
from legacy_gpu_patch.classify.pathfold import location_path
from legacy_gpu_patch.classify.prepare import prepared
from legacy_gpu_patch.classify.rules import _any_of, _never
from legacy_gpu_patch.classify.shapes import NOT_FOLDED

# paths a rule could read: its literals (`torch`, `cuda`, `imp`, `std`, `cudnn`, `thc`, `nose`), its contexts
# (`error`, `identifier`, `cusparse...`, `__shfl`), a key name, digits, `.pyx`, the shortest, the fold token itself
PATHS = ["/src/pytorch/aten/src/ATen/native/cuda/SortImpl.cu", "/src/error/a.cpp", "src/ErrorHandling.cpp",
         "src/identifiercusparsex.cu", "/a/cusparseScsrmm2.cu", "/a/cusparse/csrmm2/b.cu", "/x/FOO_BAR.h",
         "/a/12/34.cpp", "/usr/include/c++/9/bits/std_function.h", "/a/torch.utils.ffi/b.py", "/a/nose/imp.py",
         "/a/identifier/x.cu", "/b/undeclared_identifier/x.cpp", "src/x.pyx", "p.c", "torch/p.c", "/a/cudnn/b.cpp",
         "/a/thc/THCGeneral.h", "/a/__shfl/x.cuh", "/a/warning/x.c", "/a/note/x.c", "/a/int8_t.h", "k.h",
         "/w/error/torch/imp/p.c", "/c10/cuda/CUDAException.h", "/a/fatal/b.cc", "/a/c2664/b.cpp", "/a/csr2csc.cu",
         "/src/undefined_reference.cc", "/a/kernel_launch_check.cu", "/q/__cuda_arch__.cuh", "/a/std/b.hpp",
         # a `^` unit's words at a path's start: the lead step's progress words, compiler names, `error`
         "copying/x.c", "Cythonizing.pyx", "creating/a.cu", "Installing/b.cpp", "gcc/x.c", "error12.cu"]


# lines whose path decides a rule that reads it (the rule is then tried on the line itself)
PATH_DECIDES = ["cmake_cuda_compiler.h:1:2: is not a full path", "/cusparseSfoo.cu:3:4: x was removed",
                "/src/error/a.cpp:1:2: 'numeric_limits'ist kein Element von'std'\u200b",
                "src/identifiercusparsex.cu:1:2: is undefined", "/a/torch.cu(4): module 'torch' has no attribute 'x'",
                "/b/cusparseScsrmm2.cu:5:6: error: identifier \"y\" is undefined", "error.c:1: fatal: x",
                "/a/cudnn/b.cpp:1:2: error: 'cudnnGetConvolutionForwardAlgorithm' was not declared in this scope",
                "copying/x.c:1:2: error: y", "Cythonizing.pyx:3:4: error: z", "creating/a.cu(3): error: w",
                "Installing/b.cpp:5: fatal error: q.h: No such file or directory", "Copying.cpp(1,2): x"]


def _matcher() -> Matcher:
    """A matcher as the shape cache finds it on an error-dense log: its literal index's trie compiled."""
    m = Matcher()
    for _ in range(PLAIN_LINES + 1):
        m._index.found("x")
    assert m._index.compiled()
    return m


def _located_lines(seed: int, count: int) -> list[str]:
    rnd = random.Random(seed)
    rests = message_lines()
    lines = [p + t + r for p in PATHS for t in TAILS for r in rnd.sample(rests, 8)]
    lines += [rnd.choice(PATHS) + rnd.choice(TAILS) + rnd.choice(rests) for _ in range(count)] + PATH_DECIDES
    return [t for t in lines if location_path(t)]


def _decision(found: Any) -> Any:
    if found is None:
        return None
    unit, rule, m = found
    return unit, rule.id, tuple(m.regs), m.group(0)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_located_line_is_decided_through_its_folded_shape_as_the_plain_path_decides_it(seed: int) -> None:
    m = _matcher()
    fold = PathFold(m._shape_cache())
    lines = _located_lines(seed, 6_000)
    folded = 0
    for text in lines * 2:  # the second time, every folded shape is known
        got = fold.decide(m, text)
        want = m.plain_match(text)
        if got is NOT_FOLDED:
            assert not text.isascii()
            continue
        folded += 1
        assert _decision(got) == _decision(want), text
        if got is not None:
            assert got[2].string == text
    assert folded > 10_000
    assert len(fold.folded.entries) < len(set(lines))  # lines of different paths share a folded shape


def test_which_heads_the_rules_an_error_dense_log_tries_most_are_aware_on() -> None:
    rules = load_rules()
    prep = prepared(rules)
    contexts = unit_contexts(rules, prep.lead)
    steps = len(prep.lead)
    by_id = {r.id: contexts[steps + i - rules.lead] for i, r in enumerate(rules.rules) if i >= rules.lead}
    # its optional location prefix `\S.*?` reads the path from 0 alike in every path, its other threads die in
    # the location (pathstart.py): aware on no head
    assert by_id["compiler-error"] == ((), ())
    # the merged lead exceptions: the command echoes and test results die in the location, the progress words
    # (`^Cythonizing`, `^[Cc]opying`, ...) may be a path's start: aware where a head holds one
    lead = contexts[0]
    assert lead is not None and lead[1] == ()
    assert {"cythonizing", "opying", "creating", "installing", "byte-compiling"} <= set(lead[0])
    # read through the strings a match starting in the path holds there (pathcontext._prefix_inside)
    assert by_id["cuda-compiler-not-found"] == (("cmake_cuda_compiler",), ("cuda", "nvcc"))
    removed = by_id["cusparse-removed"]
    assert removed is not None and {"cusparse", "error", "fatal"} <= set(removed[0])
    assert by_id["torch-python-api-removed"] == ((), ("torch",))  # only its literal can lie in a path
    cuda_api = by_id["cuda-api-removed"]
    assert cuda_api is not None and "error" in cuda_api[0]  # its `^(?=.*\berror\b)` branch reads `error` in a path


def test_the_fold_token_holds_the_heads_literals_and_the_units_it_cannot_stand_for_are_aware() -> None:
    m = _matcher()
    fold = PathFold(m._shape_cache())
    fold._load(m)
    token, aware = fold._head("/src/pytorch/aten/sortimpl.cu:")
    assert token == "imp/torch/p.c"
    torch_rule = next(u for u, c in enumerate(fold.tables.contexts) if c == ((), ("torch",)))
    assert torch_rule not in aware  # selected on both lines alike
    assert fold.tables.always <= aware
    _, aware = fold._head("/src/error/a.cpp:")
    cuda_api = [u for u, c in enumerate(fold.tables.contexts) if c is not None and "error" in c[0]]
    assert cuda_api and set(cuda_api) <= aware  # a context of their patterns in the path: tried on the line
    token, aware = fold._head("a.c(")
    assert token == "p.c" and aware == fold.tables.always


def test_spans_move_past_the_token_and_one_inside_it_is_not_known() -> None:
    assert _shifted(((0, 20), (5, 9), (-1, -1)), 10, 3) == ((0, 30), (15, 19), (-1, -1))
    assert _shifted(((3, 3),), 4, 3) == ((7, 7),)
    assert _shifted(((1, 9),), 4, 3) is None
    assert _shifted(((4, 2),), 4, 3) is None


def _summary(log: bytes, fold: bool, **caps: Any) -> Any:
    c = Classifier(**caps)
    c.fold_paths = fold
    c.feed(log)
    found = c.close()
    return [f.to_dict() for f in found], (c.errors, c.warnings, c.dropped, c.lines)


def test_findings_with_the_folded_shape_are_the_plain_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"folded": 0}
    original = foldshape.PathFold.decide

    def counted(self: Any, matcher: Any, text: str) -> Any:
        found = original(self, matcher, text)
        calls["folded"] += found is not NOT_FOLDED
        return found

    monkeypatch.setattr(foldshape.PathFold, "decide", counted)
    fixtures = b"".join(p.read_bytes() for p in sorted(FIXTURES.rglob("*.log")))
    _, dense, _ = bench_logs(tmp_path, 1_500_000)
    adversarial = "".join(f"[{i}/9] Building x.o\n{t}\n"
                          for i, t in enumerate(_located_lines(3, 3_000))).encode("utf-8", "surrogateescape")
    for log in (dense, dense_log(12_000, 3), fixtures + adversarial + fixtures, _pending_heavy_log(3),
                messy_log(6, 400_000)):
        want = _summary(log, False)
        assert _summary(log, True) == want
        # without known lines every new shape is decided here (with them, most are taken by knownfold/knownclass)
        assert _summary(log, True, known_lines=False) == want
        assert _summary(log, True, max_findings=7, max_occurrences=2) == _summary(log, False, max_findings=7,
                                                                                  max_occurrences=2)
    assert calls["folded"] > 5_000


def test_a_line_that_holds_none_of_the_trial_gate_s_strings_would_try_no_aware_unit() -> None:
    """FoldedLines._aware_first skips the index's answer where the gate finds nothing: _order, given the answer,
    must then try no unit up to the decider, for every decider a line could have."""
    m = _matcher()
    fold = PathFold(m._shape_cache())
    fold.decide(m, "a.c:1:2: x")  # reads the proofs
    rnd = random.Random(5)
    skipped = tried = 0
    units = len(fold.tables.contexts)
    for text in _located_lines(3, 3_000):
        if not text.isascii():
            continue
        low = text.lower()
        cut = location_path(text)
        _, aware = fold._head(low[: cut + 1])
        held, rules = m._located.answer(low, cut)
        for first in {min(aware, default=0), max(aware, default=0), rnd.randrange(units), units, 1 << 30}:
            gate = fold.trial_gate(m, aware, first)
            order = [u for u in fold._order(m, held, rules, aware) if u <= first]
            if gate is not None and gate(low) is None:
                assert not order, (text, first)
                skipped += 1
            else:
                tried += bool(order)
    assert skipped > 1_000 and tried > 100


def test_the_trial_gate_finds_a_string_exactly_where_the_flat_alternation_does() -> None:
    """_any_of (a trie of the strings that hold no other) against the alternation of all of them, on lines built of
    the strings, their pieces and their neighbours, for sets where strings hold others and share prefixes."""
    import re

    rnd = random.Random(12)
    base = ["warning", "warning(s)", " ptx", "kernel image", "kernel image is invalid", "killed", "invalid_ptx",
            "invalidptx", "cusparse", "csrmm", "no error", "errors", "error(s)", "убито", "已杀死", "std", "a"]
    sets = [set(base), set(base[:-1]), {"ab", "abc", "b"}, {""}, {"x"}, set(rnd.sample(base, 5))]
    for strings in sets:
        flat = re.compile("|".join(map(re.escape, sorted(strings)))).search
        gate = _any_of(strings)
        pieces = [*strings, *(s[: len(s) // 2] for s in strings), *(s[len(s) // 2 :] for s in strings), " ", "w",
                  "(", "/src/a.cpp:1:2: ", "é"]
        found = 0
        for _ in range(3000):
            line = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))
            assert (gate(line) is None) is (flat(line) is None), (strings, line)
            found += flat(line) is not None
        assert 0 < found < 3000 or strings == {""}
    assert _any_of(set()) is _never
