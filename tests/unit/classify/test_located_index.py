"""The literal index's answer put together from a located line's head and rest (located.py) equals the whole line's.

Checked on every fixture log line, every rule example, the bench's generated error-dense log, and those lines given
locations of many paths (digits, index strings and digit-holding index strings in them) and rests that hold the
index's digit strings (`signal 9`, `csr2csc`, `c2664`): the strings held and the rules selected, in order, equal
what one search of the whole lowered line gives; an index holding a string that reaches from a path past its
location's digit is not split.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

from test_pathfold import FIXTURES, PATHS, TAILS
from test_shapes import classified

from legacy_gpu_patch.classify.classifier import Classifier, load_rules, normalize
from legacy_gpu_patch.classify.located import LocatedIndex
from legacy_gpu_patch.classify.pathfold import location_path
from legacy_gpu_patch.classify.prepare import LiteralIndex, prepared

BENCH = Path(__file__).resolve().parents[3] / "bench"

MORE_PATHS = [*PATHS, "src/csr2csc.cu", "a/int64_t/signal.h", "x/c2664.cpp", "lnk1181.c", "a/137.h",
              "src/cc1plus.cc", "/b/jinja2/ext.py", "z/(9.h"]
DIGIT_RESTS = ["error: died due to signal 9 here", "error: 'csr2csc' is undefined", "error C2664: cannot convert",
               "error: 'int64_t' was not declared", "fatal error: cc1plus: Killed signal 9",
               "error: libfoo.so.1) but linked against (9 x", "error: code: 137", "error: exit status 1370",
               "error: ünïcödé 'cusparseScsr2csc' ß İ", "warning: 0 error(s)"]


def generate_dense(path: Path, size: int) -> int:
    """The bench's error-dense log (bench/classify_logs.py)."""
    sys.path.insert(0, str(BENCH))
    try:
        from classify_logs import generate_dense as generate  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    return generate(path, size)


def whole(index: LiteralIndex, low: str) -> tuple[frozenset[str], list[int]]:
    found = index.found(low)
    return index.holds(found), index.rules_of(found)


def compiled_index(extra: tuple[str, ...] = ()) -> LiteralIndex:
    rules = load_rules()
    index = prepared(rules).index if not extra else LiteralIndex(rules, [*prepared(rules).index.contained, *extra])
    assert index.source is not None
    index._finder = re.compile(index.source).findall  # as after PLAIN_LINES searches
    return index


def lines_to_check(tmp_path: Path) -> list[str]:
    lines = [t for r in load_rules().rules for t in (*r.examples, *r.not_examples)]
    for path in sorted(FIXTURES.rglob("*.log")) + sorted(FIXTURES.rglob("*.corpus")):
        lines += path.read_text("utf-8", "replace").splitlines()
    dense = tmp_path / "dense.log"
    generate_dense(dense, 1 << 20)
    lines += dense.read_text("utf-8").splitlines()[4::5]  # its error lines
    rnd = random.Random(12)
    rests = [*DIGIT_RESTS]
    for t in lines[:4000]:
        cut = location_path(t)
        if cut:
            rests.append(re.sub(r"^(?::[0-9]+){1,2}: |^\([0-9]+(?:,[0-9]+)?\): ", "", t[cut:]))
    lines += [rnd.choice(MORE_PATHS) + rnd.choice(TAILS) + rnd.choice(rests) for _ in range(6000)]
    return [normalize(t) for t in dict.fromkeys(lines)]


def test_a_located_lines_answer_is_its_whole_lines_answer(tmp_path: Path) -> None:
    index = compiled_index()
    located = LocatedIndex(index)
    checked = 0
    for text in lines_to_check(tmp_path):
        low = text.lower()
        assert located.search(text, low) == whole(index, low), text
        checked += bool(location_path(text))
    assert located.exact is True
    assert checked > 7000  # most of them start with a location: the split path is the one checked
    assert 0 < len(located._heads) < checked  # heads are shared between lines


def test_rests_of_one_shape_holding_different_digit_strings_are_told_apart() -> None:
    index = compiled_index()
    located = LocatedIndex(index)
    # one rest shape (`signal 0`, `code 000`), different digit strings held: each answered as its own line
    for text in ["a.c:1:2: error: Killed signal 9", "a.c:1:2: error: Killed signal 1", "b.c:3:4: error: code 137",
                 "b.c:3:4: error: code 246", "b.c:3:4: error: code 137"]:
        assert located.search(text, text.lower()) == whole(index, text.lower()), text
    held, _ = located.search("a.c:1:2: error: Killed signal 9", "a.c:1:2: error: killed signal 9")
    assert "signal 9" in held
    held, _ = located.search("a.c:1:2: error: Killed signal 1", "a.c:1:2: error: killed signal 1")
    assert "signal 9" not in held


def test_an_index_with_a_string_reaching_past_a_locations_digit_is_not_split() -> None:
    index = compiled_index(extra=("x.cpp:1",))
    located = LocatedIndex(index)
    text = "src/x.cpp:12:3: error: 'sym' was not declared"
    assert located.search(text, text.lower()) == whole(index, text.lower())
    assert "x.cpp:1" in located.search(text, text.lower())[0]
    assert located.exact is False and not located._heads  # every line searched whole


def test_findings_of_a_dense_log_with_and_without_the_split_are_equal(tmp_path: Path) -> None:
    dense = tmp_path / "dense.log"
    generate_dense(dense, 1 << 20)
    data = dense.read_bytes()

    split = classified(data)
    original = LocatedIndex.search
    try:
        def unsplit(self: LocatedIndex, text: str, low: str) -> tuple[frozenset[str], list[int]]:
            return whole(self.index, low)
        LocatedIndex.search = unsplit  # type: ignore[method-assign]
        plain = classified(data)
    finally:
        LocatedIndex.search = original  # type: ignore[method-assign]
    assert split == plain
    findings, (errors, _, dropped, _) = split
    assert errors == len(data.splitlines()) // 5  # every error line counted: one line in five
    assert len(findings) == 500 and dropped == errors - sum(f["count"] for f in findings)


def test_lead_steps_chosen_by_the_index_answer_are_those_the_prefilters_pass(tmp_path: Path) -> None:
    c = Classifier()
    index = compiled_index()
    rnd = random.Random(3)
    steps = len(c._lead_steps)
    decided = 0
    for text in lines_to_check(tmp_path)[::3]:
        held = index.holds(index.found(text.lower()))
        skip = frozenset(rnd.sample(range(steps), 2)) if rnd.random() < 0.3 else frozenset()
        by_answer = c._lead_first(text, skip, held)
        by_in = c._lead_first(text, skip, None)  # each step's prefilter literals tested with `in`
        assert (by_answer and (by_answer[0], by_answer[1].id, by_answer[2].regs)) == (
            by_in and (by_in[0], by_in[1].id, by_in[2].regs)), text
        decided += by_answer is not None
    assert decided > 100  # the lead steps decide some of them (warnings, command echoes, progress lines)
    assert 0 < len(c._lead_orders) < 2000  # one list of steps per distinct answer


def test_heads_with_the_same_contexts_share_one_set_of_starting_rules() -> None:
    # memory: a table of thousands of new heads held a ~2 KB copy of the same rule set each (1 GB log: 250 MiB)
    rules = load_rules()
    index = compiled_index()
    located = LocatedIndex(index, prepared(rules).starts)
    rnd = random.Random(20)
    texts = [f"/src/{rnd.choice(MORE_PATHS)}{i}/x.cpp:{i}:2: error: 'w{i}' was not declared" for i in range(300)]
    texts += [f"/src/error/{i}/cuda/a.cu({i}): error: identifier \"y\" is undefined" for i in range(300)]
    answers = {}
    for text in texts:
        low = text.lower()
        cut = location_path(text)
        located.search(text, low)
        assert located.answer(low, cut) == whole(index, low), text
        present = frozenset(s for s in located._contexts if s in low[: cut + 1])
        expected = frozenset().union(*(r for c, r in located._groups if c.isdisjoint(present)))
        assert located.starts == expected, text
        answers.setdefault(present, set()).add(id(located.starts))
    assert len(located._heads) > 500 and len(answers) >= 2  # many heads; some with a context (`/error/`) in them
    assert all(len(ids) == 1 for ids in answers.values())
