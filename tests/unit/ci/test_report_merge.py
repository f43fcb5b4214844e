"""lgpatch report merge: three jobs' ci.json reports (one failed) → one summary; and the change since last run."""

from __future__ import annotations

import json
from pathlib import Path

from legacy_gpu_patch.ci import report as ci_report
from legacy_gpu_patch.ci.report import CiReport


def _job(root: Path, name: str, *, ok: bool, sha: str = "a" * 64, cause: str = "python-removed-api") -> Path:
    r = CiReport(name, "chainer-1.24", {"cuda": "13.0"})
    for s in r.stages:
        s.status = "passed"
    if ok:
        r.status = "ok"
        r.wheel = {"name": f"chainer-1.24.0+lgpatch.cu130-{name}.whl", "size": 1234, "sha256": sha}
    else:
        r.status, r.exit_code, r.failure_class, r.failed_stage = "failed", 9, "BUILD", "build"
        r.stage("build").status = "failed"
        r.message = "build command wheel failed: exit 1"
        r.build = {"first_finding": {"category": cause, "message": "'Callable' not in collections",
                                     "where": "chainer/link.py:3", "patchsets": ["chainer-py310"], "fix": "abc"}}
    folder = root / f"report-{name}"
    ci_report.write(r, folder, env={})
    return folder


def test_three_jobs_one_failed(lgpatch, tmp_path: Path) -> None:
    for name, ok in (("py3.11", True), ("py3.12", False), ("py3.10", True)):
        _job(tmp_path / "reports", name, ok=ok)
    md = lgpatch("report", "merge", tmp_path / "reports")
    assert md.code == 0, md.err
    assert "2 of 3 job(s) ok, 1 failed" in md.out
    rows = [line for line in md.out.splitlines() if line.startswith("| py")]
    assert rows[0].startswith("| py3.12 | ❌ BUILD (exit 9) in build")  # failures first
    assert "`python-removed-api` chainer/link.py:3" in rows[0] and "chainer-py310" in rows[0]
    assert "chainer-1.24.0+lgpatch.cu130-py3.10.whl | 1234 | `aaaaaaaaaaaaaaaa…`" in rows[1]
    js = json.loads(lgpatch("report", "merge", tmp_path / "reports", "--format", "json").out)
    assert js["counts"] == {"jobs": 3, "ok": 2, "failed": 1}
    failed = js["jobs"][0]
    assert failed["root_cause"]["patchsets"] == ["chainer-py310"] and failed["wheel"] is None
    assert {j["job"]: j["wheel"]["sha256"] for j in js["jobs"][1:]} == {"py3.10": "a" * 64, "py3.11": "a" * 64}


def test_new_versus_last_run(lgpatch, tmp_path: Path) -> None:
    last = tmp_path / "last"
    _job(last, "a", ok=True)
    _job(last, "b", ok=False)
    _job(last, "c", ok=True)
    _job(last, "d", ok=False)
    _job(last, "gone", ok=True)
    summary = tmp_path / "summary.json"
    assert lgpatch("report", "merge", last, "--write-json", summary).code == 0
    now = tmp_path / "now"
    _job(now, "a", ok=False)  # newly failing
    _job(now, "b", ok=True)  # fixed
    _job(now, "c", ok=True, sha="b" * 64)
    _job(now, "d", ok=False, cause="cuda-removed-api")
    _job(now, "e", ok=True)
    r = lgpatch("report", "merge", now, "--previous", summary, "--format", "json")
    assert r.code == 0, r.err
    js = json.loads(r.out)
    assert {j["job"]: j["change"] for j in js["jobs"]} == {
        "a": "newly failing", "b": "fixed", "c": "ok (wheel changed)", "d": "still failing (different cause)",
        "e": "new job"}
    assert js["gone"] == ["gone"]
    md = lgpatch("report", "merge", now, "--previous", summary).out
    assert "| vs last run |" in md and "newly failing |" in md and "not in this one: gone" in md


def test_no_reports_is_a_state_error(lgpatch, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    r = lgpatch("report", "merge", tmp_path / "empty")
    assert r.code == 7 and "no ci.json report under" in r.err


def test_junit_of_a_failed_job(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    folder = _job(tmp_path, "x", ok=False)
    suite = ET.parse(folder / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["build"]


def test_annotations_stay_within_githubs_cap_per_type() -> None:
    r = CiReport("j", "tiny", {})
    r.status, r.failure_class, r.failed_stage, r.message = "failed", "BUILD", "build", "boom\nsecond line"
    build = [f"::error file=a.c,line={i}::e{i}" for i in range(10)]
    assert ci_report.github_lines(r, build) == build  # full: the job's own error is not an 11th
    lines = ci_report.github_lines(r, build[:3])
    assert lines[-1] == "::error title=lgpatch ci j%3A BUILD in build::boom%0Asecond line"
    r.status, r.wheel = "ok", {"name": "w.whl"}
    assert ci_report.github_lines(r, [])[-1] == "::notice title=lgpatch ci j::built w.whl"
