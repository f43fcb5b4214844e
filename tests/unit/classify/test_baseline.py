"""`lgpatch classify LOG --baseline GREEN_LOG`: only what the passing build's log does not have."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from helpers import Runner

from legacy_gpu_patch.classify.baseline import baseline_keys, new_findings
from legacy_gpu_patch.classify.classifier import classify_bytes
from legacy_gpu_patch.classify.findings import baseline_key
from legacy_gpu_patch.errors import ExitCode

# the same innocent-looking errors a green build prints too, in another checkout, at other lines, other temp names
GREEN = b"""\
[1/3] Building CXX object c10/CMakeFiles/c10.dir/util/Logging.cpp.o
/home/ci/run-7/src/c10/util/Logging.cpp:12:3: error: 'glog_flag' was not declared in this scope
CMake Error at /home/ci/run-7/build/cmake/Modules/FindOpenMP.cmake:40 (message): OpenMP not usable
/tmp/tmpxft_00001a2b_00000000-6_x.cudafe1.cpp:3:1: error: expected ';' before 'x' (took 1.25 s)
[3/3] Linking CXX shared library lib/libc10.so
"""
FAILED = b"""\
[1/4] Building CXX object c10/CMakeFiles/c10.dir/util/Logging.cpp.o
/work/pytorch/src/c10/util/Logging.cpp:14:7: error: 'glog_flag' was not declared in this scope
CMake Error at /work/pytorch/build/cmake/Modules/FindOpenMP.cmake:44 (message): OpenMP not usable
/tmp/tmpxft_0000ffee_00000000-6_x.cudafe1.cpp:3:1: error: expected ';' before 'x' (took 2.50 s)
/work/pt/aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cu(104): error: identifier "cusparseScsrmm2" is undefined
"""


def test_the_same_error_in_another_checkout_has_the_same_key() -> None:
    (a,) = classify_bytes(b"/home/ci/src/x/Logging.cpp:12:3: error: 'glog_flag' was not declared in this scope\n")
    (b,) = classify_bytes(b"/work/y/src/x/Logging.cpp:140:9: error: 'glog_flag' was not declared in this scope\n")
    (c,) = classify_bytes(b"/work/y/src/x/Logging.cpp:140:9: error: 'other_flag' was not declared in this scope\n")
    assert baseline_key(a) == baseline_key(b)
    assert baseline_key(a) != baseline_key(c)


def test_new_findings_keep_only_what_the_green_log_lacks(tmp_path: Path) -> None:
    green = tmp_path / "green.log"
    green.write_bytes(GREEN)
    known = baseline_keys(green)
    new = new_findings(classify_bytes(FAILED), known)
    assert [f.rule for f in new] == ["cusparse-csrmm2-removed"]


def test_classify_cli_with_a_baseline(tmp_path: Path, lgpatch: Runner) -> None:
    failed, green = tmp_path / "failed.log", tmp_path / "green.log.gz"
    failed.write_bytes(FAILED)
    green.write_bytes(gzip.compress(GREEN))  # CI hands out gzipped logs
    everything = lgpatch("classify", failed, "--json")
    assert everything.code == 11
    assert len(json.loads(everything.out)["findings"]) == 4
    r = lgpatch("classify", failed, "--json", "--baseline", green)
    assert r.code == 11
    assert [f["rule"] for f in json.loads(r.out)["findings"]] == ["cusparse-csrmm2-removed"]
    # a failed log whose every finding the green one has: clean, exit 0
    same = tmp_path / "same.log"
    same.write_bytes(GREEN)
    clean = lgpatch("classify", same, "--json", "--baseline", green)
    assert clean.code == 0 and json.loads(clean.out)["findings"] == []


def test_a_missing_baseline_is_a_clear_error(tmp_path: Path, lgpatch: Runner) -> None:
    failed = tmp_path / "failed.log"
    failed.write_bytes(FAILED)
    r = lgpatch("classify", failed, "--baseline", tmp_path / "nope.log")
    assert r.code == ExitCode.CONFIG
    assert "nope.log: no such baseline log" in r.err


def test_an_unreadable_baseline_is_a_clear_error(tmp_path: Path, lgpatch: Runner) -> None:
    failed = tmp_path / "failed.log"
    failed.write_text("x.cpp:1:1: error: 'uint8_t' was not declared in this scope\n", encoding="utf-8")
    broken = tmp_path / "green.log.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00 then not gzip at all")
    r = lgpatch("classify", failed, "--baseline", broken)
    assert r.code == ExitCode.CONFIG
    assert f"{broken}: cannot read baseline log" in r.err and "Traceback" not in r.err
