"""What `lgpatch classify` loads at start-up, as a process: no rich for machine formats, no regex of a rule the
log never reaches (once the rule cache is filled), and the same report as a run that loads everything the checked
way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import run_cli_subprocess

# runs the CLI in this interpreter, then says which modules and how many compiled rules it ended with
PROBE = """
import runpy, sys
sys.argv = ["lgpatch", *sys.argv[1:]]
try:
    runpy.run_module("legacy_gpu_patch", run_name="__main__")
except SystemExit:
    pass
from legacy_gpu_patch.classify.rules import load_rules
compiled = sum(1 for r in load_rules().rules if "regex" in vars(r))
sys.stderr.write(f"\\nPROBE rich={any(m.split('.')[0] == 'rich' for m in sys.modules)} compiled={compiled} "
                 f"of={len(load_rules().rules)}\\n")
"""


def probe(*args: str) -> tuple[str, dict[str, str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)
    line = proc.stderr.rsplit("PROBE ", 1)[1].split()
    return proc.stdout, dict(item.split("=") for item in line)


def test_json_and_junit_do_not_import_rich_and_compile_few_rules(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("[1/2] Building CXX object a.o\n/src/a.cpp:3:1: error: 'uint8_t' was not declared in this scope\n")
    probe("classify", str(log), "--json")  # the first run fills the rule cache (and reads every pattern for it)
    for fmt in ("json", "junit"):
        out, seen = probe("classify", str(log), "--format", fmt)
        assert "uint8_t" in out
        assert seen["rich"] == "False", fmt
        assert 0 < int(seen["compiled"]) < int(seen["of"]) // 2, seen
    out, seen = probe("classify", str(log))  # the text summary is rich's to print
    assert seen["rich"] == "True" and "uint8_t" in out


def test_the_report_is_the_same_as_with_every_rule_compiled(tmp_path: Path) -> None:
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
    log = tmp_path / "all.log"
    log.write_bytes(b"".join(p.read_bytes() for p in sorted(fixtures.rglob("*.log"))))
    proc = run_cli_subprocess("classify", log, "--json")
    report = json.loads(proc.stdout)
    from legacy_gpu_patch.classify.classifier import Classifier, classify_stream
    from legacy_gpu_patch.classify.rules import _load, rule_files

    with open(log, "rb") as fh:  # the rule set loaded the checked way: every regex compiled at load
        c = classify_stream(fh, Classifier(_load(tuple(rule_files()))))
    assert [f["rule"] for f in report["findings"]] == [f.rule for f in c.findings()]
    assert [f["count"] for f in report["findings"]] == [f.count for f in c.findings()]
    assert report["summary"]["errors"] == c.errors and report["summary"]["lines"] == c.lines
