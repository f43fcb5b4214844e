"""The report of one `lgpatch ci` job: ci.json (for `lgpatch report merge`), junit.xml, summary.md, and GitHub
annotations and the step summary when on GitHub Actions. The build's own reports sit beside it in build/."""

from __future__ import annotations

import datetime as _dt
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch import __version__

CI_REPORT_SCHEMA = 1
ANNOTATION_CAP = 10  # GitHub shows at most 10 annotations of each type per step
STAGES = ("apply", "build", "repair", "smoke")


@dataclass
class Stage:
    name: str
    status: str = "not-run"  # passed | failed | skipped | not-run
    duration: float = 0.0
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "duration_s": round(self.duration, 3),
                "detail": self.detail}


@dataclass
class CiReport:
    job: str
    recipe: str
    params: dict[str, Any]
    started: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    status: str = "running"  # ok | failed
    exit_code: int = 0
    failure_class: str = ""  # the ExitCode name (PATCH, BUILD, VERIFY…)
    failed_stage: str = ""
    message: str = ""
    stages: list[Stage] = field(default_factory=lambda: [Stage(n) for n in STAGES])
    apply: dict[str, Any] = field(default_factory=dict)
    build: dict[str, Any] = field(default_factory=dict)
    wheel: dict[str, Any] | None = None
    smoke: dict[str, Any] = field(default_factory=dict)
    compiler_cache: dict[str, Any] = field(default_factory=dict)
    duration: float = 0.0
    notes: list[str] = field(default_factory=list)

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    @property
    def root_cause(self) -> dict[str, Any] | None:
        return self.build.get("first_finding")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": CI_REPORT_SCHEMA, "lgpatch": __version__, "kind": "ci", "job": self.job, "recipe": self.recipe,
            "params": self.params, "started": self.started, "duration_s": round(self.duration, 3),
            "status": self.status, "exit_code": self.exit_code, "failure_class": self.failure_class,
            "failed_stage": self.failed_stage, "message": self.message,
            "stages": [s.to_dict() for s in self.stages], "apply": self.apply, "build": self.build,
            "wheel": self.wheel, "smoke": self.smoke, "compiler_cache": self.compiler_cache, "notes": self.notes,
        }


def to_junit(report: CiReport) -> str:
    cases = report.stages + [Stage(f"smoke-{c['name']}", c["status"], c.get("duration_s", 0.0), c.get("detail", ""))
                             for c in report.smoke.get("cases", [])]
    suite = ET.Element("testsuite", name=f"lgpatch-ci.{report.job}", tests=str(len(cases)),
                       failures=str(sum(c.status == "failed" for c in cases)),
                       skipped=str(sum(c.status in ("skipped", "not-run") for c in cases)),
                       time=f"{report.duration:.3f}", timestamp=report.started)
    for c in cases:
        case = ET.SubElement(suite, "testcase", classname=f"lgpatch-ci.{report.job}", name=c.name,
                             time=f"{c.duration:.3f}")
        if c.status == "failed":
            ET.SubElement(case, "failure", message=c.detail[:500]).text = c.detail
        elif c.status in ("skipped", "not-run"):
            ET.SubElement(case, "skipped", message=c.detail[:500] or c.status)
    suites = ET.Element("testsuites")
    suites.append(suite)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _cell(text: Any, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return (text[: limit - 1] + "…" if len(text) > limit else text).replace("|", "\\|")


def to_markdown(report: CiReport) -> str:
    mark = "✅" if report.status == "ok" else "❌"
    lines = [f"### {mark} lgpatch ci {report.job}: {report.status}", ""]
    if report.status != "ok":
        lines += [f"**{report.failure_class or 'FAILED'}** (exit {report.exit_code}) in {report.failed_stage}: "
                  f"{_cell(report.message, 400)}", ""]
    lines += ["| stage | status | time | detail |", "|---|---|---|---|"]
    lines += [f"| {s.name} | {s.status} | {s.duration:.1f} s | {_cell(s.detail)} |" for s in report.stages]
    cause = report.root_cause
    if cause:
        lines += ["", f"First root cause: `{cause.get('category')}` {_cell(cause.get('where', ''), 80)}: "
                      f"{_cell(cause.get('message', ''))} — patchset: {', '.join(cause.get('patchsets') or []) or '—'}"]
    if report.wheel:
        w = report.wheel
        lines += ["", f"Wheel `{w['name']}` ({w['size']} bytes, sha256 `{w['sha256']}`)"]
    cc = report.compiler_cache
    if cc.get("kind") not in (None, "none"):
        lines += ["", f"{cc['kind']}: {cc.get('hits')} hit(s), {cc.get('misses')} miss(es)"]
    return "\n".join(lines) + "\n"


def _escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github_lines(report: CiReport, build_lines: list[str]) -> list[str]:
    """The build's annotations (already capped per type), then this job's own, each type kept within the cap."""
    out = list(build_lines)

    def room(kind: str) -> bool:
        return sum(line.startswith(f"::{kind}") for line in out) < ANNOTATION_CAP

    if report.status != "ok" and room("error"):
        title = _escape(f"lgpatch ci {report.job}: {report.failure_class} in {report.failed_stage}", prop=True)
        out.append(f"::error title={title}::{_escape(report.message)}")
    if report.status == "ok" and report.wheel and room("notice"):
        out.append(f"::notice title=lgpatch ci {_escape(report.job, prop=True)}::built {report.wheel['name']}")
    return out


def write(report: CiReport, directory: Path, env: Mapping[str, str] | None = None) -> dict[str, Path]:
    """ci.json, junit.xml, summary.md in `directory`; the summary is also appended to $GITHUB_STEP_SUMMARY."""
    env = os.environ if env is None else env
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"json": directory / "ci.json", "junit": directory / "junit.xml", "markdown": directory / "summary.md"}
    paths["json"].write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n", encoding="utf-8")
    paths["junit"].write_text(to_junit(report), encoding="utf-8")
    summary = to_markdown(report)
    paths["markdown"].write_text(summary, encoding="utf-8")
    if env.get("GITHUB_ACTIONS", "").lower() == "true" and env.get("GITHUB_STEP_SUMMARY"):
        with open(env["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as fh:
            fh.write(summary)
    return paths
