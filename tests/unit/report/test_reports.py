"""Reports: JSON, JUnit XML (one testcase per phase, one failure per finding), GitHub annotations (capped at 10 per
type, escaped), the step summary on GitHub Actions, the human summary."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import Runner
from rich.console import Console

from legacy_gpu_patch.classify.classifier import Classifier
from legacy_gpu_patch.report.reports import (
    Artifact,
    LogReport,
    PhaseResult,
    github_annotations,
    render_text,
    step_summary_markdown,
    to_json,
    to_junit,
    write_reports,
    write_step_summary,
)

CONFIGURE = [
    "-- The CUDA compiler identification is NVIDIA 11.1.105",
    "CMake Error at cmake/public/cuda.cmake:170 (message):",
    "  PyTorch requires cuDNN 7 and above.",
    "",
]
BUILD = [
    "/src/caffe2/utils/GpuDefs.cuh:14:2: error: #error Unknown __CUDA_ARCH__; please define parameters",
    '/src/a.cu(12): error: identifier "cusparseScsrmm2" is undefined',
    '/src/b.cu(40): error: identifier "cusparseScsrmm2" is undefined',
    "/src/x.h:1:1: warning: 'x' is deprecated",
    "warning: cupy/core/core.pyx:878:4: __nonzero__ was removed in Python 3; use __bool__ instead",
    "make[2]: *** [x.o] Error 1",
]


def build_report(**kw: object) -> LogReport:
    c = Classifier()
    c.phase = "configure"
    for line in CONFIGURE:
        c.feed_line(line)
    c.flush()
    c.phase = "build"
    for line in BUILD:
        c.feed_line(line)
    findings = c.close()
    phases = [
        PhaseResult("configure-c10", "configure", ["cmake", "-S", "c10"], returncode=0, duration=1.5, status="passed"),
        PhaseResult("build-c10", "build", ["cmake", "--build", "b"], returncode=2, duration=3.0, status="failed",
                    reason="exit 2"),
        PhaseResult("wheel", "wheel", ["python", "setup.py", "bdist_wheel"], status="skipped",
                    reason="cuda=11.1 does not match >=13.0"),
    ]
    defaults: dict[str, object] = dict(
        kind="build", source="/tree/.git/lgpatch/build/build.log", findings=findings, status="failed", exit_code=9,
        lines=c.lines, bytes=c.bytes, errors=c.errors, warnings=c.warnings, phases=phases,
        started="2026-01-01T00:00:00+00:00",
        duration=4.5, recipe="pytorch-lms", recipe_patchsets=("gpudefs-arch-bound", "cusparse-spmm"),
        workdir="/src",
        wheels=[Artifact("/src/dist/torch-1.5.0-cp311-linux_x86_64.whl", 1234, "ab" * 32)],
    )
    defaults.update(kw)
    return LogReport(**defaults)  # type: ignore[arg-type]


def test_json_report_has_findings_phases_and_wheels() -> None:
    data = json.loads(to_json(build_report()))
    assert data["schema"] == 1 and data["kind"] == "build" and data["exit_code"] == 9
    cats = [f["category"] for f in data["findings"]]
    assert cats[:3] == ["cudnn-version-header", "cuda-arch-guard", "removed-cusparse-api"]
    sparse = data["findings"][2]
    assert sparse["count"] == 2 and sparse["file"] == "/src/a.cu" and sparse["line"] == 12
    assert sparse["patchset"] == ["cusparse-spmm"] and sparse["patchset_in_recipe"] == ["cusparse-spmm"]
    assert [o["file"] for o in sparse["occurrences"]] == ["/src/a.cu", "/src/b.cu"]
    assert sparse["phase"] == "build" and data["findings"][0]["phase"] == "configure"
    assert set(sparse["context"]) == {"before", "after"}
    assert data["summary"]["error_findings"] == 4 and data["summary"]["categories"]["removed-cusparse-api"] == 2
    assert data["phases"][1]["status"] == "failed" and data["phases"][2]["reason"].startswith("cuda=11.1")
    assert data["wheels"][0]["sha256"] == "ab" * 32


def test_junit_one_testcase_per_phase_and_one_failure_per_finding() -> None:
    root = ET.fromstring(to_junit(build_report()))
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["configure", "build", "wheel"]
    configure = [f.get("type") for f in cases["configure"].findall("failure")]
    build = [f.get("type") for f in cases["build"].findall("failure")]
    assert configure == ["cudnn-version-header"]
    assert build == ["cuda-arch-guard", "removed-cusparse-api", "other"]
    assert cases["wheel"].find("skipped") is not None
    body = cases["build"].findall("failure")[1].text or ""
    assert "patchset: cusparse-spmm" in body and "fix:" in body
    assert "warning [cython-incompat]" in (cases["build"].findtext("system-out") or "")
    assert suite.get("tests") == "3" and suite.get("failures") == "2" and suite.get("skipped") == "1"


def test_junit_failed_command_without_findings_is_a_failure() -> None:
    report = build_report(findings=[])
    root = ET.fromstring(to_junit(report))
    build = next(c for c in root.iter("testcase") if c.get("name") == "build")
    (failure,) = build.findall("failure")
    assert failure.get("type") == "command-failed" and "exit 2" in (failure.get("message") or "")


def test_junit_escapes_control_characters() -> None:
    c = Classifier()
    c.feed(b"src/a.cpp:1:1: error: bad \x1b[31m\x01\x02 token <&>\n")
    report = LogReport(kind="classify", source="-", findings=c.close(), status="findings", exit_code=11)
    ET.fromstring(to_junit(report))  # well-formed


def test_github_annotations_are_escaped_and_capped_per_type() -> None:
    c = Classifier()
    for i in range(15):
        c.feed_line(f"/src/f{i}.cpp:{i + 1}:1: error: expected ';' before 'x{i}'%,: done")
    for i in range(12):
        c.feed_line(f"W gpu_device.cc:1852] TensorFlow was not built with CUDA kernel binaries compatible with "
                    f"compute capability 8.{i}. CUDA kernels will be jit-compiled from PTX, which could take minutes.")
    report = LogReport(kind="classify", source="-", findings=c.close(), status="findings", exit_code=11,
                    workdir="/src")
    lines = github_annotations(report)
    errors = [a for a in lines if a.startswith("::error ")]
    warnings = [a for a in lines if a.startswith("::warning ")]
    notices = [a for a in lines if a.startswith("::notice ")]
    assert len(errors) == 10 and len(warnings) == 10 and len(notices) == 2
    assert errors[0].startswith("::error file=f0.cpp,line=1,title=other::")  # path made relative to the tree
    assert "%25%2C" not in errors[0].split("::", 2)[2]  # data is escaped as data, not as a property
    assert "'x0'%25,: done" in errors[0]
    assert all("\n" not in a for a in lines)
    assert "%0Afix: " in errors[0]


def test_step_summary_only_on_github_actions(tmp_path: Path) -> None:
    report = build_report()
    summary = tmp_path / "summary.md"
    assert write_step_summary(report, env={"GITHUB_STEP_SUMMARY": str(summary)}) is None
    assert not summary.exists()
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    assert write_step_summary(report, env=env) == summary
    write_step_summary(report, env=env)  # appends, as each step's summary does
    text = summary.read_text(encoding="utf-8")
    assert text.count("### lgpatch build: failed (pytorch-lms)") == 2
    assert "| 1 | `cudnn-version-header` |" in text
    assert "| torch-1.5.0-cp311-linux_x86_64.whl | 1234 |" in text


def test_markdown_cells_are_escaped() -> None:
    c = Classifier()
    c.feed_line("src/a.cpp:1:1: error: operator| and `backticks` | here")
    report = LogReport(kind="classify", source="-", findings=c.close(), status="findings", exit_code=11)
    row = next(line for line in step_summary_markdown(report).splitlines() if line.startswith("| 1 |"))
    assert "operator\\| and 'backticks' \\| here" in row


def test_text_summary_names_category_fix_and_patchset() -> None:
    out = io.StringIO()
    render_text(build_report(), Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    first = text.splitlines()[1]
    assert "cudnn-version-header" in first and "cmake/public/cuda.cmake:170" in first
    assert "patchset: cusparse-spmm (in this recipe)" in text
    assert "fix:" in text and "wheel: /src/dist/torch-1.5.0" in text


def test_write_reports_writes_three_files(tmp_path: Path) -> None:
    paths = write_reports(build_report(), tmp_path / "r")
    assert sorted(p.name for p in paths.values()) == ["junit.xml", "report.json", "summary.md"]
    assert json.loads(paths["json"].read_text())["recipe"] == "pytorch-lms"


@pytest.mark.parametrize("fmt", ["json", "junit", "github", "text"])
def test_classify_command_formats_and_exit_code(lgpatch: Runner, tmp_path: Path, fmt: str) -> None:
    log = tmp_path / "build.log"
    log.write_text("\n".join(CONFIGURE + BUILD) + "\n", encoding="utf-8")
    result = lgpatch("classify", str(log), "--format", fmt, "--report-dir", str(tmp_path / "r"))
    assert result.code == 11, result.out + result.err
    if fmt == "json":
        assert json.loads(result.out)["status"] == "findings"
    elif fmt == "junit":
        assert ET.fromstring(result.out).tag == "testsuites"
    elif fmt == "github":
        assert result.out.startswith("::error file=cmake/public/cuda.cmake,line=170,")
    assert (tmp_path / "r" / "report.json").is_file()


def test_classify_clean_log_and_stdin_and_gzip(lgpatch: Runner, tmp_path: Path) -> None:
    import gzip

    clean = lgpatch("classify", "-", "--json", input="all good\n[1/2] Building CXX object x.o\n")
    assert clean.code == 0 and json.loads(clean.out)["summary"]["findings"] == 0
    gz = tmp_path / "ci.log.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("c++: fatal error: Killed signal terminated program cc1plus\n")
    res = lgpatch("classify", str(gz), "--json")
    assert res.code == 11 and json.loads(res.out)["findings"][0]["category"] == "oom-killed"
    missing = lgpatch("classify", str(tmp_path / "nope.log"))
    assert missing.code != 0
