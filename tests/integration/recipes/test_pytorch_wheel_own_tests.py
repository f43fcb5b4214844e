"""pytorch_wheel.sh's runner for PyTorch's own test files (`own_tests`), on this machine: the real functions cut
from the script, run by bash against a small unittest file of the same kind (1.5's test files run through
unittest, since today's pytest cannot collect them): case-blind word selection as pytest's -k, the counts of
passed / failed / skipped / errors from -v lines (a result word pushed to a later line included), and the time box."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.integration

SCRIPT = (REPO / "bench" / "gpu" / "pytorch_wheel.sh").read_text()

FAKE_TESTS = '''\
import time
import unittest


class TestNN(unittest.TestCase):
    def test_Conv2d_forward(self):
        pass

    def test_conv_transpose(self):
        pass

    def test_LSTM_cell(self):
        self.assertEqual(1, 2)

    @unittest.skip("needs two GPUs")
    def test_BatchNorm_multi_gpu(self):
        pass

    def test_batchnorm_raises(self):
        raise RuntimeError("boom")

    def test_unrelated(self):
        pass

    def test_noisy_lms(self):
        # as IBM's LMS test does: the allocator prints to stderr while the test runs, so unittest's "ok" lands
        # at the start of a later line
        import sys
        sys.stderr.write("Couldn't download test skip set...\\nLMS: allocation limit is 80 MB\\n")
        sys.stderr.flush()

    def test_z_slow_conv(self):
        time.sleep(float(__import__("os").environ.get("SLOW_S", "0")))


if __name__ == "__main__":
    unittest.main()
'''


def _function(name: str) -> str:
    match = re.search(rf"^{name}\(\) {{.*?^}}", SCRIPT, re.S | re.M)
    assert match, name
    return match.group(0)


def _own_tests(tmp_path: Path, budget_s: int, *args: str, slow_s: float = 0) -> str:
    (tmp_path / "test_fake.py").write_text(FAKE_TESTS)
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    known = tmp_path / "bench" / "gpu" / "pytorch_known_failures.txt"
    known.parent.mkdir(parents=True, exist_ok=True)
    known.write_text("# FILE CLASS.TEST  reason\ntest_fake.py TestNN.test_LSTM_cell  one is not two\n")
    prelude = (f'set -uo pipefail\nLOGS={logs}\nTEST_BUDGET_S={budget_s}\nPY={sys.executable}\nREPO={tmp_path}\n'
               f'say() {{ echo "$*"; }}\n')
    functions = [_function(name) for name in ("ci_pattern", "unittest_counts", "own_tests", "failures_judged")]
    body = prelude + "\n".join(functions) + '\nown_tests "$@"\n'
    done = subprocess.run(["bash", "-c", body, "bash", *args], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "SLOW_S": str(slow_s)}, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_words_select_any_case_and_the_counts_are_exact(tmp_path: Path) -> None:
    said = _own_tests(tmp_path, 60, "nn", "test_fake.py", "conv", "lstm", "batchnorm")
    # conv: Conv2d_forward, conv_transpose, z_slow_conv; lstm: LSTM_cell; batchnorm: BatchNorm_multi_gpu,
    # batchnorm_raises; test_unrelated is not selected
    assert "rc=1 " in said, said
    assert "3 passed, 1 failed, 1 skipped or expected failures, 1 errors" in said, said
    # unittest's own summary, as it comes (some 3.12 releases, 3.12.1 here, leave skipped tests out of "Ran N";
    # the H200's 3.12.3 counts them): the counts above come from the -v lines instead
    assert "Ran " in said and "FAILED (failures=1, errors=1, skipped=1)" in said, said
    log = (tmp_path / "logs" / "tests-nn.txt").read_text()
    assert "test_unrelated" not in log
    # the listed failure is known, the other one (an error) is new; both as CLASS.TEST
    assert "known failures: TestNN.test_LSTM_cell; NEW failures: TestNN.test_batchnorm_raises" in said, said


def test_no_words_runs_the_whole_file(tmp_path: Path) -> None:
    said = _own_tests(tmp_path, 60, "all", "test_fake.py")
    assert "5 passed, 1 failed, 1 skipped or expected failures, 1 errors" in said, said
    assert "FAILED (failures=1, errors=1, skipped=1)" in said, said


def test_a_result_pushed_to_a_later_line_by_the_tests_own_output_is_counted(tmp_path: Path) -> None:
    said = _own_tests(tmp_path, 60, "lms", "test_fake.py", "noisy")
    log = (tmp_path / "logs" / "tests-lms.txt").read_text()
    assert re.search(r"test_noisy_lms .*\.\.\. Couldn't download.*\n.*LMS: .*\nok\n", log), log
    assert "1 passed, 0 failed, 0 skipped or expected failures, 0 errors" in said, said


def test_the_time_box_stops_the_run_and_keeps_the_counts_so_far(tmp_path: Path) -> None:
    said = _own_tests(tmp_path, 3, "slow", "test_fake.py", slow_s=30)
    assert "rc=124 " in said, said
    # everything sorted before test_z_slow_conv ran and was counted; no "Ran N tests" line
    assert "4 passed, 1 failed, 1 skipped or expected failures, 1 errors" in said, said
    assert "Ran " not in said.split("errors;", 1)[1], said
