"""Path contexts (pathcontext.py): a `^(?=.*Y).*?BODY` branch decides a located line as its folded form where the
path holds none of its contexts; the match's start 0 stays 0, every other span is shifted."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from test_pathfold import PATHS, TAILS, message_lines

from legacy_gpu_patch.classify.classifier import load_rules
from legacy_gpu_patch.classify.pathcontext import PathRead, path_contexts
from legacy_gpu_patch.classify.pathfold import fold, location_path, path_blind


def spans(m: Any, shift: int = 0) -> Any:
    if m is None:
        return None
    return tuple((a if a == 0 else a + shift, b + shift) if a >= 0 else (a, b) for a, b in m.regs)


def holds_context(line: str, read: PathRead) -> bool:
    head = line[: location_path(line) + 1].lower()  # the path and the location's first character
    return any(s in head for s in read.contexts)


@pytest.mark.parametrize(("pattern", "read"), [
    (r"^(?=.*\berror\b).*?'(x)'", PathRead(("error",), True)),
    (r"^(?!.*\bwarning\b).*?'(x)'", PathRead(("warning",), True)),
    (r"^(?=.*\u200b$).*?'(x)'", PathRead((), True)),  # the marker cannot be in a path
    (r"^(?=.*\berror\b|.*\bfatal\b).*?'(x)'", PathRead(("error", "fatal"), True)),
    (r"^(?=.*\berror\b).*?\bcusparse\w+", PathRead(("error", "cusparse"), True)),  # the body may lie in a path
    (r"a'x'|^(?=.*\berror\b).*?'(x)'", PathRead(("error",), True)),
    (r"a'x'", PathRead((), False)),
    (r"\bidentifier[ \t]*(?P<key>\w+)\b", PathRead(("identifier",), False)),  # may lie in a path, holding that
    (r"cpp|h\b", PathRead(("cpp", "h"), False)),
    (r"\w+:\d", None),  # reads the location's digit: past the path, not followed
    (r"^(?=.*\S+:\d).*?'x'", None),  # a look-ahead match that may run past the path
    (r"^(?=.*error)(?<=a).*?'x'", None),  # looks back
    (r"^.*?x", PathRead(("x",), True)),  # the body may lie in a path: where the path holds no `x`, it does not
    (r"x|^(?=.*\berror\b).*?'(x)'", PathRead(("x", "error"), True)),  # `x` may lie in a path: a context too
    # a match of `x\w*:\d` starting in a path reads its `x` there (the items up to the one that may run past it)
    (r"x\w*:\d|^(?=.*\berror\b).*?'(x)'", PathRead(("x", "error"), True)),
    (r"\S*x:\d", None),  # its first item may run past the path: nothing is read in the path for sure
    (r"cmake_x:?\s*\S*\s*is not", PathRead(("cmake_x",), False)),
    (r"^(?!.*\bwarning\b)\W*(?P<k>cusparse\w+)\b.*removed", PathRead(("cusparse",), False)),
    (r"^(?=.*\berror\b).*?\b(?P<k>cusparse\w+)\b[^:]*? deprecated", PathRead(("error", "cusparse"), True)),
    (r"(?P<k>ab\S*|cd|'e')", PathRead(("ab", "cd"), False)),  # a group's alternatives, each on its own
    (r"(?i:ab\S*)|(?P<k>(?:cd\S*))", PathRead(("ab", "cd"), False)),
    (r"(?s:ab\S*)", None),  # a group that changes another flag is not split: walked whole
    (r"^\S.*?x", None),  # nothing required before `.*?` runs past the path
    (r"^(?=.*c:).*?'x'", None),  # the folded text's own path (p.c) would hold the context
])
def test_contexts_of_hand_written_patterns(pattern: str, read: PathRead | None) -> None:
    assert path_contexts(re.compile(pattern, re.IGNORECASE)) == read


def test_a_rule_with_contexts_matches_a_located_line_as_its_folded_form_where_the_path_holds_none() -> None:
    rules = [(r, path_contexts(r.regex)) for r in load_rules().rules]
    proven = [(r, read) for r, read in rules if read is not None]
    assert any(read.pinned and read.contexts for _, read in proven)  # a rule with contexts exists
    assert all(read is not None for r, read in rules if path_blind(r.regex))  # the blind ones are all in
    rnd = random.Random(7)
    checked = skipped = 0
    for rest in message_lines():
        for _ in range(3):
            line = rnd.choice(PATHS) + rnd.choice(TAILS) + rest
            folded, shift = fold(line)
            for rule, read in proven:
                if holds_context(line, read):
                    skipped += 1
                    continue
                assert spans(rule.regex.search(line)) == spans(rule.regex.search(folded), shift), (rule.id, line)
                checked += 1
    assert checked > 10_000 and skipped


def test_error_in_the_path_is_what_the_context_catches() -> None:
    rule = {r.id: r for r in load_rules().rules}["std-member-missing"]
    read = path_contexts(rule.regex)
    assert read == PathRead(("error",), True)
    line = "/src/error/a.cpp:1:2: 'numeric_limits'ist kein Element von'std'\u200b"
    folded, _ = fold(line)
    assert rule.regex.search(line) and not rule.regex.search(folded)  # the path's `error` decided
    assert holds_context(line, read)  # ... and the context says so: the line is not folded for this rule
