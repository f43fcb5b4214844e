"""lgpatch list: the recipes lgpatch knows (built-in and from --recipe-path)."""

from __future__ import annotations

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import search_path
from legacy_gpu_patch.config.recipe import all_recipes
from legacy_gpu_patch.errors import ConfigError


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> None:
    """List the known recipes.

    On a terminal a table; in a pipe or file one recipe per line, tab-separated: name, aliases, parameter
    defaults, first sentence of the description (no header, nothing cut).
    """
    problems: list[ConfigError] = []
    recipes = list(all_recipes(search_path(ctx), problems))
    if as_json:
        console.emit_json([
            {
                "name": r.name,
                "aliases": list(r.aliases),
                "description": r.description,
                "source": r.source_kind,
                "parameters": {n: {"type": p.kind, "default": p.default} for n, p in r.params.items()},
                "path": str(r.path),
            }
            for r in recipes
        ] + [{"error": p.message} for p in problems])
        if problems:
            raise problems[0]
        return
    rows = [[r.name, ", ".join(r.aliases), " ".join(f"{n}={p.default}" for n, p in r.params.items()),
             r.description.strip().split(". ")[0].split("\n")[0]] for r in recipes]
    if console.stdout_is_terminal():
        _table(rows)
    else:  # a pipe or file: one recipe per line, tab-separated, full names (`lgpatch list | cut -f1`)
        console.results(rows)
    for p in problems:
        console.warn(f"skipped an invalid recipe: {p.message}")
    if problems:
        raise problems[0]


def _table(rows: list[list[str]]) -> None:
    from rich.table import Table

    table = Table(box=None, show_header=True, header_style="bold")
    for col in ("recipe", "aliases", "parameters (defaults)", "description"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.result(table)
