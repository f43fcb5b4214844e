"""A located line's search skips its path (pathcontext.start_contexts, used by match._gated_search through
located.py): where the head holds none of a rule's start contexts, `match(t) or search(t, cut)` is `search(t)`.

Checked on every shipped rule the proof accepts (its pattern and its lowered twin) over the rules' examples, the
fixture logs' and a generated error-dense log's lines, each also given locations of many paths; on hand-written
patterns of each kind, proven and refused; on lines whose path a rule does read (`identifiercusparsex.cu`), where the
head holds a context and the whole line is searched; and on the findings of a dense log with and without the skip.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from test_located_index import compiled_index, generate_dense, lines_to_check
from test_pathfold import PATHS, TAILS
from test_shapes import classified

from legacy_gpu_patch.classify.classifier import Classifier, load_rules
from legacy_gpu_patch.classify.located import LocatedIndex
from legacy_gpu_patch.classify.pathcontext import start_contexts
from legacy_gpu_patch.classify.pathfold import location_path
from legacy_gpu_patch.classify.prepare import compile_lowered, prepared

SKIP_PATHS = [*PATHS, "src/identifiercusparsex.cu", "a/cusparseScsrmv.cu", "src/undeclared identifier.h"]


@pytest.mark.parametrize(("pattern", "contexts"), [
    (r"^foo\w+", ()),  # anchored: only at 0
    (r"\Afoo", ()),
    (r"\w+: error", ()),  # may start in a path, ends at its `:` at the latest: holds `: error`, never in a head
    (r"error: (\w+)", ()),
    (r"cusparse\w+", ("cusparse",)),  # may lie in a path: its literal must be there
    (r"x|^y", ("x",)),
    (r"(?m)^y", ("y",)),  # a MULTILINE `^` is not taken as "only at 0"
    (r"(?<=a)b", ("b",)),  # a look-behind is passed over: nothing is compared with another text
    (r"[a-z]+\d", None),  # may read a path and the location's digit
    (r".*?error", None),
    (r"(a)\1", None),  # a back-reference: not followed
])
def test_start_contexts_of_handwritten_patterns(pattern: str, contexts: tuple[str, ...] | None) -> None:
    assert start_contexts(re.compile(pattern, re.IGNORECASE)) == contexts


def _regs(m: re.Match[str] | None) -> tuple[tuple[int, int], ...] | None:
    return None if m is None else m.regs


def test_skipping_the_path_finds_what_the_whole_search_finds(tmp_path: Path) -> None:
    rules = load_rules()
    prep = prepared(rules)
    rnd = random.Random(5)
    base = lines_to_check(tmp_path)
    located = [t for t in base if location_path(t)]
    lines = rnd.sample(located, 700) + [rnd.choice(SKIP_PATHS) + rnd.choice(TAILS) + t for t in rnd.sample(base, 700)]
    patterns = []
    for rule, contexts, (low, _) in zip(rules.rules, prep.starts, prep.lowered):
        if contexts is not None:
            patterns.append((rule.regex, contexts, False))
            twin = compile_lowered(low, rule.flags)
            if twin is not None:
                patterns.append((twin, contexts, True))
    assert len(patterns) > 200  # most rules are proven, lowered twins too
    checked = skipped_a_match = 0
    for text in lines:
        cut = location_path(text)
        low = text.lower()
        head = low[: cut + 1]
        for regex, contexts, lowered in patterns:
            if any(s in head for s in contexts):
                continue
            t = low if lowered else text
            whole = regex.search(t)
            assert _regs(regex.match(t) or regex.search(t, cut)) == _regs(whole), (regex.pattern[:80], text)
            checked += 1
            skipped_a_match += whole is not None and whole.start() >= cut
    assert checked > 300_000 and skipped_a_match > 800


def test_a_rule_that_reads_the_path_is_searched_whole_where_the_head_holds_its_context() -> None:
    rule = next(r for r in load_rules().rules if r.id == "cusparse-removed")
    text = "src/identifiercusparsex.cu:1:2: error: foo"
    cut = location_path(text)
    m = rule.regex.search(text)
    assert m is not None and 0 < m.start() < cut  # a match inside the path: skipping it would miss it
    index = compiled_index()
    located = LocatedIndex(index, prepared(load_rules()).starts)
    rules = load_rules().rules
    i = rules.index(rule)
    located.search(text, text.lower())
    assert located.cut == cut and i not in located.starts  # its contexts (`cusparse`, `identifier`) are in the path
    located.search("src/x.cu:1:2: error: foo", "src/x.cu:1:2: error: foo")
    assert i in located.starts


def test_findings_of_a_dense_log_with_and_without_the_skip_are_equal(tmp_path: Path) -> None:
    dense = tmp_path / "dense.log"
    generate_dense(dense, 1 << 20)
    data = dense.read_bytes().replace(b"/src/pytorch/c10/util/", b"/src/identifiercusparse/")  # some heads hold them

    skipping = classified(data)
    original = LocatedIndex._head
    try:
        def no_skip(self: LocatedIndex, head: str) -> tuple[frozenset[str], frozenset[int], frozenset[int]]:
            held, rules, _ = original(self, head)
            part = self._heads[head] = (held, rules, frozenset())
            return part
        LocatedIndex._head = no_skip  # type: ignore[method-assign]
        whole = classified(data)
    finally:
        LocatedIndex._head = original  # type: ignore[method-assign]
    assert skipping == whole
    assert skipping[1][0] == len(data.splitlines()) // 5  # errors: one line in five


def test_a_rule_set_not_shipped_skips_no_path_and_finds_the_same(tmp_path: Path) -> None:
    """Other rule files are read at every start: their start contexts are not read (~0.12 s), no path is skipped."""
    from legacy_gpu_patch.classify.rules import rule_files

    own = load_rules(rule_files())  # the shipped files, loaded as a user's rule files are
    assert not own.shipped and prepared(own).starts == ()
    dense = tmp_path / "dense.log"
    generate_dense(dense, 300_000)
    data = dense.read_bytes()
    results = []
    for rules in (own, load_rules()):
        c = Classifier(rules)
        c.feed(data)
        results.append(([f.to_dict() for f in c.close()], c.errors, c.dropped))
        if rules is own:  # no rule's search skips a path
            assert c._located._groups == () and not c._located.starts and c._located._heads
        else:
            assert c._located.starts
    assert results[0] == results[1] and results[0][1] > 500
