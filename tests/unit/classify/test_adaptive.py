"""Adaptive learning (adaptive.py): the caches rest while nearly every candidate line is new, and the located index
(located.py) searches whole lines while nearly every head or rest shape is new, with the same results.

Findings, contexts, counts and line numbers with learning adaptive equal those with it never resting, always
resting and those of the plain path, on the bench's error-dense-words log (distinct identifiers and paths), its
error-dense and quiet logs, messy and fixture logs, in big and small chunks, with the caps low and high; the words
log is checked to make the caches rest (and keep less), the error-dense log not to; the located index's answers,
resting or not, equal the whole line's search on the words and dense logs' lines, and on a log of errors in a few
files naming distinct identifiers (its heads repeat, its rests do not), which makes it rest.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from test_grep_accelerator import FIXTURES, bench_logs, messy_log, summary

from legacy_gpu_patch.classify import adaptive
from legacy_gpu_patch.classify.adaptive import Learning
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream, normalize
from legacy_gpu_patch.classify.located import LocatedIndex


def _run(log: bytes, mode: str, chunk: int = 4 << 20, **kwargs: Any) -> Classifier:
    """mode: "adaptive" (the default), "never" (learning never rests), "always" (it rests from the start)."""
    c = Classifier(**kwargs)
    for learning in (c.learning, c._located.learning):  # the caches' and the located index's parts'
        if mode == "never":
            learning.enabled = False
        elif mode == "always":
            learning.on, learning.until = False, 1 << 60
    return classify_stream(io.BytesIO(log), c, chunk=chunk)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    quiet, dense, _, words = bench_logs(tmp_path_factory.mktemp("adaptive"), 1_500_000, words=True)
    return [words, dense, quiet]


def test_learning_rests_after_a_window_of_misses_and_probes_again() -> None:
    learn = Learning()
    learn.chunk(1 << 20)
    assert all(learn.miss(i) for i in range(adaptive.WINDOW))
    assert not learn.miss(adaptive.WINDOW)  # a window of misses only: rest
    assert learn.rests == 1 and not learn.on
    assert not learn.miss(adaptive.WINDOW + adaptive.REST_MIN - 1)
    start = adaptive.WINDOW + adaptive.REST_MIN
    assert learn.miss(start)  # the rest is over: a probe
    assert all(learn.miss(start + k) for k in range(1, adaptive.WINDOW))
    assert not learn.miss(start + adaptive.WINDOW) and learn.rests == 2
    assert learn.until == start + adaptive.WINDOW + 2 * adaptive.REST_MIN  # still missing: a longer rest


def test_learning_stays_on_where_misses_are_few_or_resting_is_off() -> None:
    learn = Learning()
    learn.chunk(1 << 20)
    assert all(learn.miss(i) for i in range(0, 20 * adaptive.WINDOW, 4))  # one line in four new
    assert learn.rests == 0
    never = Learning(enabled=False)
    never.chunk(10)
    never.chunk(1 << 20)  # numbering goes on across chunks
    assert all(never.miss(i) for i in range(4 * adaptive.WINDOW)) and never.rests == 0
    assert never.base == 10


@pytest.mark.parametrize("chunk", [4 << 20, 1 << 16])
@pytest.mark.parametrize("caps", [{}, {"max_findings": 20000, "max_occurrences": 20000}])
def test_adaptive_never_and_always_resting_give_the_plain_paths_findings(logs: list[bytes], chunk: int,
                                                                        caps: dict[str, int]) -> None:
    for log in logs:
        plain = summary(_run(log, "never", chunk, use_shapes=False, known_lines=False, **caps))
        for mode in ("adaptive", "never", "always"):
            assert summary(_run(log, mode, chunk, **caps)) == plain, mode


def test_messy_and_fixture_logs_give_the_same_findings_resting() -> None:
    fixtures = [p.read_bytes() for p in sorted(FIXTURES.rglob("*.log"))]
    for log in [messy_log(seed, 400_000) for seed in (1, 2)] + fixtures:
        never = summary(_run(log, "never"))
        assert summary(_run(log, "always")) == never
        assert summary(_run(log, "adaptive")) == never


def test_distinct_lines_make_the_caches_rest_and_keep_less(logs: list[bytes]) -> None:
    words, dense, _ = logs
    rested, learnt = _run(words, "adaptive"), _run(words, "never")
    assert rested.learning.rests > 0 and learnt.learning.rests == 0
    assert rested._known is not None and learnt._known is not None
    assert len(rested._known) * 3 < len(learnt._known)  # what resting stored: a fraction of what learning did
    assert _run(dense, "adaptive").learning.rests == 0  # a log of repeated shapes keeps learning


def test_the_words_log_is_one_of_distinct_error_lines(tmp_path: Path) -> None:
    import sys

    from test_grep_accelerator import BENCH

    sys.path.insert(0, str(BENCH))
    try:
        from classify_logs import generate_dense_words  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    path = tmp_path / "words.log"
    lines = generate_dense_words(path, 200_000)
    text = path.read_text().splitlines()
    assert len(text) == lines and abs(path.stat().st_size - 200_000) < 20_000
    errors = [line for line in text if "error" in line or "undefined reference" in line]
    assert len(errors) * 5 == pytest.approx(lines, rel=0.02)
    assert len(set(errors)) == len(errors)  # distinct: each names identifiers and a path of its own


def test_the_located_index_answers_alike_resting_or_not(logs: list[bytes]) -> None:
    from test_located_index import compiled_index, whole

    index = compiled_index()
    lines = [normalize(t) for log in logs[:2] for t in log.decode().splitlines()[4::5][:6000]]
    for mode in ("adaptive", "never", "always"):
        located = LocatedIndex(index)
        learning = located.learning
        if mode == "never":
            learning.enabled = False
        elif mode == "always":
            learning.on, learning.until = False, 1 << 60
        for text in lines:
            low = text.lower()
            assert located.search(text, low) == whole(index, low), (mode, text)
        assert (learning.rests > 0) == (mode == "adaptive"), mode  # the words log's new heads made it rest
        assert (len(located._heads) < 2000) == (mode != "never"), mode


def _few_files_log(lines: int, seed: int = 3) -> list[str]:
    """A failing build's errors in 420 files, each naming an identifier of its own: heads repeat, rests are new."""
    import random

    rnd = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz_"
    out = []
    for n in range(lines):
        word = "".join(rnd.choices(letters, k=rnd.randint(5, 12)))
        folder = ("mod", "cuda", "thc_")[n % 3]  # and heads that hold strings of the index (`cuda`, `thc`)
        out.append(f"src/{folder}{n % 20}/f{n % 7}.cpp:{rnd.randint(1, 900)}:{rnd.randint(1, 60)}: error: '{word}' "
                   f"was not declared in this scope")
    return out


def test_the_located_index_rests_where_heads_repeat_and_rests_are_new() -> None:
    from test_located_index import compiled_index, whole

    index = compiled_index()
    lines = [normalize(t) for t in _few_files_log(6000)]
    located = LocatedIndex(index)
    for text in lines:
        low = text.lower()
        assert located.search(text, low) == whole(index, low), text
    assert located.learning.rests > 0  # every rest new: no rest part learnt
    assert len(located._heads) <= 3 * 20 * 7 and len(located._rests) < 3000
    held = {bool(part[0]) for part in located._heads.values()}
    assert held == {True, False}  # heads holding none of the index's strings (the rest searched alone) and others


def test_findings_of_a_few_files_log_are_alike_resting_or_not() -> None:
    log = ("\n".join(line for n, e in enumerate(_few_files_log(6000))
                     for line in (f"[{n}/6000] Building CXX object a.dir/b{n}.o", e)) + "\n").encode()
    results = {mode: summary(_run(log, mode)) for mode in ("adaptive", "never", "always")}
    assert results["adaptive"] == results["never"] == results["always"]


def test_the_bench_logs_of_each_kind_of_newness_hold_what_they_say(tmp_path: Path) -> None:
    import re
    import sys

    from test_grep_accelerator import BENCH

    sys.path.insert(0, str(BENCH))
    try:
        from classify_logs import generate_dense_split  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    heads: dict[str, set[str]] = {}
    for kind in ("names", "paths"):
        path = tmp_path / f"{kind}.log"
        generate_dense_split(path, 300_000, kind)
        errors = [t for t in path.read_text().splitlines() if not t.startswith("[")]
        located = [t for t in errors if t.startswith("/src/")]
        heads[kind] = {re.sub(r"[:(][0-9].*", "", t) for t in located}
        messages = {re.sub(r"^\S+?[:(][0-9]+[:,)]?[0-9]*\)?:? ", "", t) for t in located}
        assert len(errors) * 5 == pytest.approx(len(path.read_text().splitlines()), rel=0.02)
        if kind == "names":
            assert len(heads[kind]) <= 140 and len(messages) > 0.95 * len(located)  # few files, new messages
        else:
            assert len(heads[kind]) > 0.95 * len(located) and len(messages) < 0.15 * len(located)  # few messages
