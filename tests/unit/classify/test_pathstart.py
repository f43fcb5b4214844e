"""Anchored alternatives that read a location's path alike (pathstart.py): at 0, a `^...` alternative decides a
located line as its folded line, the match's start 0 kept and every other span shifted, where each part of its
threads dies in the location or is `X? .*? BODY` with BODY unable to start in a path."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from test_pathfold import PATHS, TAILS, message_lines

from legacy_gpu_patch.classify.classifier import load_rules
from legacy_gpu_patch.classify.fastpath import _sre_parse
from legacy_gpu_patch.classify.pathcontext import PathRead, path_contexts
from legacy_gpu_patch.classify.pathfold import fold, location_path
from legacy_gpu_patch.classify.pathstart import alike
from legacy_gpu_patch.classify.prepare import prepared

# paths a `^` alternative could read: progress words (`^Cythonizing`, `^[Cc]opying`, `^creating`, `^Installing`),
# compiler names, `error`/`fatal` (compiler-error's keywords), digits, `.pyx`, the shortest
ADVERSARIAL = ["copying/x.c", "Copying.cpp", "Cythonizing.pyx", "creating/a.cu", "Installing/b.cpp",
               "byte-compiling/x.h", "gcc/x.c", "/a/g++-9/x.cpp", "error.c", "error12.cu", "/a/fatal/error.h",
               "src/x.pyx", "a1/2.cu", ".c", "cd/x.c", "test_a/b.py", "--x.c", "12.c"]


def parse(pattern: str, flags: int = 0) -> list[Any]:
    """A pattern's parse tree as an item list, as pathcontext hands alike() an alternative."""
    return list(_sre_parse.parse(pattern, flags))

@pytest.mark.parametrize(("pattern", "proven"), [
    (r"^\S.*?:\d+: error", True),  # synced: the body cannot start in a path
    (r"^.*?(?::\d+|\(\d+\)):", True),  # no first character item
    (r"^.*:\d+:", True),  # greedy: tried from the end, the same places past the path in both
    (r"^\S+::\S+ PASSED", True),  # dead: no `::` in a path and its location
    (r"^(?=\S*[ \t]+-)(?:cd \S+ && )?[^\s\"]*gcc[ \t]+-", True),  # dead: the space after `gcc` is not in a path
    (r"^(?:\S.*?:\d+:[ \t]*|[\w.]+[ \t]+|[\w.]+:[ \t]*)?\b(?:fatal[ \t]+)?error\b[ \t]*:", True),  # each part
    (r"\A(?:In file .*?)?\S.*?:\d+:", True),  # `In file ` dies at its space
    (r"^Cythonizing", False),  # may be a path's start
    (r"^\S+:\d+", False),  # a match that ends in the location: it reads the path
    (r"^\S.*?\d", False),  # the body may start in a path (its digits)
    (r"^(\S).*?:\d+:", False),  # a capturing group is not split
    (r"^\S\S.*?:\d+:", False),  # two leading characters: not the form followed
    (r"^.*?(?<=c):\d", False),  # looks back
    (r"^.{0,50}?:\d+:", False),  # a bounded repeat
    (r"^(?:\S.*?:\d+:)?+ error", False),  # possessive: not split
    (r"\S.*?:\d+:", False),  # not anchored
    (r"^[^\s:]+\.pyx:\d+:\d+:\s*(?P<key>\S.*)", False),  # reads `.pyx` in the path
    (r"^(?=.*\berror\b).*?'x'", False),  # a look-ahead before the repeat: pathcontext's branch reading
    (r"^(?:a?){300}x:\d", False),  # too many parts
])
def test_which_anchored_alternatives_read_a_path_alike(pattern: str, proven: bool) -> None:
    assert alike(parse(pattern, re.IGNORECASE), True) is proven


@pytest.mark.parametrize(("pattern", "read"), [
    # merged steps: the echo and the test result die in the location, the progress words are contexts
    (r"(?P<a>^(?:Cythonizing|[Cc]opying|creating|Installing))|(?P<b>^(?=\S*[ \t]+[-/@])[^\s\"]*gcc[ \t]+-)"
     r"|(?P<c>^\S+::\S+ PASSED)", PathRead(("cythonizing", "opying", "creating", "installing"), True)),
    (r"^(?:\S.*?:\d+:[ \t]*)?error:[ \t]*(?P<key>.*)", PathRead((), True)),
    (r"^(?:\S.*?:\d+:[ \t]*|[\w.]+[ \t]+)?error:", PathRead((), True)),
    # `\S+` reads the location up to its space, and on into R: not followed (alike here, but not proven)
    (r"^(?:\S.*?:\d+:[ \t]*|\S+[ \t]+)?error:", None),
    (r"^(?:\S+:\d+[ \t]*)?error:", PathRead((), True)),  # dead: a location's digits are followed by `:`, `)`, `,`
    (r"^(?:\S+:\d+:[ \t]*)?error:", None),  # `\S+` may read a path and a location to its space: not followed
])
def test_path_contexts_of_anchored_patterns(pattern: str, read: PathRead | None) -> None:
    assert path_contexts(re.compile(pattern, re.IGNORECASE)) == read


def spans(m: Any, shift: int = 0) -> Any:
    if m is None:
        return None
    return tuple((a if a == 0 else a + shift, b + shift) if a >= 0 else (a, b) for a, b in m.regs)


def _units() -> list[tuple[str, re.Pattern[str]]]:
    """The merged lead steps and every rule, as the fold tries them."""
    rules = load_rules()
    steps = [(f"lead{j}", re.compile(s.pattern)) for j, s in enumerate(prepared(rules).lead) if s.pattern]
    return steps + [(r.id, r.regex) for r in rules.rules]


def test_the_shipped_units_proven_here_match_a_located_line_as_its_folded_form() -> None:
    units = [(name, regex, path_contexts(regex)) for name, regex in _units()]
    proven = {name for name, regex, read in units if read is not None and any(
        alike(alt, case) for alt, case in _alternatives(regex))}
    assert {"lead0", "compiler-error"} <= proven
    rnd = random.Random(11)
    checked = skipped = 0
    for rest in message_lines():
        for path in rnd.sample(ADVERSARIAL, 3) + rnd.sample(PATHS, 1):
            line = path + rnd.choice(TAILS) + rest
            folded, shift = fold(line)
            head = line[: location_path(line) + 1].lower()
            for name, regex, read in units:
                if name not in proven or read is None:
                    continue
                if any(s in head for s in read.contexts):
                    skipped += 1
                    continue
                assert spans(regex.search(line)) == spans(regex.search(folded), shift), (name, line)
                checked += 1
    assert checked > 20_000 and skipped


def _alternatives(regex: re.Pattern[str]) -> list[tuple[list[Any], bool]]:
    from legacy_gpu_patch.classify.pathcontext import _split, _top_alternatives

    tops, icase = _top_alternatives(regex)
    return [part for top in tops for part in _split(top, icase)]


@pytest.mark.parametrize("line", ["copying/x.c:1:2: error: y", "Cythonizing.pyx:3:4: error: z",
                                  "creating/a.cu(3): error: w", "Installing/b.cpp:5: fatal error: q.h: x"])
def test_a_progress_word_that_starts_a_path_is_a_context_of_the_lead_step(line: str) -> None:
    lead = re.compile(prepared(load_rules()).lead[0].pattern or "")
    read = path_contexts(lead)
    assert read is not None
    folded, _ = fold(line)
    assert lead.search(line) and not lead.search(folded)  # the path decides the step ...
    assert any(s in line[: location_path(line) + 1].lower() for s in read.contexts)  # ... and a context says so


@pytest.mark.parametrize("tail", TAILS)
def test_the_walk_from_a_path_start_follows_the_whole_location_up_to_its_space(tail: str) -> None:
    from legacy_gpu_patch.classify.pathfold import STARTS_TAIL, _PastPath, _walk

    def walk(text: str) -> Any:
        return _walk(parse(re.escape(text)), STARTS_TAIL, False)

    for path in ADVERSARIAL + PATHS:
        for j in range(len(path)):  # from 0 and from inside the path
            assert walk(path[j:] + tail[:-1]), (path, j, tail)
            with pytest.raises(_PastPath):
                walk(path[j:] + tail)
            assert not walk(path[j:] + tail[:-1] + "x")  # a location is followed by its space only
        assert not walk(path + tail[0] + "x")
    assert not walk("a.c:1:2:3:") and not walk("a.c(1,2,3)") and not walk("a.c:(1)") and not walk("a.txt:1")


def test_the_fold_proofs_cache_name_covers_every_module_that_computes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit of a proof module must give the cached proofs a new name (rulecache's digest of the sources)."""
    import sys
    from pathlib import Path

    from legacy_gpu_patch.classify import foldshape, rulecache

    rules = load_rules()
    lead = prepared(rules).lead
    seen: list[Path] = []
    monkeypatch.setattr(rulecache, "cached", lambda name, sources, make: seen.extend(sources))
    foldshape.shipped_tables(rules, lead)
    proofs = {Path(m.__file__ or "").name for name, m in sys.modules.items()
              if name.startswith("legacy_gpu_patch.classify.path")}  # pathfold, pathcontext, pathstart
    assert {"pathstart.py", "pathcontext.py", "pathfold.py"} <= proofs
    assert proofs | {"foldshape.py", "prepare.py"} <= {p.name for p in seen}
