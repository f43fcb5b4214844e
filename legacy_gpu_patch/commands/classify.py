"""`lgpatch classify LOG|-`: the build classifier on a log from anywhere (CI, a colleague, an old build)."""

from __future__ import annotations

import datetime as _dt
import gzip
import sys
import time
from pathlib import Path
from typing import BinaryIO

import click

from legacy_gpu_patch.errors import ConfigError, ExitCode


def _open(log: str) -> tuple[BinaryIO, str]:
    if log == "-":
        return sys.stdin.buffer, "-"
    path = Path(log)
    if not path.is_file():
        raise ConfigError(f"{log}: no such log file")
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":  # CI systems hand out gzipped logs
        return gzip.open(path, "rb"), str(path)  # type: ignore[return-value]
    return open(path, "rb"), str(path)


@click.command("classify")
@click.argument("log", metavar="LOG|-")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit", "github"]), default=None,
              help="text (summary on stderr), json, junit (XML) or github (workflow annotations) on stdout.")
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write report.json, junit.xml and summary.md there.")
@click.option("--context", "context", type=click.IntRange(0, 50), default=3, show_default=True,
              help="Context lines kept before and after each finding.")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="Findings shown in the text summary.")
@click.option("--baseline", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="GREEN_LOG",
              help="Report only findings this passing build's log does not have (paths, line numbers, temp names "
                   "and timings ignored).")
def command(log: str, as_json: bool, fmt: str | None, report_dir: Path | None, context: int, limit: int,
            baseline: Path | None) -> None:
    """Classify the errors in a build log: category, cause, fix and the patchset that fixes each.

    Exit code 11 when error findings exist, 0 otherwise.
    """
    from legacy_gpu_patch.classify.classifier import Classifier, classify_stream
    from legacy_gpu_patch.console import console
    from legacy_gpu_patch.report.reports import Report, emit, render_text, write_reports, write_step_summary

    fmt = "json" if as_json else (fmt or "text")
    stream, source = _open(log)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    try:
        c = classify_stream(stream, Classifier(context_before=context, context_after=context))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    findings = c.findings()
    if baseline is not None:
        from legacy_gpu_patch.classify.baseline import baseline_keys, new_findings

        findings = new_findings(findings, baseline_keys(baseline))
    has_errors = any(f.is_error for f in findings)
    code = ExitCode.FINDINGS if has_errors else ExitCode.OK
    report = Report(
        kind="classify",
        source=source,
        findings=findings,
        status="findings" if has_errors else "clean",
        exit_code=int(code),
        **Report.counts(c),
        started=started,
        duration=time.monotonic() - t0,
    )
    out = sys.stdout
    if fmt == "text":
        render_text(report, console(), limit=limit)
    else:
        emit(report, fmt, out, console())
    if report_dir is not None:
        write_reports(report, report_dir)
    write_step_summary(report)
    if code != ExitCode.OK:
        # sys.exit, not click.exceptions.Exit: cli.main runs click with standalone_mode=False, which swallows
        # Exit and returns its code (that is dropped there).
        sys.exit(int(code))
