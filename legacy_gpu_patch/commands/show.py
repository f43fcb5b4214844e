"""lgpatch show RECIPE: the resolved plan — which steps run for these parameters, and why."""

from __future__ import annotations

import dataclasses

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import collect_params, load, param_options
from legacy_gpu_patch.config.source_schema import GitSource
from legacy_gpu_patch.ledger.plan import make_plan, resolve_params


@click.command("show")
@click.argument("recipe")
@param_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.pass_context
def command(ctx: click.Context, recipe: str, cuda: str | None, arch: str | None, python_version: str | None,
            params: tuple[str, ...], as_json: bool) -> None:
    """Show the resolved plan of RECIPE for the given parameters."""
    r = load(ctx, recipe)
    values = resolve_params(r, collect_params(cuda, arch, python_version, params))
    plan = make_plan(r, values)
    if as_json:
        console.emit_json({
            "recipe": r.name,
            "path": str(r.path),
            "source": {"kind": r.source_kind, **dataclasses.asdict(r.source)},
            "parameters": values,
            "steps": [
                {"step": p.step.key, "kind": p.step.kind, "selected": p.selected, "reasons": list(p.reasons),
                 "digest": p.digest, "description": p.step.description}
                for p in plan
            ],
            "build": dataclasses.asdict(r.build) if r.build is not None else None,
            "notes": r.notes,
        })
        return
    out = console.console()
    out.print(f"[bold]{r.name}[/bold]  ({r.path})")
    out.print(r.description.strip())
    src = r.source
    where = f"{src.url} {src.ref} @ {src.commit[:12]}" if isinstance(src, GitSource) else (
        f"{src.name}=={src.version} sha256:{src.sha256[:12]}…")
    out.print(f"source: {r.source_kind} {where}")
    out.print("parameters: " + ", ".join(f"{k}={v}" for k, v in values.items()))
    for i, p in enumerate(plan, 1):
        mark = "[green]run [/green]" if p.selected else "[dim]skip[/dim]"
        why = f"  [dim]({'; '.join(p.reasons)})[/dim]" if p.reasons else ""
        out.print(f"{i:>3}. {mark} {p.step.key} [dim]{p.step.kind}[/dim]{why}")
    if r.notes:
        out.print(f"\nnotes: {r.notes.strip()}")
