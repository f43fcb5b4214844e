"""The classifier's shortcuts decide exactly what the full path decides.

Speed comes from work skipped: lines read on their raw bytes, triggers found through a rare byte, anchored lead
patterns run with match(). Each shortcut is checked here against the plain way of doing the same thing, on the
fixture logs and on lines built to sit on the edges (CI prefixes, glued progress messages, localized words,
control characters, long lines).
"""

from __future__ import annotations

import io
import random
import re
from pathlib import Path

import pytest

from legacy_gpu_patch.classify import fastpath, prepare, scan
from legacy_gpu_patch.classify.classifier import Classifier, classify_stream, load_rules, normalize, strip_prefixes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"

PREFIXES = [
    "",
    "2024-05-01T12:00:00.1234567Z ",
    "#16 72.51 ",
    "  >> 853    ",
    "1>",
    "[ 45%] ",
    "[12/345] ",
    "12:00:01 ",
    "[2024-05-01 12:00:00] ",
    "| ",
    "> ",
    "E       ",
    "##[group]",
    "  ",
    "\t",
    "2024-05-01T12:00:00Z #16 72.51 ",
]
BODIES = [
    "/usr/bin/c++ -DUSE_CUDA -Werror=return-type -c /src/c10/util/ErrorHandling.cpp -o e.o",
    "cd /build && /usr/local/cuda/bin/nvcc -Xcompiler=-Werror -c caffe2/utils/GpuDefs.cu",
    "CL.exe /c /WX ErrorHandling.cpp",
    "In file included from /src/c10/util/ErrorHandling.h:3,",
    "IN FILE INCLUDED FROM /src/c10/util/ErrorHandling.h:3,",
    "                 from /src/c10/util/Exception.cpp:1:",
    "In file included from errore:3:",  # a localized word before a colon: normalize() rewrites it
    "In file included from Fehler:3:",
    "In file included from /src/ErrorHandling.h:3, ",  # trailing space: `$` reads the stripped line
    "Building CXX object c10/CMakeFiles/c10.dir/util/ErrorHandling.cpp.o",
    "Building CXX object x.o/src/a.cpp:1:2: error: 'foo' was not declared in this scope",  # glued
    "Linking CXX shared library x.obj/src/b.cpp(3): error C2065: 'THCudaCheck': undeclared identifier",
    "Cythonizing cupy/core/error.pyx",
    "-- Looking for strerror_r - not found",
    "-- Configuring incomplete, errors occurred!",
    "-- Fehler: x",
    "tests/test_errors.py::test_error PASSED",
    "test_error_handling (tests.test_handlers.TestHandlers) ... ok",
    "[       OK ] ErrorHandlingTest.ThrowsRuntimeError (0 ms)",
    "src/a.cpp:1:1: error: 'uint8_t' was not declared in this scope",
    "/src/ErrorHandling.h:12:3: warning: unused variable 'x' [-Wunused-variable]",
    "make[2]: *** [CMakeFiles/x.dir/build.make:12: x.o] Error 1",
    "copying torch/utils/error.py -> build/lib/torch/utils",
    "/usr/bin/c++ -Werror -c x\x1c.cpp",  # a control character str patterns count as whitespace
    "from a\x1fb:3:",
    "/usr/bin/c++ -Werror \x1b[31m-c x.cpp",
    "/usr/bin/c++ -Werror -c x.cpp\r",
    "/usr/bin/c++ -Werror -c \u00e9rror.cpp",
    "Building CXX object \u2018x\u2019 ErrorHandling.cpp.o",
]


def edge_lines() -> list[str]:
    lines = [p + b for p in PREFIXES for b in BODIES]
    lines.append("/usr/bin/c++ -Werror " + "-Ifoo " * 600 + "-c x.cpp")  # longer than MATCH_WINDOW
    lines.append("In file included from /src/x.h:3," + " " * 3000 + "error")
    for path in sorted(FIXTURES.rglob("*.log")):
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines


def findings_of(c: Classifier, lines: list[str]) -> list[tuple[str, str, int, list[int]]]:
    c.feed("".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape"))
    return [(f.rule, f.key, f.count, [o.log_line for o in f.occurrences]) for f in c.close()]


def test_raw_fast_path_decides_every_line_as_the_full_path_does() -> None:
    lines = edge_lines()
    plain = Classifier()
    plain._raw_skip = None  # every line through normalize() and the rules
    assert findings_of(Classifier(), lines) == findings_of(plain, lines)
    # one line at a time too: no context or join from a neighbour hides a difference
    for line in lines[: len(PREFIXES) * len(BODIES) + 2]:
        plain = Classifier()
        plain._raw_skip = None
        assert findings_of(Classifier(), [line]) == findings_of(plain, [line]), line


def test_raw_fast_path_takes_the_common_shapes_and_leaves_the_tricky_ones() -> None:
    c = Classifier()

    def skipped(line: str) -> bool:
        return c._raw_skipped(line.encode("utf-8"))

    for line in [
        "/usr/bin/c++ -DUSE_CUDA -Werror=return-type -c /src/c10/util/ErrorHandling.cpp -o e.o",
        "2024-05-01T12:00:00.1234567Z /usr/bin/c++ -Werror -c a.cpp",
        "#16 72.51 [ 45%] Building CXX object c10/CMakeFiles/c10.dir/util/ErrorHandling.cpp.o",
        "In file included from /src/c10/util/ErrorHandling.h:3,",
        "-- Looking for strerror_r - not found",
        "tests/test_errors.py::test_error PASSED",
    ]:
        assert skipped(line), line
    for line in [
        "Building CXX object x.o/src/a.cpp:1:2: error: 'foo' was not declared in this scope",
        "[ 45%] Building CXX object x.o/src/a.cpp:1:2: error: 'foo' was not declared in this scope",
        "In file included from errore:3:",
        "/usr/bin/c++ -Werror -c x\x1c.cpp",
        "/usr/bin/c++ -Werror \x1b[31m-c x.cpp",
        "/usr/bin/c++ -Werror -c \u00e9rror.cpp",
        "-- Configuring incomplete, errors occurred!",
        "src/a.cpp:1:1: error: 'uint8_t' was not declared in this scope",
    ]:
        assert not skipped(line), line


def test_raw_prefix_strip_agrees_with_strip_prefixes() -> None:
    rnd = random.Random(3)
    pieces = [p for p in PREFIXES if p] + ["2024-05-01 12:00:00", "[12:00:00]", "12:00:00.5 ", "x", "gcc -c", " ", "0"]
    for _ in range(5000):
        line = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 5))) + rnd.choice(BODIES[:8])
        if not line.isascii() or "\x1b" in line or "\r" in line:
            continue
        raw = fastpath._strip_raw_prefixes(line.encode()).decode()
        assert raw.rstrip() == strip_prefixes(line), line


def test_first_bytes_of_the_prefixes() -> None:
    first = fastpath._RAW_PREFIX_FIRST
    assert first is not None
    assert {chr(b) for b in first} == set("0123456789[#>E|")
    assert fastpath._first_bytes(re.compile(rb"(?i:abc)")) is None
    assert fastpath._first_bytes(re.compile(rb"a*b")) is None  # may start with a or b: not plain
    assert fastpath._first_bytes(re.compile(rb"^(?:ab|[x-z]c|\d+)")) == frozenset(b"axyz0123456789")


@pytest.mark.parametrize(
    ("pattern", "anchored"),
    [
        (r"^abc", True),
        (r"^a|^b", True),
        (r"(^a)|(^b)|(?:^c)", True),
        (r"(?i:^x)", True),
        (r"^a|b", False),
        (r"a^", False),
        (r"(?m)^a", False),
        (r"(?m:^a)", False),
        (r"\Aabc", True),
        (r"(?=x)^a", False),  # not recognised: search() it is
    ],
)
def test_anchored_patterns(pattern: str, anchored: bool) -> None:
    assert fastpath._anchored(re.compile(pattern)) is anchored


def test_lead_steps_match_as_search_would() -> None:
    c = Classifier()
    anchored = c._lead_steps
    searched = [(r, g, r.regex.search) for r, g, _ in prepare.lead_machinery(c.rules)[1]]
    assert any(f.__name__ == "match" for _, _, f in anchored), "the merged lead run is anchored"
    for line in edge_lines():
        text = normalize(line)
        c._lead_steps = searched
        want = c._lead_match(text)
        c._lead_steps = anchored
        got = c._lead_match(text)
        assert (want and (want[0].id, want[1].span())) == (got and (got[0].id, got[1].span())), line


@pytest.mark.parametrize("needle", [b"ERROR", b"Killed", b"** WARNING", b"r\xc3\xa9f\xc3\xa9rence", b"RR", b"rror"])
def test_finder_finds_what_bytes_find_finds(needle: bytes) -> None:
    rnd = random.Random(needle)
    finder = scan._Finder(needle)
    for alphabet in (b"EROx \n", b"abcR\n", b"ERROR\n", bytes(range(256)), b"*WARNING \n"):
        for _ in range(100):
            data = bytes(rnd.choices(alphabet, k=rnd.randint(0, 6000)))
            if data and rnd.random() < 0.5:
                i = rnd.randint(0, len(data))
                data = data[:i] + needle + data[i:]
            finder.plain_left = rnd.choice([0, 0, 50])
            for _ in range(4):
                pos = rnd.randint(0, len(data))
                end = rnd.randint(pos, len(data))
                assert finder.first(data, pos, end) == data.find(needle, pos, end)


def test_finder_falls_back_where_its_rare_byte_is_frequent() -> None:
    finder = scan._Finder(b"ERROR")
    assert finder.byte == b"R"
    data = b"RRRR xR " * 5000 + b"ERROR"
    assert finder.first(data, 0, len(data)) == len(data) - 5
    assert finder.plain_left > 0  # too many misses: plain bytes.find for a while


def test_rare_bytes_are_chosen_for_triggers_that_have_one() -> None:
    rules = load_rules()
    picked = {t: scan._Finder(t).byte for t in rules.triggers}
    assert picked[b"rror"] == b""  # nothing rare in it: bytes.find
    assert picked[b"ERROR"] == b"R"
    assert picked[b"Killed"] == b"K"
    assert picked[b"** WARNING"] == b"*"
    assert picked["r\u00e9f\u00e9rence ind\u00e9finie".encode()] == b"\xc3"
    assert picked["\u30a8\u30e9\u30fc".encode()] == b""  # searched only where its lead byte is: plain


def test_classify_stream_finds_errors_without_an_error_word_at_the_end_of_a_long_log() -> None:
    # no consequence line after them: every trigger is searched in every line, so these are found too
    data = b"[1/2] Building CXX object x.o\n" * 100 + b"/usr/bin/ld: cannot find -lcudart\n" + b"Killed\n"
    c = classify_stream(io.BytesIO(data), Classifier())
    assert {f.category for f in c.findings()} == {"linker-undefined", "oom-killed"}


def test_necessary_factors_gate_no_line_a_rule_would_match() -> None:
    """A rule's regex is skipped on a line without any of its necessary strings: never on one it matches."""
    c = Classifier()
    plain = Classifier()
    plain._factors = (None,) * len(plain._rules)  # every candidate rule's regex runs
    for line in edge_lines():
        text = normalize(line)
        got, want = c.match(text), plain.match(text)
        assert (got and (got[0].id, got[1].span())) == (want and (want[0].id, want[1].span())), line
    for rule in c.rules.rules:
        for ex in rule.examples:
            text = normalize(ex)
            if rule.regex.search(text) and text.isascii():
                need = fastpath.necessary_factors(rule.regex)
                assert need is None or all(any(f in text.lower() for f in one) for one in need), (rule.id, ex)


@pytest.mark.parametrize(
    ("pattern", "factors"),
    [
        (r"undefined reference to (?:symbol )?'(?P<key>\w+)'", [{"undefined reference to "}]),
        (r"(?:ab|cd)x+\bfooo(?=bar)", [{"fooo"}, {"bar"}]),
        (r"(?i)No (?:such file|module named)", [{"no such file", "no module named"}]),
        (r"a*bc", None),  # nothing of three characters is necessary
        (r"(?:xyz)?abcd|efgh", [{"abcd", "efgh"}]),
        (r"^(?=.*\u200b$)(?=.*\berror\b).*?'", [{"error"}]),
        (r"error: (?:cudaThreadExit|cuda_Foo)\b", [{"error: cudathreadexit", "error: cuda_foo"}]),
    ],
)
def test_necessary_factors(pattern: str, factors: list[set[str]] | None) -> None:
    found = fastpath.necessary_factors(re.compile(pattern))
    assert ([set(s) for s in found] if found is not None else None) == factors


def test_anchor_groups_find_the_lines_each_trigger_finds() -> None:
    """Triggers sharing a 3-byte piece are searched through it once: the candidate lines are the same."""
    rules = load_rules()
    shared, plain = scan.TriggerSearch(rules.triggers), scan.TriggerSearch(rules.triggers, share=False)
    assert shared.groups and not plain.groups
    rnd = random.Random(4)
    words = [t.decode("utf-8") for t in rules.triggers] + ["not", "fin", "ot", " ", "\n", "x", "defined", "canno"]
    texts = [p.read_bytes() for p in sorted(FIXTURES.rglob("*.log"))]
    texts += ["".join(rnd.choice(words) for _ in range(rnd.randint(0, 400))).encode() + b"\n" for _ in range(300)]
    for data in texts:
        for start in (0, min(len(data), 7)):
            end = len(data)
            got = shared.lines(data, start, end, data.isascii())
            assert got == plain.lines(data, start, end, data.isascii())
