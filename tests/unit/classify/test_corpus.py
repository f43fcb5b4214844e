"""The scoring corpus (tests/fixtures/logs/corpus): excerpts under in-band `# expect:` lines, every category in at
least three dialects; the whole corpus is scored and its accuracy printed, and the innocent fixtures stay clean."""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from legacy_gpu_patch.classify.classifier import CATEGORIES, classify_bytes

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "corpus"
INNOCENT = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "innocent"
EXPECT = re.compile(
    r"^# expect: (?P<category>[a-z-]+)(?: (?P<rule>[a-z0-9-]+))?(?: \((?P<dialect>[^,)]+)(?:, ?[^)]*)?\))?"
)
GOAL = 0.95


def excerpts() -> list[tuple[str, str, str | None, str, bytes]]:
    """(where, category, rule, dialect, excerpt) of every corpus entry."""
    out = []
    for path in sorted(CORPUS.glob("*.corpus")):
        current: list[str] | None = None
        head: re.Match[str] | None = None
        where = ""
        lines = path.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate([*lines, "# expect: end"], 1):
            m = EXPECT.match(line)
            if m:
                if head is not None and current is not None:
                    out.append((where, head["category"], head["rule"], head["dialect"] or "?",
                                "\n".join(current).encode("utf-8") + b"\n"))
                head, current, where = m, [], f"{path.name}:{i}"
            elif current is not None and not line.startswith("# "):
                current.append(line)
    return out


def test_every_category_is_in_the_corpus_in_three_dialects() -> None:
    dialects: dict[str, set[str]] = defaultdict(set)
    for _, category, _, dialect, _ in excerpts():
        assert category in CATEGORIES
        dialects[category].add(dialect)
    thin = {c: sorted(dialects[c]) for c in CATEGORIES if len(dialects[c]) < 3}
    assert not thin, f"categories with fewer than three dialects: {thin}"


def test_corpus_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    entries = excerpts()
    misses = []
    for where, category, rule, _, text in entries:
        found = classify_bytes(text)
        got = (found[0].category, found[0].rule) if found else ("none", "")
        if got[0] != category or (rule and got[1] != rule):
            misses.append(f"{where}: expected {category} {rule or ''}, got {got[0]} {got[1]}")
    accuracy = 1 - len(misses) / len(entries)
    with capsys.disabled():  # shown in every run, CI's included
        sys.stderr.write(f"\nclassifier corpus accuracy: {accuracy:.1%} of {len(entries)} excerpts\n")
    assert accuracy >= GOAL, "\n".join(misses)
    assert not misses, "\n".join(misses)  # the corpus is ours: every miss is a rule to fix


@pytest.mark.parametrize("path", sorted(INNOCENT.glob("*.log")), ids=lambda p: p.name)
def test_no_false_positive_on_innocent_lines(path: Path) -> None:
    found = classify_bytes(path.read_bytes())
    assert not found, [(f.rule, f.message) for f in found]
