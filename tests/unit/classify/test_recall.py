"""Every error line counts, wherever it is: planted errors of every trigger kind at random offsets of large
generated logs, with nothing after them, are all found with exact counts; failing (error-dense) logs keep exact
totals past the display cap."""

from __future__ import annotations

import io
import random
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from legacy_gpu_patch.classify.classifier import Classifier, classify_bytes, classify_stream, load_rules

RULES = load_rules()

QUIET = [
    "[{i}/48210] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/Op{i}.cpp.o",
    "/usr/bin/c++ -DUSE_CUDA -I/src/aten/src -O2 -Wall -Werror=return-type -c /src/c10/util/ErrorHandling.cpp",
    "In file included from /src/c10/util/ErrorHandling.h:{i},",
    "/src/aten/src/ATen/native/Op{i}.h:12:7: warning: unused variable 'tmp{i}' [-Wunused-variable]",
    "-- Looking for strerror_r - not found",
    "copying build/lib/torch/utils/error_{i}.py -> build/bdist.linux-x86_64/wheel/torch/utils",
    "tests/test_errors.py::test_error_{i} PASSED",
    "2024-05-01T12:00:00.1234567Z [{i}/48210] Linking CXX shared library lib/libtorch_{i}.so",
]


def quiet_lines(n: int, rnd: random.Random) -> list[str]:
    return [rnd.choice(QUIET).format(i=i) for i in range(n)]


@lru_cache(maxsize=1)
def trigger_examples() -> list[tuple[bytes, str, str]]:
    """(line, rule, key) for each trigger: an example of a reporting rule that only this trigger finds."""
    triggers = RULES.triggers
    out = []
    for trigger in triggers:
        for rule in RULES.rules:
            if rule.exception:
                continue
            ex = next((e.encode() for e in rule.examples
                       if trigger in e.encode() and not any(o in e.encode() for o in triggers if o != trigger)), None)
            if ex is None:
                continue
            found = classify_bytes(ex + b"\n")
            if found:
                out.append((ex, found[0].rule, found[0].key))
                break
    return out


def test_every_trigger_has_a_planted_example() -> None:
    ascii_triggers = [t for t in RULES.triggers if t.isascii()]
    examples = trigger_examples()
    planted = {t for t in RULES.triggers for ex, _, _ in examples if t in ex}
    assert set(ascii_triggers) <= planted


@pytest.mark.slow
def test_planted_errors_at_random_offsets_of_a_large_log_are_all_found_with_exact_counts(tmp_path: Path) -> None:
    rnd = random.Random(12)
    examples = trigger_examples()
    lines = quiet_lines(250_000, rnd)  # ~20 MB
    want: Counter[tuple[str, str]] = Counter()
    for ex, rule, key in examples:
        for _ in range(rnd.randint(1, 4)):
            lines.insert(rnd.randrange(len(lines) + 1), ex.decode())
            want[(rule, key)] += 1
    # one more of each at the very end, with nothing after it (no consequence line, no newline)
    for ex, rule, key in examples[:3]:
        lines.append(ex.decode())
        want[(rule, key)] += 1
    data = "\n".join(lines).encode()
    assert len(data) > 15 << 20
    log = tmp_path / "big.log"
    log.write_bytes(data)
    for chunk in (1 << 20, 65536 + 17):  # the classifier's own chunking and an odd pipe-sized one
        with open(log, "rb") as fh:
            c = classify_stream(fh, Classifier(max_findings=10_000), chunk=chunk)
        got = Counter({(f.rule, f.key): f.count for f in c.findings()})
        assert {k: got[k] for k in want} == dict(want)
        assert c.lines == len(lines) - 1 + 1  # the last line has no newline: counted at the end
        assert c.dropped == 0


def test_hundreds_of_nvcc_fatal_lines_are_counted_exactly() -> None:
    rnd = random.Random(5)
    lines = quiet_lines(60_000, rnd)
    for i in range(308):
        lines.insert(rnd.randrange(len(lines)), f"nvcc fatal   : Unsupported gpu architecture 'compute_{i % 7 + 10}'")
    c = classify_stream(io.BytesIO("\n".join(lines).encode() + b"\n"))
    arch = [f for f in c.findings() if f.rule == "nvcc-unsupported-gpu-arch"]
    assert sum(f.count for f in arch) == 308 and len(arch) == 7


def test_an_error_dense_log_keeps_exact_totals_past_the_display_cap() -> None:
    """A failing build, one line in five an error, every error distinct: the cap bounds memory, never counts."""
    rnd = random.Random(9)
    lines = quiet_lines(50_000, rnd)
    n = 0
    for i in range(0, len(lines), 5):
        lines[i] = f"/src/aten/native/Op{i}.cpp:{i % 900 + 1}:3: error: 'sym{i}' was not declared in this scope"
        n += 1
    c = Classifier(max_findings=500, max_occurrences=5)
    c.feed("\n".join(lines).encode() + b"\n")
    found = c.close()
    assert len(found) == 500
    assert c.errors == n
    assert sum(f.count for f in found) + c.dropped == n
