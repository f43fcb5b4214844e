"""`lgpatch report merge DIR…`: merge many `lgpatch ci` jobs' reports into one summary (Markdown or JSON)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.group("report")
def command() -> None:
    """Work with CI reports."""


@command.command("merge")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
@click.option("--previous", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="The last run's JSON summary: each job is marked new, fixed, newly failing, still failing.")
@click.option("--write-json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the JSON summary here (the next run's --previous).")
def merge_command(dirs: tuple[Path, ...], fmt: str, previous: Path | None, write_json: Path | None) -> None:
    """Summarize the ci.json reports found under DIRs: status, wheel, first root cause, change since last run."""
    from legacy_gpu_patch.ci.merge import merge, to_markdown

    summary = merge(list(dirs), previous)
    text = json.dumps(summary, indent=2) + "\n"
    if write_json is not None:
        write_json.parent.mkdir(parents=True, exist_ok=True)
        write_json.write_text(text, encoding="utf-8")
    sys.stdout.write(text if fmt == "json" else to_markdown(summary))
