"""The short human summary of a LogReport (rich console): the first root cause first, what it is, what fixes it."""

from __future__ import annotations

from typing import Any

from legacy_gpu_patch.report.model import LogReport, category_counts, patchset_hint


def render_text(report: LogReport, console: Any, limit: int = 10) -> None:
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
