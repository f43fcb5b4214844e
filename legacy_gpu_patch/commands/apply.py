"""lgpatch apply RECIPE: fetch the pinned source into a work tree and apply the recipe's steps, one commit each."""

from __future__ import annotations

from pathlib import Path

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import collect_params, load, param_options
from legacy_gpu_patch.ledger.engine import ApplyOptions, apply
from legacy_gpu_patch.ledger.plan import resolve_params


@click.command("apply")
@click.argument("recipe")
@param_options
@click.option("--workdir", "-C", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Work tree to create or update (default: ./<recipe name>).")
@click.option("--source", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A local clone or mirror to use instead of the recipe's git URL.")
@click.option("--strict/--no-strict", default=None,
              help="Treat offset/fuzz as errors (default: on when CI is set).")
@click.option("--stash", is_flag=True, help="Keep uncommitted edits in a git stash instead of refusing.")
@click.option("--offline", is_flag=True, help="Use only the cache; never touch the network.")
@click.option("--submodules/--no-submodules", default=None, help="Override the recipe's submodule setting.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary on stdout.")
@click.pass_context
def command(ctx: click.Context, recipe: str, cuda: str | None, arch: str | None, python_version: str | None,
            params: tuple[str, ...], workdir: Path | None, source: Path | None, strict: bool | None, stash: bool,
            offline: bool, submodules: bool | None, as_json: bool) -> None:
    """Apply RECIPE's steps to a work tree, creating it from the pinned source if needed."""
    r = load(ctx, recipe)
    values = resolve_params(r, collect_params(cuda, arch, python_version, params))
    opts = ApplyOptions(
        workdir=(workdir or Path(r.name)).absolute(),
        params=values,
        strict=console.is_ci() if strict is None else strict,
        stash=stash,
        source=source,
        offline=offline,
        submodules=submodules,
    )
    report = apply(r, opts)
    for n in report.notes:
        console.note(n)
    summary = (
        f"{r.name} in {opts.workdir}: {len(report.applied)} step(s) applied, {report.unchanged} unchanged, "
        f"{len(report.skipped)} skipped by conditions"
        + (f", rewound to {report.rewound_to}" if report.rewound_to else "")
        + (" (strict)" if opts.strict else "")
    )
    if not report.applied and not report.rewound_to and not report.created:
        summary += " — already up to date"
    console.info(summary)
    if r.notes and report.applied:
        console.info(f"[bold]notes:[/bold] {r.notes.strip()}")
    if as_json:
        console.emit_json({
            "recipe": r.name, "workdir": str(opts.workdir), "parameters": values, "created": report.created,
            "applied": report.applied, "unchanged": report.unchanged, "skipped": report.skipped,
            "rewound_to": report.rewound_to, "warnings": report.warnings, "notes": report.notes,
            "strict": opts.strict, "stashed": report.stashed,
        })
