"""The streaming classifier on fixture logs (in-band #=MATCH=# expectations) and on the messy cases real logs have."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from legacy_gpu_patch.classify.classifier import (
    Classifier,
    Finding,
    classify_bytes,
    classify_lines,
    load_rules,
    normalize,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
MARK = b"#=MATCH=#"
LOG_FILES = sorted(FIXTURES.glob("*/*.log"))


def parse_fixture(path: Path) -> tuple[bytes, dict[int, list[str]]]:
    """The log without marker/comment lines, and {line number: [category, key=value...]} it expects."""
    body: list[bytes] = []
    expect: dict[int, list[str]] = {}
    for line in path.read_bytes().split(b"\n"):
        if line.startswith(b"#=# "):
            continue
        if line.startswith(MARK):
            expect[len(body) + 1] = line[len(MARK) :].decode().split()
            continue
        body.append(line)
    return b"\n".join(body), expect


def occurrences(findings: list[Finding]) -> dict[int, Finding]:
    return {o.log_line: f for f in findings for o in f.occurrences}


def check_fixture(data: bytes, expect: dict[int, list[str]], findings: list[Finding]) -> list[str]:
    lines = data.split(b"\n")
    got = occurrences(findings)
    problems = []
    for ln, (category, *opts) in sorted(expect.items()):
        f = got.get(ln)
        text = lines[ln - 1].decode("utf-8", "replace")[:120]
        if f is None:
            problems.append(f"line {ln}: no finding, expected {category}: {text}")
            continue
        if f.category != category:
            problems.append(f"line {ln}: {f.category} ({f.rule}), expected {category}: {text}")
        for opt in opts:
            key, _, value = opt.partition("=")
            if key == "patchset" and value not in f.patchsets:
                problems.append(f"line {ln}: patchsets {f.patchsets}, expected {value}: {text}")
            if key == "rule" and value != f.rule:
                problems.append(f"line {ln}: rule {f.rule}, expected {value}: {text}")
    for ln, f in sorted(got.items()):
        if ln not in expect:
            problems.append(
                f"line {ln}: unexpected {f.category} ({f.rule}): {lines[ln - 1].decode('utf-8', 'replace')[:120]}"
            )
    return problems


def test_fixture_logs_exist() -> None:
    kinds = {p.parent.name for p in LOG_FILES}
    assert {"seeds", "categories", "messy", "innocent"} <= kinds


@pytest.mark.parametrize("path", LOG_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_log(path: Path) -> None:
    data, expect = parse_fixture(path)
    if path.parent.name == "innocent":
        assert not expect, "innocent logs carry no expectations"
    problems = check_fixture(data, expect, classify_bytes(data))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", LOG_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_any_chunking_gives_the_same_findings(path: Path) -> None:
    """Streaming: bytes arriving in pieces of any size (pipe reads split lines and UTF-8 sequences)."""
    data, _expect = parse_fixture(path)
    whole = [(f.rule, f.key, f.count, [o.log_line for o in f.occurrences]) for f in classify_bytes(data)]
    rnd = random.Random(path.name)
    for _ in range(3):
        c = Classifier()
        pos = 0
        while pos < len(data):
            n = rnd.choice([1, 2, 3, 7, 64, 500, 4096])
            c.feed(data[pos : pos + n])
            pos += n
        pieces = [(f.rule, f.key, f.count, [o.log_line for o in f.occurrences]) for f in c.close()]
        assert pieces == whole


def test_a_failing_tail_after_a_long_quiet_head_is_found_the_same() -> None:
    """Every trigger is searched in every line: what comes before the failing tail changes nothing."""
    data, expect = parse_fixture(FIXTURES / "categories" / "link-oom.log")
    padding = b"[1/2] Building CXX object x.o\n" * 2000
    padded = padding + data
    c = Classifier()
    c.feed(padded)
    shifted = {ln + 2000: v for ln, v in expect.items()}
    assert not check_fixture(padded, shifted, c.close())


def test_seed_table_errors_name_their_patchsets() -> None:
    data, _expect = parse_fixture(FIXTURES / "seeds" / "pytorch-1.5-lms.log")
    want = {
        "cudnn8-version-header",
        "cusparse-spmm",
        "gpudefs-arch-bound",
        "cudnn8-get-algorithm",
        "kernel-launch-check",
        "caffe2-api-rename",
    }
    got = {p for f in classify_bytes(data) for p in f.patchsets}
    assert want <= got


def test_first_root_cause_is_ranked_first() -> None:
    findings = classify_lines(
        [
            "make[2]: *** [x.o] Error 1",  # a consequence, first in the log
            "src/a.cpp:3:1: error: expected ';' before '}' token",  # generic
            "/usr/bin/c++ -Werror -c ErrorHandling.cpp",
            "src/b.cpp:7:27: error: 'numeric_limits' is not a member of 'std'",  # the known root cause
            "src/c.h:1:1: warning: unused variable 'x' [-Wunused-variable]",
            "warning: cupy/core/core.pyx:878:4: __nonzero__ was removed in Python 3; use __bool__ instead",
        ]
    )
    assert [f.category for f in findings] == ["missing-std-include", "other", "other", "cython-incompat"]
    assert findings[0].file == "src/b.cpp" and findings[0].line == 7
    assert findings[1].rule == "compiler-error"
    assert findings[2].secondary and findings[3].severity == "warning"


def test_duplicates_are_grouped_with_a_count() -> None:
    lines = []
    for i in range(40):
        lines.append(f"[{i}/40] Building CUDA object src/f{i}.cu.o")
        lines.append(f'/src/f{i}.cu(12): error: identifier "cusparseScsrmm2" is undefined')
        lines.append("      cusparseScsrmm2(h, ...);")
    findings = classify_lines(lines)
    assert len(findings) == 1
    f = findings[0]
    assert f.count == 40 and f.category == "removed-cusparse-api"
    assert [o.file for o in f.occurrences[:3]] == ["/src/f0.cu", "/src/f1.cu", "/src/f2.cu"]


def test_occurrences_and_findings_are_capped() -> None:
    lines = [f"src/f{i}.cpp:1:1: error: expected ';' before 'x{i % 7}'" for i in range(300)]
    c = Classifier(max_findings=3, max_occurrences=5)
    for line in lines:
        c.feed_line(line)
    findings = c.close()
    assert len(findings) == 3
    assert all(len(f.occurrences) == 5 for f in findings)
    assert sum(f.count for f in findings) + c.dropped == 300
    assert c.errors == 300  # every error line counts, kept or not


def test_context_lines_before_and_after_cross_chunks() -> None:
    data = b"".join(f"line {i}\n".encode() for i in range(1, 6))
    data += b"src/a.cpp:1:1: error: 'uint8_t' was not declared in this scope\n"
    data += b"".join(f"after {i}\n".encode() for i in range(1, 6))
    c = Classifier(context_before=3, context_after=2)
    for i in range(0, len(data), 9):  # split inside lines, between before-lines and the finding
        c.feed(data[i : i + 9])
    (f,) = c.close()
    assert f.context_before == ["line 3", "line 4", "line 5"]
    assert f.context_after == ["after 1", "after 2"]
    assert f.log_line == 6


def test_cmake_block_is_one_finding_with_its_wrapped_text() -> None:
    findings = classify_lines(
        [
            "CMake Error at CMakeLists.txt:1 (cmake_minimum_required):",
            "  Compatibility with CMake < 3.5 has been removed from",
            "  CMake.",
            "",
            "  Or, add -DCMAKE_POLICY_VERSION_MINIMUM=3.5 to try configuring anyway.",
            "",
            "",
            "-- Configuring incomplete, errors occurred!",
        ]
    )
    assert [f.category for f in findings] == ["cmake-min-version", "other"]
    f = findings[0]
    assert f.log_line == 1 and f.file == "CMakeLists.txt" and f.line == 1
    assert f.patchsets == ()  # fixed by a configure flag (in the fix text), not by a patchset
    assert "CMAKE_POLICY_VERSION_MINIMUM" in f.fix
    assert "Compatibility with CMake < 3.5 has been removed from CMake." in f.message


def test_ci_wrapped_identifier_is_joined() -> None:
    # a console that wraps at 80 columns cut the identifier in two
    (f,) = classify_lines(
        [
            "/var/ci/ws/aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cu(104): error: ident",
            'ifier "cusparseScsrmm2" is undefined',
        ]
    )
    assert f.rule == "cusparse-csrmm2-removed" and f.log_line == 1
    # a short line is a whole line: it is not joined
    (f,) = classify_lines(['/ws/a.cu(104): error: identifier "cusparseScs', 'rmm2" is undefined'])
    assert f.rule == "cusparse-removed"


def test_indented_next_line_is_not_a_wrapped_continuation() -> None:
    findings = classify_lines(
        [
            "src/kernel.cu(12): error: expression must have a constant value and something else happens here too",
            "      cudaThreadSynchronize();",
        ]
    )
    assert [f.rule for f in findings] == ["compiler-error"]


@pytest.mark.parametrize(
    "prefix",
    [
        "2024-05-01T12:00:00.1234567Z ",
        "#16 72.51 ",
        "  >> 853    ",
        "  1>",
        "[2024-05-01 12:00:00] ",
        "12:00:01 ",
        "| ",
        "> ",
        "E       ",
    ],
)
def test_ci_prefixes(prefix: str) -> None:
    (f,) = classify_lines([prefix + "/src/c10/util/Half.h:462:5: error: 'uint8_t' was not declared in this scope"])
    assert f.category == "missing-std-include"
    assert (f.file, f.line) == ("/src/c10/util/Half.h", 462)


def test_quotes_and_localized_severity_are_normalized() -> None:
    assert normalize("a.cpp:1:2: Fehler: »x« wurde nicht deklariert") == (
        "a.cpp:1:2: error: 'x' wurde nicht deklariert\u200b"
    )
    assert normalize("a.cpp:1:2: erreur: « x » n'a pas été déclaré").startswith("a.cpp:1:2: error: 'x'")
    assert normalize("a.cpp:1:2: error: ‘x’ was not declared") == "a.cpp:1:2: error: 'x' was not declared"
    assert normalize("ld: undefined reference to `foo'") == "ld: undefined reference to 'foo'"
    assert normalize("\x1b[01;31m\x1b[Kerror: \x1b[m\x1b[Kboom") == "error: boom"
    (f,) = classify_lines(["/src/Half.h:462:5: エラー: ‘uint8_t’ がこのスコープで宣言されていません"])
    assert f.category == "missing-std-include"
    assert "\u200b" not in f.message


def test_deprecation_warnings_are_not_errors() -> None:
    findings = classify_lines(
        [
            '/src/x.cu(42): warning #1444-D: function "cusparseScsrmm2" was declared deprecated',
            "/src/x.cpp:42:3: warning: 'cusparseScsrmm2' is deprecated: use cusparseSpMM [-Wdeprecated-declarations]",
            "DeprecationWarning: `np.int` is a deprecated alias for the builtin `int`.",
            "CMake Deprecation Warning at CMakeLists.txt:1 (cmake_minimum_required):",
            "  Compatibility with CMake < 3.10 will be removed from a future version of CMake.",
            "nvcc warning : The 'compute_35' and 'sm_35' architectures are deprecated, and may be removed.",
        ]
    )
    assert findings == []
    (f,) = classify_lines(["/src/x.cpp:42:3: error: 'cusparseScsrmm2' is deprecated [-Werror=deprecated-declarations]"])
    assert f.category == "removed-cusparse-api"


def test_files_named_error_are_not_errors() -> None:
    assert (
        classify_lines(
            [
                "[12/400] Building CXX object c10/CMakeFiles/c10.dir/util/ErrorHandling.cpp.o",
                "/usr/bin/c++ -Werror=return-type -c /src/c10/util/ErrorHandling.cpp -o ErrorHandling.cpp.o",
                "In file included from /src/c10/util/ErrorHandling.h:3,",
                "copying torch/utils/error.py -> build/lib/torch/utils",
                "tests/test_errors.py::test_error_handling PASSED",
            ]
        )
        == []
    )


def test_invalid_utf8_never_crashes() -> None:
    data = b"\xff\xfe\x80 garbage \xc3\x28 \xed\xa0\x80\n" * 50
    data += b"src/a.cpp:1:1: error: \xff\xfe 'uint8_t' was not declared in this scope\n"
    data += b"\xc3"  # a truncated sequence at the very end
    (f,) = classify_bytes(data)
    assert f.category == "missing-std-include"
    assert "\ufffd" in f.message


def test_long_lines_are_bounded_and_still_matched() -> None:
    c = Classifier(max_line=1 << 16)
    head = b"src/a.cpp:1:1: error: 'uint8_t' was not declared in this scope "
    c.feed(head)
    for _ in range(160):  # a 10 MiB line, fed in 64 KiB pieces
        c.feed(b"x" * 65536)
        assert len(c._partial) <= (1 << 16) + 65536  # never the whole line
    c.feed(b"\nsrc/b.cpp:2:2: error: 'int64_t' does not name a type\n")
    findings = c.close()
    assert [f.category for f in findings] == ["missing-std-include", "missing-std-include"]
    assert [f.log_line for f in findings] == [1, 2]
    assert c.lines == 2


def test_error_deep_inside_a_long_line_is_found_in_its_window() -> None:
    line = b"x" * 100_000 + b" src/a.cpp:1:1: error: 'uint8_t' was not declared in this scope " + b"y" * 100_000
    (f,) = classify_bytes(line + b"\n")
    assert f.category == "missing-std-include"


def test_python_exception_gets_location_from_traceback() -> None:
    (f,) = classify_lines(
        [
            "Traceback (most recent call last):",
            '  File "/work/chainer/link.py", line 112, in add_param',
            "    if isinstance(shape, collections.Iterable):",
            "AttributeError: module 'collections' has no attribute 'Iterable'",
        ]
    )
    assert (f.file, f.line) == ("/work/chainer/link.py", 112)
    assert f.category == "python-removed-api"


def test_phase_is_recorded_and_skip_counts_lines() -> None:
    c = Classifier()
    c.phase = "configure"
    c.feed(b"CMake Error at CMakeLists.txt:3 (project):\n  No CMAKE_CUDA_COMPILER could be found.\n\n")
    c.skip(b"==> header line\n")
    c.phase = "build"
    c.feed(b"src/a.cpp:1:1: error: 'uint8_t' was not declared in this scope\n")
    findings = c.close()
    assert [(f.phase, f.log_line) for f in findings] == [("configure", 1), ("build", 5)]


def test_on_finding_callback_sees_new_and_repeated() -> None:
    seen = []
    c = Classifier()
    c.on_finding = lambda f, new: seen.append((f.category, new))
    for i in range(3):
        c.feed_line(f"src/f{i}.cpp:1:1: error: 'uint8_t' was not declared in this scope")
    c.close()
    assert seen == [("missing-std-include", True), ("missing-std-include", False), ("missing-std-include", False)]


def test_rules_load_once_and_are_shared() -> None:
    assert load_rules() is load_rules()


def test_long_line_does_not_swallow_next_message() -> None:
    # a long line that ends in a word may be wrapped, but a next line that is a message of its own stays one
    findings = classify_lines(
        [
            'caffe/include/caffe/vision_layers.hpp(310): error: identifier "cudnnConvolutionBwdFilterAlgo_t" '
            "is undefined",
            "conv.cudafe1.cpp:(.text+0x270): undefined reference to `cudnnGetConvolutionForwardAlgorithm'",
            'Error (active)\tE0020\tidentifier "cusparseCcsrsv2_bufferSize" is undefined\tJCusparse\tC:\\J.cpp\t4994',
            "cusparseScsrmm2 is deprecated in CUDA 11",
        ]
    )
    assert [(f.log_line, f.category) for f in findings] == [
        (1, "removed-cudnn-api"),
        (2, "removed-cudnn-api"),
        (3, "removed-cusparse-api"),
        (4, "removed-cusparse-api"),
    ]


def test_curly_quotes_keep_their_spaces() -> None:
    # gcc's ‘x’ is not a member of ‘std’ must not become 'x'is not a member of'std'
    (f,) = classify_lines(["utils.cpp:372:15: error: ‘numeric_limits’ is not a member of ‘std’"])
    assert f.category == "missing-std-include"
    (f,) = classify_lines(["a.c:1:2: erreur: « foo » non déclaré (première utilisation dans cette fonction)"])
    assert f.message == "a.c:1:2: error: 'foo' non déclaré (première utilisation dans cette fonction)"


def test_raw_fast_path_only_drops_what_the_exceptions_drop() -> None:
    # the bytes regex that drops command echoes, include chains, progress/status/test lines unread must agree with
    # the rules: every line it drops is one that normalize() + the lead exceptions would drop too
    c = Classifier()
    skip = c._raw_skip
    assert skip is not None
    lines = [
        "/usr/bin/c++ -DUSE_CUDA -Werror=return-type -c /src/c10/util/ErrorHandling.cpp -o e.o",
        "In file included from /src/c10/util/ErrorHandling.h:3,",
        "                 from /src/c10/util/Exception.cpp:1:",
        "[ 45%] Building CXX object c10/CMakeFiles/c10.dir/util/ErrorHandling.cpp.o",
        "[12/345] Building CUDA object caffe2/CMakeFiles/torch_cuda.dir/Error.cu.o",
        "-- Looking for strerror_r - not found",
        "tests/test_errors.py::test_error PASSED",
        # not dropped: glued diagnostics, CMake's failure summary; dropped: a prefixed command echo
        "[ 45%] Building CXX object x.o/src/a.cpp:1:2: error: 'foo' was not declared in this scope",
        "-- Configuring incomplete, errors occurred!",
        "2024-01-15T10:23:45.1234567Z /usr/bin/c++ -Werror -c a.cpp",
    ]
    for path in FIXTURES.rglob("*.log"):
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    dropped = 0
    for line in lines:
        if not c._raw_skipped(line.encode("utf-8", "replace")):
            continue
        dropped += 1
        hit = c.match(normalize(line))
        assert hit is not None and hit[0].exception, line
    assert dropped >= 8
    # the glued diagnostic and CMake's summary are findings; the prefixed command echo is not
    assert [f.log_line for f in classify_lines(lines[7:10])] == [1, 2]
