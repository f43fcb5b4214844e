"""The rule files as data: schema errors with file:line: key, every example decided by its own rule, categories
documented, patchset hints pointing at patchsets that exist (or are reserved for the recipes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from legacy_gpu_patch.classify.classifier import CATEGORIES, Classifier, load_rules, normalize, rule_files
from legacy_gpu_patch.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
RULES = load_rules()
# Rules may only name patchsets that exist (tests/unit/test_rules_point_at_real_patchsets.py checks it too).
RESERVED: set[str] = set()


def decided_by(line: str) -> tuple[str | None, list[str]]:
    """(rule that matches the normalized line, rules of the findings the whole pipeline reports for it)."""
    c = Classifier(RULES)
    hit = c.match(normalize(line))
    c.feed(line.encode("utf-8") + b"\n")
    return (hit[0].id if hit else None), [f.rule for f in c.close()]


EXAMPLES = [(r.id, ex) for r in RULES.rules for ex in r.examples]
NOT_EXAMPLES = [(r.id, ex) for r in RULES.rules for ex in r.not_examples]


@pytest.mark.parametrize(("rule_id", "line"), EXAMPLES, ids=[f"{i}:{n}" for n, (i, _) in enumerate(EXAMPLES)])
def test_every_example_is_decided_by_its_rule(rule_id: str, line: str) -> None:
    """Through the whole pipeline: the line is found by a trigger, normalized, and no earlier rule shadows it."""
    rule = RULES.by_id(rule_id)
    matched, findings = decided_by(line)
    if rule.exception:
        assert findings == [], f"{rule_id}: an exception example produced {findings}"
        assert matched is not None and RULES.by_id(matched).exception
    else:
        assert findings[:1] == [rule_id], f"{rule_id}: decided by {matched}, findings {findings}"


@pytest.mark.parametrize(("rule_id", "line"), NOT_EXAMPLES)
def test_not_examples_are_not_decided_by_the_rule(rule_id: str, line: str) -> None:
    assert decided_by(line)[0] != rule_id


def test_every_rule_that_reports_has_examples_and_an_explanation() -> None:
    for r in RULES.rules:
        if not r.exception:
            assert r.examples, f"{r.id} ({r.source}) has no examples"
            assert r.explanation.endswith("."), f"{r.id}: the explanation is one sentence ending with '.'"
            assert r.fix, f"{r.id}: no fix hint"


def test_every_category_has_rules_and_a_catalogue_entry() -> None:
    used = {r.category for r in RULES.rules if not r.exception}
    assert used == set(CATEGORIES), f"categories without rules: {set(CATEGORIES) - used}"
    doc = (REPO / "docs" / "errors.md").read_text(encoding="utf-8")
    for cat in CATEGORIES:
        assert re.search(rf"^#+ .*`{re.escape(cat)}`", doc, re.M), f"docs/errors.md has no section for {cat}"


def test_patchset_hints_point_at_real_or_reserved_patchsets() -> None:
    existing = {p.parent.name for p in (REPO / "patchsets").glob("*/patchset.yaml")}
    for r in RULES.rules:
        for name in r.patchsets:
            assert name in existing | RESERVED, f"{r.id} points at unknown patchset {name}"


def test_rule_ids_are_unique_and_files_are_ordered() -> None:
    ids = [r.id for r in RULES.rules]
    assert len(ids) == len(set(ids))
    names = [p.name for p in rule_files()]
    assert names == sorted(names) and names[0].startswith("00-")
    assert [r.priority for r in RULES.rules] == list(range(len(RULES.rules)))


def test_triggers_are_few_distinct_and_each_one_earns_its_pass() -> None:
    """Each trigger is a pass over every byte of a log: none holds another, and each is the one that finds some
    rule example no other trigger finds (else it costs a pass for no line: an example says why it exists)."""
    triggers = RULES.triggers
    assert not [(a, b) for a in triggers for b in triggers if a != b and b in a]
    examples = [ex.encode("utf-8") for r in RULES.rules if not r.exception for ex in r.examples]
    # non-ASCII ones are searched only in chunks holding their lead byte: free on an English log
    def alone(t: bytes, ex: bytes) -> bool:
        return t in ex and not any(o in ex for o in triggers if o != t)

    idle = [t for t in triggers if t.isascii() and not any(alone(t, ex) for ex in examples)]
    assert not idle, f"triggers no example needs: {idle}"


# --------------------------------------------------------------------------------------------- schema errors


def _load_with(tmp_path: Path, text: str, name: str = "50-bad.yaml") -> None:
    bad = tmp_path / name
    bad.write_text(text, encoding="utf-8")
    common = [p for p in rule_files() if p.name.startswith("00-")]
    load_rules([*common, bad])


@pytest.mark.parametrize(("text", "expected"), [
    ("rules:\n  - id: x\n    patern: 'a'\n",
     r"50-bad.yaml:3: rules\[0\].patern: unknown key \(did you mean 'pattern'\?\)"),
    ("rules:\n  - id: x\n    category: other\n    pattern: 'a('\n    explanation: X.\n",
     r"50-bad.yaml:4: rules\[0\].pattern: invalid regular expression"),
    ("rules:\n  - id: x\n    pattern: '{NOPE}'\n    explanation: X.\n",
     r"50-bad.yaml:3: rules\[0\].pattern: unknown macro \{NOPE\}"),
    ("rules:\n  - id: x\n    category: cuda-arch-gaurd\n    pattern: a\n",
     r"50-bad.yaml:3: rules\[0\].category: 'cuda-arch-gaurd' is not one of .*did you mean 'cuda-arch-guard'"),
    ("rules:\n  - id: x\n    pattern: a\n", r"50-bad.yaml:2: rules\[0\].explanation: a rule that reports"),
    ("rules:\n  - id: x\n    pattern: a\n    explanation: X.\n  - id: x\n    pattern: b\n    explanation: Y.\n",
     r"50-bad.yaml:5: rules\[1\].id: duplicate rule id 'x'"),
    ("rules:\n  - id: x\n    pattern: a\n    prefilter: [$NOPE]\n    explanation: X.\n",
     r"50-bad.yaml:4: rules\[0\].prefilter: unknown literal set \$NOPE"),
    ("rules:\n  - id: x\n    pattern: a\n    exception: true\n    fix: do it\n",
     r"50-bad.yaml:4: rules\[0\].exception: an exception rule reports nothing"),
    ("rules:\n  - pattern: a\n", r"50-bad.yaml:2: rules\[0\]: missing required key 'id'"),
    ("rules: [\n", r"50-bad.yaml:2: YAML syntax error"),
])
def test_broken_rule_files_are_reported_with_file_line_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        _load_with(tmp_path, text)
    assert re.search(expected, str(err.value)), str(err.value)


def test_lead_file_after_a_plain_one_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "20-a.yaml"
    plain.write_text("rules:\n  - id: a\n    pattern: a\n    explanation: A.\n", encoding="utf-8")
    lead = tmp_path / "30-b.yaml"
    lead.write_text("lead: true\nrules:\n  - id: b\n    pattern: b\n    exception: true\n", encoding="utf-8")
    common = [p for p in rule_files() if p.name.startswith("00-")]
    with pytest.raises(ConfigError, match=r"30-b.yaml:1: lead: a lead file must come before"):
        load_rules([*common, plain, lead])


def test_custom_rules_files_classify(tmp_path: Path) -> None:
    mine = tmp_path / "40-mine.yaml"
    mine.write_text(
        "rules:\n"
        "  - id: my-widget\n    category: other\n    prefilter: [widget]\n"
        "    pattern: 'error: widget (?P<key>\\w+) exploded'\n"
        "    explanation: The widget broke.\n    fix: Rebuild it.\n",
        encoding="utf-8",
    )
    rules = load_rules(sorted([*rule_files(), mine], key=lambda p: p.name))
    c = Classifier(rules)
    c.feed(b"error: widget w7 exploded\nerror: widget w7 exploded\n")
    (f,) = c.close()
    assert (f.rule, f.key, f.count) == ("my-widget", "w7", 2)
