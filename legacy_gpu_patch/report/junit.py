"""JUnit XML for CI test tabs: one <testcase> per build phase (classify: one for the log), one <failure> per error
finding in it, so a CI page lists the root causes where it lists failed tests."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from legacy_gpu_patch.classify.classifier import Finding
from legacy_gpu_patch.report.model import LogReport, PhaseResult, patchset_hint


def _finding_title(f: Finding) -> str:
    count = f" (x{f.count})" if f.count > 1 else ""
    return f"[{f.category}] {f.where()}: {f.message[:200]}{count}"


def _finding_body(f: Finding, recipe_patchsets: Sequence[str]) -> str:
    lines = [f"{f.category} ({f.rule}) at {f.where()}, log line {f.log_line}, {f.count} occurrence(s)"]
    lines.append(f.message)
    if f.explanation:
        lines.append(f"why: {f.explanation}")
    if f.fix:
        lines.append(f"fix: {f.fix}")
    hint = patchset_hint(f, recipe_patchsets)
    if hint:
        lines.append(f"patchset: {hint}")
    if f.context_before or f.context_after:
        lines.append("context:")
        lines += [f"    {c}" for c in f.context_before]
        lines.append(f"  > {f.message}")
        lines += [f"    {c}" for c in f.context_after]
    if len(f.occurrences) > 1:
        lines.append("also at: " + ", ".join(
            f"{o.file}:{o.line}" if o.file and o.line else f"log line {o.log_line}" for o in f.occurrences[1:10]
        ))
    return "\n".join(lines)


def _xml_safe(text: str) -> str:
    # XML 1.0 forbids most control characters; logs carry them (ANSI leftovers, \x00 from binary output)
    return "".join(ch if ch in "\t\n\r" or ord(ch) >= 0x20 else f"\\x{ord(ch):02x}" for ch in text)


def _by_phase(report: LogReport) -> tuple[list[str], dict[str, list[PhaseResult]], dict[str, list[Finding]]]:
    """Phase names in run order (findings of a phase with no command last), its commands, its findings."""
    commands: dict[str, list[PhaseResult]] = {}
    for p in report.phases:
        commands.setdefault(p.phase, []).append(p)
    findings: dict[str, list[Finding]] = {}
    default_phase = "log" if not report.phases else report.phases[-1].phase
    for f in report.findings:
        findings.setdefault(f.phase or default_phase, []).append(f)
    names = list(commands) or ["log"]
    names += [name for name in findings if name not in names]
    return names, commands, findings


def _testcase(suite: ET.Element, report: LogReport, name: str, cmds: list[PhaseResult],
              findings: list[Finding]) -> str:
    """Add one phase's <testcase>; returns its verdict: passed, failed or skipped."""
    duration = sum(c.duration for c in cmds) if cmds else report.duration
    case = ET.SubElement(suite, "testcase", classname=f"lgpatch.{report.kind}", name=name, time=f"{duration:.3f}")
    if cmds and all(c.status == "skipped" for c in cmds):
        ET.SubElement(case, "skipped", message="; ".join(f"{c.name}: {c.reason}" for c in cmds))
        return "skipped"
    errors = [f for f in findings if f.is_error]
    failed_cmds = [c for c in cmds if c.status in ("failed", "interrupted")]
    for f in errors:
        el = ET.SubElement(case, "failure", type=f.category, message=_xml_safe(_finding_title(f)))
        el.text = _xml_safe(_finding_body(f, report.recipe_patchsets))
    if not errors:  # a failed command that left no finding is a failure too
        for c in failed_cmds:
            el = ET.SubElement(case, "failure", type="command-" + c.status,
                               message=_xml_safe(f"{c.name}: {c.reason or c.status}"))
            el.text = _xml_safe(" ".join(c.argv))
    notes = [f"warning [{f.category}] {f.where()}: {f.message}" for f in findings if not f.is_error]
    notes += [f"{c.name}: {' '.join(c.argv)} -> {c.status} in {c.duration:.1f}s" for c in cmds]
    if notes:
        ET.SubElement(case, "system-out").text = _xml_safe("\n".join(notes))
    return "failed" if errors or failed_cmds else "passed"


def _set_totals(element: ET.Element, verdicts: list[str], duration: float) -> None:
    element.set("tests", str(len(verdicts)))
    element.set("failures", str(verdicts.count("failed")))
    element.set("errors", "0")
    element.set("skipped", str(verdicts.count("skipped")))
    element.set("time", f"{duration:.3f}")


def to_junit(report: LogReport) -> str:
    """One <testcase> per build phase (classify: one for the log); one <failure> per error finding in it."""
    names, commands, findings = _by_phase(report)
    suites = ET.Element("testsuites", name=f"lgpatch {report.kind}")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"lgpatch {report.kind}" + (f" {report.recipe}" if report.recipe else ""),
        timestamp=report.started or "",
        hostname=os.uname().nodename if hasattr(os, "uname") else "",
    )
    verdicts = [_testcase(suite, report, name, commands.get(name, []), findings.get(name, [])) for name in names]
    _set_totals(suite, verdicts, report.duration)
    _set_totals(suites, verdicts, report.duration)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
