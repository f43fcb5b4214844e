"""Terminal output, the way git and pip do it: results on stdout, progress, notes and diagnostics on stderr.

- `result()`, `results()` and `emit_json()` write what the user asked for to stdout (`lgpatch list | grep` works);
- `info()` and `note()` are progress and notes on stderr, hidden by `-q`; `detail()` is shown only with `-v`;
- `warn()` is always shown (stderr); errors are printed by `cli.run`, the one exit path.

When stdout is not a terminal, results are never cut to a width: rich tables get all the room they need, and
commands with a table (`list`) print plain tab-separated rows instead.

rich is imported lazily: most commands print a handful of lines and start-up time matters for CI loops.
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from typing import Any

import click

QUIET, NORMAL, VERBOSE = -1, 0, 1
# Results piped to a file or another program: wide enough that no table column is ever cut.
UNLIMITED_WIDTH = 10_000


class ClosedOutput(Exception):
    """The reader of stdout (or stderr) went away, e.g. `lgpatch list | head -1`: cli.run ends quietly with 0.

    Not an OSError on purpose: click turns an EPIPE OSError into exit status 1 on its own.
    """


_verbosity = NORMAL


def set_verbosity(level: int) -> None:
    """Set once per command line by cli.run / the `-q`/`-v` options."""
    global _verbosity
    _verbosity = level


def is_quiet() -> bool:
    return _verbosity <= QUIET


def is_verbose() -> bool:
    return _verbosity >= VERBOSE


def _rich_console(stderr: bool) -> Any:
    from rich.console import Console

    class PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich's default exits with status 1 from inside print(); cli.run decides (quietly, 0).
            self.quiet = True
            raise ClosedOutput()

    return PipeAwareConsole(stderr=stderr, highlight=False, soft_wrap=True)


@lru_cache(maxsize=1)
def console() -> Any:
    """The stderr console: progress, notes, warnings, live build output (NO_COLOR is honoured by rich)."""
    return _rich_console(stderr=True)


@lru_cache(maxsize=1)
def _stdout_console() -> Any:
    return _rich_console(stderr=False)


def out() -> Any:
    """The stdout console for results. Not a terminal: no colours and no width limit (nothing is truncated)."""
    con = _stdout_console()
    # rich reads the stream and its width each time; a fixed width would cut tables in a pipe at 80 columns.
    con.width = None if con.is_terminal else UNLIMITED_WIDTH
    return con


def stdout_is_terminal() -> bool:
    return bool(out().is_terminal)


def result(message: Any) -> None:
    """A result line or rich renderable (table) on stdout."""
    out().print(message)


def results(rows: list[list[str]]) -> None:
    """Plain tab-separated rows on stdout, for scripts (`cut -f1`, `grep`); tabs and newlines in cells are spaces."""
    for row in rows:
        click.echo("\t".join(" ".join(cell.split()) for cell in row))


def info(message: str) -> None:
    if not is_quiet():
        console().print(message)


def note(message: str) -> None:
    if not is_quiet():
        console().print(f"[cyan]note:[/cyan] {message}")


def detail(message: str) -> None:
    """Only with -v: what lgpatch looked at and how long it took."""
    if is_verbose():
        console().print(f"[dim]lgpatch: {message}[/dim]")


def warn(message: str) -> None:
    console().print(f"[yellow]warning:[/yellow] {message}")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        # GitHub shows these as annotations on the run; escape per the workflow-command rules. stderr: the runner
        # reads workflow commands from both streams, and stdout stays for results (`--json | jq` keeps working).
        text = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        sys.stderr.write(f"::warning::{text}\n")


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def is_ci() -> bool:
    """CI mode (strict patching by default) when the conventional CI variable is set to a true-ish value."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
