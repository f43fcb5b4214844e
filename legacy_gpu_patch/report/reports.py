"""Reports of a build or a classified log: JSON for machines, JUnit XML and GitHub annotations for CI, a Markdown
step summary on GitHub Actions, and a short human summary for the terminal.

All formats are rendered from one `Report`; findings are already ranked by the classifier (first root cause first).
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch import __version__
from legacy_gpu_patch.classify.classifier import Finding

REPORT_SCHEMA_VERSION = 1
FORMATS = ("text", "json", "junit", "github")
GITHUB_ANNOTATION_CAP = 10  # GitHub shows at most 10 annotations of each type per step


@dataclass
class PhaseResult:
    """One build command as it ran (or why it did not)."""

    name: str
    phase: str
    argv: list[str]
    cwd: str = "."
    returncode: int | None = None
    duration: float = 0.0
    status: str = "not-run"  # passed | failed | skipped | interrupted | not-run
    reason: str = ""  # why skipped (the `when:` verdict) or how it failed
    optional: bool = False
    log_lines: tuple[int, int] | None = None  # first/last line of its output in the log

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "phase": self.phase,
            "argv": self.argv,
            "cwd": self.cwd,
            "returncode": self.returncode,
            "duration_s": round(self.duration, 3),
            "status": self.status,
            "reason": self.reason,
            "optional": self.optional,
            "log_lines": list(self.log_lines) if self.log_lines else None,
        }


@dataclass
class Artifact:
    path: str
    size: int
    sha256: str
    new: bool = True  # written by this build (not left from an earlier one)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256, "new": self.new}


@dataclass
class Report:
    kind: str  # "build" | "classify"
    source: str  # the log file (or "-" for stdin)
    findings: list[Finding]
    status: str  # ok | failed | interrupted | findings | clean
    exit_code: int
    lines: int = 0
    bytes: int = 0
    errors: int = 0  # error occurrences
    warnings: int = 0
    dropped: int = 0  # occurrences of findings beyond the classifier's cap
    phases: list[PhaseResult] = field(default_factory=list)
    wheels: list[Artifact] = field(default_factory=list)
    started: str = ""
    duration: float = 0.0
    recipe: str | None = None
    recipe_patchsets: tuple[str, ...] = ()  # patchsets of the recipe: hints are checked against them
    params: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    workdir: str | None = None

    @staticmethod
    def counts(classifier: Any) -> dict[str, int]:
        """The classifier's running counters, as Report fields (shared by build and classify)."""
        return {name: getattr(classifier, name) for name in ("lines", "bytes", "errors", "warnings", "dropped")}

    @property
    def error_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA_VERSION,
            "lgpatch": __version__,
            "kind": self.kind,
            "status": self.status,
            "exit_code": self.exit_code,
            "source": self.source,
            "started": self.started,
            "duration_s": round(self.duration, 3),
            "recipe": self.recipe,
            "params": self.params,
            "variables": self.variables,
            "workdir": self.workdir,
            "summary": {
                "lines": self.lines,
                "bytes": self.bytes,
                "errors": self.errors,
                "warnings": self.warnings,
                "findings": len(self.findings),
                "error_findings": len(self.error_findings),
                "dropped": self.dropped,
                "categories": category_counts(self.findings),
            },
            "phases": [p.to_dict() for p in self.phases],
            "wheels": [w.to_dict() for w in self.wheels],
            "findings": [self._finding_dict(f) for f in self.findings],
        }

    def _finding_dict(self, f: Finding) -> dict[str, Any]:
        d = f.to_dict()
        if self.recipe_patchsets:
            d["patchset_in_recipe"] = [p for p in f.patchsets if p in self.recipe_patchsets]
        return d


def category_counts(findings: Iterable[Finding]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in findings:
        if f.is_error:
            counts[f.category] = counts.get(f.category, 0) + f.count
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def patchset_hint(f: Finding, recipe_patchsets: Sequence[str] = ()) -> str:
    """Which patchset fixes it: the recipe's own ones first (those are what `lgpatch apply` can add)."""
    if not f.patchsets:
        return ""
    if recipe_patchsets:
        mine = [p for p in f.patchsets if p in recipe_patchsets]
        if mine:
            return ", ".join(mine)
    return ", ".join(f.patchsets)


# --------------------------------------------------------------------------------------------- JSON


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------- JUnit XML


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


def to_junit(report: Report) -> str:
    """One <testcase> per build phase (classify: one for the log); one <failure> per error finding in it."""
    phases: dict[str, list[PhaseResult]] = {}
    for p in report.phases:
        phases.setdefault(p.phase, []).append(p)
    by_phase: dict[str, list[Finding]] = {}
    default_phase = "log" if not report.phases else report.phases[-1].phase
    for f in report.findings:
        by_phase.setdefault(f.phase or default_phase, []).append(f)
    names = list(phases) or ["log"]
    for name in by_phase:
        if name not in names:
            names.append(name)
    suites = ET.Element("testsuites", name=f"lgpatch {report.kind}")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"lgpatch {report.kind}" + (f" {report.recipe}" if report.recipe else ""),
        timestamp=report.started or "",
        hostname=os.uname().nodename if hasattr(os, "uname") else "",
    )
    total = failures = skipped = 0
    for name in names:
        cmds = phases.get(name, [])
        findings = by_phase.get(name, [])
        duration = sum(c.duration for c in cmds) if cmds else report.duration
        case = ET.SubElement(suite, "testcase", classname=f"lgpatch.{report.kind}", name=name, time=f"{duration:.3f}")
        total += 1
        errors = [f for f in findings if f.is_error]
        failed_cmds = [c for c in cmds if c.status in ("failed", "interrupted")]
        if cmds and all(c.status == "skipped" for c in cmds):
            ET.SubElement(case, "skipped", message="; ".join(f"{c.name}: {c.reason}" for c in cmds))
            skipped += 1
            continue
        for f in errors:
            el = ET.SubElement(case, "failure", type=f.category, message=_xml_safe(_finding_title(f)))
            el.text = _xml_safe(_finding_body(f, report.recipe_patchsets))
        for c in failed_cmds:
            if not errors:
                el = ET.SubElement(case, "failure", type="command-" + c.status,
                                   message=_xml_safe(f"{c.name}: {c.reason or c.status}"))
                el.text = _xml_safe(" ".join(c.argv))
        if errors or failed_cmds:
            failures += 1
        notes = [f"warning [{f.category}] {f.where()}: {f.message}" for f in findings if not f.is_error]
        notes += [f"{c.name}: {' '.join(c.argv)} -> {c.status} in {c.duration:.1f}s" for c in cmds]
        if notes:
            out = ET.SubElement(case, "system-out")
            out.text = _xml_safe("\n".join(notes))
    suite.set("tests", str(total))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    suite.set("time", f"{report.duration:.3f}")
    suites.set("tests", str(total))
    suites.set("failures", str(failures))
    suites.set("errors", "0")
    suites.set("skipped", str(skipped))
    suites.set("time", f"{report.duration:.3f}")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# --------------------------------------------------------------------------------------------- GitHub


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _relative(path: str, root: str | None) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return path


def github_annotations(report: Report, cap: int = GITHUB_ANNOTATION_CAP) -> list[str]:
    """Workflow commands (::error file=..,line=..::msg), at most `cap` per type, first root cause first."""
    out: list[str] = []
    used = {"error": 0, "warning": 0}
    dropped = {"error": 0, "warning": 0}
    for f in report.findings:
        kind = "error" if f.is_error else "warning"
        if used[kind] >= cap:
            dropped[kind] += 1
            continue
        used[kind] += 1
        props = []
        if f.file:
            props.append(f"file={_gh_prop(_relative(f.file, report.workdir))}")
            if f.line:
                props.append(f"line={f.line}")
        title = f"{f.category}" + (f" x{f.count}" if f.count > 1 else "")
        props.append(f"title={_gh_prop(title)}")
        msg = f.message
        if f.fix:
            msg += f"\nfix: {f.fix}"
        hint = patchset_hint(f, report.recipe_patchsets)
        if hint:
            msg += f"\npatchset: {hint}"
        out.append(f"::{kind} {','.join(props)}::{_gh_data(msg)}")
    for kind, n in dropped.items():
        if n:
            out.append(f"::notice title=lgpatch::{n} more {kind} finding(s) not annotated "
                       f"(GitHub shows {cap} per type); see the step summary or report.json")
    return out


def _md_cell(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|").replace("`", "'")


def step_summary_markdown(report: Report, limit: int = 30) -> str:
    head = f"### lgpatch {report.kind}: {report.status}"
    if report.recipe:
        head += f" ({report.recipe})"
    lines = [head, ""]
    errs = report.error_findings
    lines.append(f"{len(errs)} error finding(s), {report.errors} error line(s), {report.warnings} warning line(s), "
                 f"{report.lines} log lines.")
    lines.append("")
    if report.findings:
        lines.append("| # | category | where | count | message | fix | patchset |")
        lines.append("|---|---|---|---|---|---|---|")
        for i, f in enumerate(report.findings[:limit], 1):
            sev = "" if f.is_error else " (warning)"
            lines.append(
                f"| {i} | `{f.category}`{sev} | {_md_cell(f.where(), 80)} | {f.count} | {_md_cell(f.message)} | "
                f"{_md_cell(f.fix, 120)} | {_md_cell(patchset_hint(f, report.recipe_patchsets), 60)} |"
            )
        if len(report.findings) > limit:
            lines.append(f"\n{len(report.findings) - limit} more finding(s) in report.json.")
    if report.wheels:
        lines += ["", "| wheel | size | sha256 |", "|---|---|---|"]
        for w in report.wheels:
            lines.append(f"| {_md_cell(Path(w.path).name)} | {w.size} | `{w.sha256}` |")
    return "\n".join(lines) + "\n"


def write_step_summary(report: Report, env: Mapping[str, str] | None = None) -> Path | None:
    """Append the Markdown summary to $GITHUB_STEP_SUMMARY when running on GitHub Actions."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS", "").lower() != "true" or not env.get("GITHUB_STEP_SUMMARY"):
        return None
    path = Path(env["GITHUB_STEP_SUMMARY"])
    with path.open("a", encoding="utf-8") as fh:
        fh.write(step_summary_markdown(report))
    return path


# --------------------------------------------------------------------------------------------- text


def render_text(report: Report, console: Any, limit: int = 10) -> None:
    """A short human summary (rich console): the first root cause first, what it is, what fixes it."""
    from rich.markup import escape

    errs = report.error_findings
    warns = [f for f in report.findings if not f.is_error]
    if not report.findings:
        console.print(f"[green]lgpatch:[/] no findings in {report.lines} lines")
    else:
        cats = category_counts(report.findings)
        console.print(
            f"[bold]lgpatch:[/] {len(errs)} error finding(s) ({report.errors} lines) in "
            f"{len(cats)} categor{'y' if len(cats) == 1 else 'ies'}, {len(warns)} warning(s); first root cause first"
        )
    for i, f in enumerate(report.findings[:limit], 1):
        style = "red" if f.is_error else "yellow"
        count = f" x{f.count}" if f.count > 1 else ""
        phase = f" [{f.phase}]" if f.phase else ""
        console.print(
            f"[bold]{i:2d}.[/] [{style}]{f.category}[/]{count}  {escape(f.where())}"
            f"[dim]{phase} log line {f.log_line}[/]"
        )
        console.print(f"    {escape(f.message[:300])}", highlight=False)
        if f.explanation:
            console.print(f"    [dim]why:[/] {escape(f.explanation)}", highlight=False)
        if f.fix:
            console.print(f"    [dim]fix:[/] {escape(f.fix)}", highlight=False)
        hint = patchset_hint(f, report.recipe_patchsets)
        if hint:
            where = " (in this recipe)" if report.recipe_patchsets and any(
                p in report.recipe_patchsets for p in f.patchsets) else ""
            console.print(f"    [dim]patchset:[/] [cyan]{escape(hint)}[/]{where}", highlight=False)
    if len(report.findings) > limit:
        console.print(f"    ... {len(report.findings) - limit} more finding(s) in the JSON report")
    if report.dropped:
        console.print(f"    ({report.dropped} occurrence(s) beyond the finding cap were counted, not kept)")
    for w in report.wheels:
        console.print(f"[green]wheel:[/] {escape(w.path)} ({w.size} bytes, sha256 {w.sha256})")


# --------------------------------------------------------------------------------------------- files


def write_reports(report: Report, directory: Path) -> dict[str, Path]:
    """report.json, junit.xml and summary.md in `directory` (created)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": directory / "report.json",
        "junit": directory / "junit.xml",
        "markdown": directory / "summary.md",
    }
    paths["json"].write_text(to_json(report), encoding="utf-8")
    paths["junit"].write_text(to_junit(report), encoding="utf-8")
    paths["markdown"].write_text(step_summary_markdown(report), encoding="utf-8")
    return paths


def emit(report: Report, fmt: str, stdout: Any, console: Any) -> None:
    """Print the report in one of FORMATS: machine formats to stdout, the human summary to the (stderr) console."""
    if fmt == "json":
        stdout.write(to_json(report))
    elif fmt == "junit":
        stdout.write(to_junit(report))
    elif fmt == "github":
        for line in github_annotations(report):
            stdout.write(line + "\n")
        render_text(report, console)
    else:
        render_text(report, console)
