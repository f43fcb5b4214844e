"""Reports of a build or a classified log: JSON for machines, JUnit XML and GitHub annotations for CI, a Markdown
step summary on GitHub Actions, and a short human summary for the terminal.

All formats are rendered from one `LogReport` (report/model.py); each format lives in its own module (junit.py,
github.py, text.py) and this module is the one place that picks between them (`FORMATS`, `emit`, `write_reports`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from legacy_gpu_patch.report.formats import FORMATS
from legacy_gpu_patch.report.github import (
    GITHUB_ANNOTATION_CAP,
    github_annotations,
    step_summary_markdown,
    write_step_summary,
)
from legacy_gpu_patch.report.model import (
    REPORT_SCHEMA_VERSION,
    Artifact,
    LogCounts,
    LogReport,
    PhaseResult,
    category_counts,
    patchset_hint,
)
from legacy_gpu_patch.report.text import render_text

__all__ = [
    "FORMATS", "GITHUB_ANNOTATION_CAP", "REPORT_SCHEMA_VERSION", "Artifact", "LogCounts", "LogReport", "PhaseResult",
    "category_counts", "emit", "github_annotations", "patchset_hint", "render_text", "step_summary_markdown",
    "to_json", "to_junit", "write_reports", "write_step_summary",
]

def to_junit(report: LogReport) -> str:
    """JUnit XML (report/junit.py, imported here when used: xml.etree is not a start-up cost of --json)."""
    from legacy_gpu_patch.report.junit import to_junit as render

    return render(report)


def to_json(report: LogReport) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"


def write_reports(report: LogReport, directory: Path) -> dict[str, Path]:
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


def emit(report: LogReport, fmt: str, stdout: Any, console: Any) -> None:
    """Print the report in one of FORMATS: machine formats to `stdout`, the human summary to `console` (read only
    for text and github: None will do for json and junit, and spares the start-up of rich)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
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
