"""GitHub Actions: workflow-command annotations (capped per type, escaped) and the Markdown step summary."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from legacy_gpu_patch.report.model import LogReport, patchset_hint

GITHUB_ANNOTATION_CAP = 10  # GitHub shows at most 10 annotations of each type per step


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _relative(path: str, root: str | None) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return path


def github_annotations(report: LogReport, cap: int = GITHUB_ANNOTATION_CAP) -> list[str]:
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


def step_summary_markdown(report: LogReport, limit: int = 30) -> str:
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


def write_step_summary(report: LogReport, env: Mapping[str, str] | None = None) -> Path | None:
    """Append the Markdown summary to $GITHUB_STEP_SUMMARY when running on GitHub Actions."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS", "").lower() != "true" or not env.get("GITHUB_STEP_SUMMARY"):
        return None
    path = Path(env["GITHUB_STEP_SUMMARY"])
    with path.open("a", encoding="utf-8") as fh:
        fh.write(step_summary_markdown(report))
    return path
