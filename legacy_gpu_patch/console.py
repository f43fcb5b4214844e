"""Terminal output: human text on stderr (rich when it is a terminal), machine output on stdout.

rich is imported lazily: most commands print a handful of lines and start-up time matters for CI loops.
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from typing import Any

import click


@lru_cache(maxsize=1)
def console() -> Any:
    from rich.console import Console

    # stderr keeps stdout clean for --json; no_color when NO_COLOR is set (rich honours it too).
    return Console(stderr=True, highlight=False, soft_wrap=True)


def info(message: str) -> None:
    console().print(message)


def note(message: str) -> None:
    console().print(f"[cyan]note:[/cyan] {message}")


def warn(message: str) -> None:
    console().print(f"[yellow]warning:[/yellow] {message}")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        # GitHub shows these as annotations on the run; escape per the workflow-command rules.
        text = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        sys.stdout.write(f"::warning::{text}\n")


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def is_ci() -> bool:
    """CI mode (strict patching by default) when the conventional CI variable is set to a true-ish value."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
