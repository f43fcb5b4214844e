"""`lgpatch classify LOG|-`: the build classifier on a log from anywhere (CI, a colleague, an old build)."""

from __future__ import annotations

import datetime as _dt
import gzip
import io
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO, cast

import click

from legacy_gpu_patch.report.formats import FORMATS

GZIP_MAGIC = b"\x1f\x8b"  # CI systems hand out gzipped logs


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were already read (to look for the gzip magic): they are read again first.

    Needed because a FIFO or `<(cmd)` can be opened only once and cannot be rewound."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        super().__init__()
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._head:
            data = self._rest.read(len(buffer))
        else:
            data, self._head = self._head[: len(buffer)], self._head[len(buffer):]
        buffer[: len(data)] = data
        return len(data)


def _open(log: str) -> tuple[BinaryIO, str, BinaryIO | None]:
    """Open LOG once and stream it: a file, a FIFO, `<(cmd)` (/dev/fd/N) or '-' for stdin; gzip is detected.

    Returns the stream to read, the name to report and the file to close afterwards (None for stdin)."""
    if log == "-":
        return sys.stdin.buffer, "-", None
    path = Path(log)
    try:  # no is_file() check first: a FIFO or /dev/fd/N is not a regular file and is read all the same
        raw = open(path, "rb")  # noqa: SIM115 - closed by the caller once the log is read
    except IsADirectoryError:
        raise click.BadParameter(f"{log}: is a directory, not a log file", param_hint="LOG") from None
    except FileNotFoundError:
        raise click.BadParameter(f"{log}: no such file", param_hint="LOG") from None
    except OSError as exc:
        raise click.BadParameter(f"{log}: {exc.strerror or exc}", param_hint="LOG") from None
    head = b""
    while len(head) < len(GZIP_MAGIC):  # a pipe may deliver one byte at a time
        chunk = raw.read(len(GZIP_MAGIC) - len(head))
        if not chunk:
            break
        head += chunk
    if raw.seekable():  # a regular file: read from its start again, no wrapper (no extra copy of each chunk)
        raw.seek(0)
        stream: BinaryIO = raw
    else:
        stream = io.BufferedReader(_Prefixed(head, raw))
    if head == GZIP_MAGIC:
        return cast(BinaryIO, gzip.GzipFile(fileobj=stream, mode="rb")), str(path), raw
    return stream, str(path), raw


@click.command("classify")
@click.argument("log", metavar="LOG|-")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="text (summary), json, junit (XML) or github (workflow annotations), on stdout.")
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

    LOG may be a file (gzipped too), a FIFO, a process substitution such as <(ssh ci cat build.log), or - for
    stdin. Exit code 11 when error findings exist, 0 otherwise.
    """
    from legacy_gpu_patch import console
    from legacy_gpu_patch.classify.classifier import Classifier, classify_stream
    from legacy_gpu_patch.errors import ExitCode, FindingsError
    from legacy_gpu_patch.report.reports import LogReport, emit, render_text, write_reports, write_step_summary

    fmt = "json" if as_json else (fmt or "text")
    stream, source, opened = _open(log)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    try:
        # a plain file (not gzip, not a pipe) is searched for triggers by one grep reading it (grepfile.py)
        plain_file = opened if opened is not None and not isinstance(stream, gzip.GzipFile) else None
        c = classify_stream(stream, Classifier(context_before=context, context_after=context), file=plain_file)
    finally:
        if opened is not None:
            opened.close()
    console.detail(f"read {c.lines} lines ({c.bytes} bytes) of {source} in {time.monotonic() - t0:.2f} s")
    findings = c.findings()
    if baseline is not None:
        from legacy_gpu_patch.classify.baseline import baseline_keys, new_findings

        findings = new_findings(findings, baseline_keys(baseline))
    errors = [f for f in findings if f.is_error]
    has_errors = bool(errors)
    code = ExitCode.FINDINGS if has_errors else ExitCode.OK
    report = LogReport(
        kind="classify",
        source=source,
        findings=findings,
        status="findings" if has_errors else "clean",
        exit_code=int(code),
        **LogReport.counts(c),
        started=started,
        duration=time.monotonic() - t0,
    )
    if fmt == "text":  # the summary is the result here: stdout
        render_text(report, console.out(), limit=limit)
    else:
        # rich (~40 modules, a tenth of a quick run's start-up) only where a summary is shown: --format github
        emit(report, fmt, sys.stdout, console.console() if fmt == "github" else None)
    if report_dir is not None:
        write_reports(report, report_dir)
    write_step_summary(report)
    if errors:
        raise FindingsError(f"{len(errors)} error finding(s) in {source}",
                            hint="the first root cause is listed first; --json has every occurrence")
