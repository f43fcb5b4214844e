"""The shipped rule files parse to the same tree, line numbers included, through libyaml as through yamlio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from legacy_gpu_patch.classify import rules, rulesyaml
from legacy_gpu_patch.config import yamlio
from legacy_gpu_patch.errors import ConfigError


def same_tree(a: Any, b: Any) -> bool:
    """Equal values, and equal line records on every mapping and sequence."""
    if type(a) is not type(b):
        return False
    if isinstance(a, yamlio.LineDict):
        return (a.line, a.key_lines) == (b.line, b.key_lines) and a.keys() == b.keys() and all(
            same_tree(a[k], b[k]) for k in a)
    if isinstance(a, yamlio.LineList):
        return (a.line, a.item_lines) == (b.line, b.item_lines) and len(a) == len(b) and all(
            same_tree(x, y) for x, y in zip(a, b))
    return bool(a == b)


def test_every_shipped_rule_file_parses_the_same_both_ways() -> None:
    files = list(rules.rule_files())
    assert files
    for path in files:
        assert same_tree(rulesyaml.load_shipped(path, path.name), yamlio.load_file(path, path.name)), path.name


def test_the_shipped_rule_set_is_the_same_both_ways() -> None:
    files = tuple(rules.rule_files())
    fast, plain = rules._load(files, shipped=True), rules._load(files)
    assert [(r.id, r.regex.pattern, r.prefilter, r.source) for r in fast.rules] == [
        (r.id, r.regex.pattern, r.prefilter, r.source) for r in plain.rules]
    assert (fast.triggers, fast.lead, fast.literals) == (plain.triggers, plain.lead, plain.literals)


@pytest.mark.parametrize("text, message", [
    ("a: 1\na: 2\n", "x.yaml:2: duplicate key 'a' (first at line 1)"),
    ("a: [1\n", "x.yaml:2: YAML syntax error"),
])
def test_a_broken_file_is_reported_as_yamlio_reports_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as fast:
        rulesyaml.load_shipped(path, "x.yaml")
    with pytest.raises(ConfigError) as plain:
        yamlio.load_file(path, "x.yaml")
    assert str(fast.value) == str(plain.value)
    assert message in str(fast.value)


def test_shipped_rules_compile_when_first_used_and_equal_the_eagerly_compiled_ones() -> None:
    """The shipped rule set compiles no regex at load (start-up); each compiles, with the same groups and keys, as
    the rule set loaded the checked way, where an invalid pattern is a load error naming file:line."""
    files = tuple(rules.rule_files())
    lazy, eager = rules._load(files, shipped=True), rules._load(files)
    assert lazy.rules == eager.rules  # same fields: patterns, flags, prefilters, ...
    assert not any("regex" in vars(r) for r in rules._load(files, shipped=True).rules)  # none compiled yet
    for a, b in zip(lazy.rules, eager.rules):
        assert a.regex.pattern == b.regex.pattern and a.regex.groupindex == b.regex.groupindex
        assert a.key_groups == b.key_groups == tuple(g for g in b.regex.groupindex if g.startswith("key"))
