"""The literal index's answers kept per set of strings found (literalindex.LiteralIndex.answer) equal what holds()
and rules_of() make of a fresh search, line by line, on the rules' examples, the fixture logs and the bench's
distinct-word log (where nearly every line is new but the sets found repeat); the table is bounded, and an answer
kept for another set is never handed out."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from test_located_index import BENCH, compiled_index, lines_to_check, whole

from legacy_gpu_patch.classify import literalindex
from legacy_gpu_patch.classify.classifier import normalize
from legacy_gpu_patch.classify.literalindex import LiteralIndex


def words_lines(path: Path, size: int) -> list[str]:
    """The error lines of the bench's distinct-word log (bench/classify_logs.py), normalized."""
    sys.path.insert(0, str(BENCH))
    try:
        from classify_logs import generate_dense_words  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    generate_dense_words(path, size)
    return [normalize(t) for t in path.read_text("utf-8").splitlines()[4::5]]


def fresh(cls: type[LiteralIndex] = LiteralIndex) -> LiteralIndex:
    """A copy of the shipped rules' compiled index with an empty table (the prepared one is shared by the tests)."""
    shared = compiled_index()
    index = cls.__new__(cls)
    index.__setstate__(shared.__getstate__())
    index._finder = shared._finder
    return index


def check(index: LiteralIndex, lines: list[str]) -> int:
    """Every line's answer against a fresh search; returns how many were handed out from the table."""
    kept = 0
    for text in lines:
        low = text.lower()
        known = frozenset(index._found(low)) in index._answers
        assert index.answer(low) == whole(index, low), text
        kept += known
    return kept


def test_answers_kept_per_set_found_are_the_fresh_ones(tmp_path: Path) -> None:
    index = fresh()
    lines = lines_to_check(tmp_path) + words_lines(tmp_path / "words.log", 1 << 20)
    kept = check(index, lines)
    assert kept > len(lines) // 2  # the table is used: the sets found repeat
    assert len(index._answers) < len(lines) // 4


def test_the_answers_of_the_plain_searches_are_the_tries(tmp_path: Path) -> None:
    """Before the trie is compiled the strings are tested one by one (a superset of what findall gives, closed
    under containment): the answer is the same."""
    trie = fresh()
    lines = words_lines(tmp_path / "words.log", 1 << 18)[:200]
    plain = LiteralIndex.__new__(LiteralIndex)
    plain.__setstate__(trie.__getstate__())
    plain._plain_left = len(lines)
    for text in lines:
        low = text.lower()
        assert plain.answer(low) == trie.answer(low), text
    assert not plain.compiled()


def test_the_table_starts_again_when_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(literalindex, "MAX_ANSWERS", 8)
    index = fresh()
    lines = words_lines(tmp_path / "words.log", 1 << 18)
    check(index, lines)
    assert len(index._answers) <= 8


def test_a_table_keyed_on_less_than_the_set_found_is_caught(tmp_path: Path) -> None:
    """Mutation check: answers kept per the line's first string found (not the whole set) are wrong on these lines,
    and check() sees it."""

    class Mutant(LiteralIndex):
        __slots__ = ()

        def answer(self, low: str) -> tuple[frozenset[str], list[int]]:
            found = sorted(self._found(low))
            key = frozenset(found[:1])
            got = self._answers.get(key)
            if got is None:
                got = self._answers[key] = (self.holds(found), self.rules_of(found))
            return got

    mutant = fresh(Mutant)
    lines = words_lines(tmp_path / "words.log", 1 << 18)
    try:
        check(mutant, lines)
    except AssertionError:
        return
    raise AssertionError("the mutant's answers passed")


def test_ascii_lines_search_the_ascii_strings_trie_alike(tmp_path: Path) -> None:
    """An ASCII line is searched with the trie of the ASCII strings alone: findall reports what the whole trie
    reports; a line that is not ASCII is searched with the whole trie (its localized words found)."""
    index = fresh()
    index._finder, index._plain_left = None, 0  # past the plain searches, no trie compiled yet
    assert index.ascii_source is not None and index.source is not None
    assert len(index.ascii_source) < len(index.source)
    whole_trie = re.compile(index.source).findall
    lines = [t.lower() for t in lines_to_check(tmp_path) + words_lines(tmp_path / "words.log", 1 << 18)]
    ascii = [low for low in lines if low.isascii()]
    assert len(ascii) > 1000 and len(ascii) < len(lines)
    for low in ascii:
        assert list(index._found(low)) == whole_trie(low), low
    assert index._finder is None  # only the ASCII trie was needed
    low = "/src/a.c:1: référence indéfinie vers « cusparsescsrmm2 »"
    assert "référence indéfinie vers" in index.holds(index._found(low))
    assert index._finder is not None


def test_an_ascii_trie_missing_a_string_is_caught(tmp_path: Path) -> None:
    """Mutation check: the ASCII trie built without one ASCII string (`error:`) reports other strings on some line."""
    index = fresh()
    strings = [s for s in index.contained if s.isascii() and s != "error:"]
    index.ascii_source = "(?=(" + literalindex._trie(strings) + "))"
    whole_trie = re.compile(str(index.source)).findall
    lines = [t.lower() for t in words_lines(tmp_path / "words.log", 1 << 16)]
    assert any(list(index._found(low)) != whole_trie(low) for low in lines)
