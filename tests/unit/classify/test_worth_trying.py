"""The rules plain_match tries on an ASCII line, kept per set of index strings the line holds
(match.Matcher._worth_trying), decide every line as the rules filtered anew for it do: checked on the rules'
examples, the fixture logs, the bench's dense log and its distinct-word log (unit, rule and every span), with a
mutant keyed on less than the set caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_literal_answers import words_lines
from test_located_index import lines_to_check

from legacy_gpu_patch.classify.match import Matcher, _holds_all


def anew(m: Matcher, held: frozenset[str], selected: list[int]) -> list[int]:
    """The rules filtered anew for a line (what plain_match did before they were kept)."""
    needs = map(m._factors.__getitem__, selected)
    return [i for i, need in zip(selected, needs) if need is None or _holds_all(need, held)]


class Fresh(Matcher):
    def _worth_trying(self, held: frozenset[str], selected: list[int]) -> list[int]:
        return anew(self, held, selected)


class Coarse(Matcher):
    """Mutant: kept per the number of strings held, not the set."""

    def _worth_trying(self, held: frozenset[str], selected: list[int]) -> list[int]:
        key: Any = len(held)
        worth = self._worth.get(key)
        if worth is None:
            worth = self._worth[key] = anew(self, held, selected)
        return worth


def decision(m: Matcher, text: str) -> tuple[int, str, tuple[tuple[int, int], ...]] | None:
    found = m.plain_match(text)
    return None if found is None else (found[0], found[1].id, tuple(found[2].regs))


def compiled(m: Matcher) -> Matcher:
    for _ in range(70):  # past the literal index's plain searches: its trie and the located index answer
        m.plain_match("a.c:1:2: error: 'x' was not declared in this scope")
    return m


def lines(tmp_path: Path) -> list[str]:
    return lines_to_check(tmp_path) + words_lines(tmp_path / "words.log", 1 << 20)


def test_rules_kept_per_set_held_decide_as_rules_filtered_anew(tmp_path: Path) -> None:
    kept, fresh = compiled(Matcher()), compiled(Fresh())
    texts = lines(tmp_path)
    for text in texts:
        assert decision(kept, text) == decision(fresh, text), text
    assert 0 < len(kept._worth) < len(texts) // 4  # the table is used: new lines hold few distinct sets


def test_a_table_keyed_on_less_than_the_set_is_caught(tmp_path: Path) -> None:
    coarse, fresh = compiled(Coarse()), compiled(Fresh())
    assert any(decision(coarse, t) != decision(fresh, t) for t in lines(tmp_path))
