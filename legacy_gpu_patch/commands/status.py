"""lgpatch status: recipe, parameters, applied/pending/skipped steps, and whether the tree has user edits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import search_path, workdir_option
from legacy_gpu_patch.config.recipe import find_recipe
from legacy_gpu_patch.errors import LgpatchError
from legacy_gpu_patch.ledger import recovery
from legacy_gpu_patch.ledger.plan import make_plan
from legacy_gpu_patch.ledger.worktree import WorkTree


def step_table(wt: WorkTree, ctx: click.Context) -> tuple[list[dict[str, Any]], str | None]:
    """Each planned step with its state.

    applied: in the tree and up to date; changed: its inputs differ from the applied commit; reapply: unchanged but
    after a changed step; pending: not applied yet; skipped: its `when:` is false; stale: applied but no longer planned.
    """
    ledger = wt.ledger()
    try:
        recipe = find_recipe(wt.state.recipe_file, search_path(ctx))
        plan = make_plan(recipe, wt.state.params)
    except LgpatchError as exc:  # the recipe moved or broke: still show what git knows
        return [{"step": a.key, "state": "applied", "commit": a.commit} for a in ledger.applied], exc.message
    rows: list[dict[str, Any]] = []
    applied = list(ledger.applied)
    selected_index = 0
    in_sync = True
    for p in plan:
        row: dict[str, Any] = {"step": p.step.key, "kind": p.step.kind, "reasons": list(p.reasons)}
        if not p.selected:
            row["state"] = "skipped"
        else:
            have = applied[selected_index] if selected_index < len(applied) else None
            same = have is not None and have.key == p.step.key and have.digest == p.digest
            if same and in_sync:
                row.update(state="applied", commit=have.commit)
            elif same:
                row["state"] = "reapply"  # unchanged itself, but an earlier step changed: it goes again
            else:
                in_sync = False
                row["state"] = "changed" if have else "pending"
            selected_index += 1
        rows.append(row)
    for extra in applied[selected_index:]:
        rows.append({"step": extra.key, "state": "stale", "commit": extra.commit})
    return rows, None


@click.command("status")
@workdir_option()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.pass_context
def command(ctx: click.Context, workdir: Path, as_json: bool) -> None:
    """Show what is applied in the work tree and whether it has uncommitted edits."""
    wt = WorkTree.open(workdir, shared=True)
    try:
        rows, problem = step_table(wt, ctx)
        dirty = wt.dirty_paths()
        ledger = wt.ledger()
        head = wt.describe_head()
        kept = recovery.rescued(wt.git)
    finally:
        wt.release_lock()
    if as_json:
        console.emit_json({
            "workdir": str(wt.root), "recipe": wt.state.recipe, "recipe_file": wt.state.recipe_file,
            "parameters": wt.state.params, "source": wt.state.source, "baseline": wt.baseline, "head": head,
            "steps": rows, "dirty": dirty, "foreign_commits": list(ledger.foreign), "problem": problem,
            "rescued": [{"ref": k.ref, "commit": k.commit, "subject": k.subject, "date": k.date} for k in kept],
        })
        return
    out = console.console()
    out.print(f"[bold]{wt.state.recipe}[/bold] in {wt.root}")
    out.print("parameters: " + ", ".join(f"{k}={v}" for k, v in wt.state.params.items()))
    out.print(f"source: {wt.state.source}")
    out.print(f"at: {head}")
    marks = {"applied": "[green]✓[/green]", "pending": "[yellow]·[/yellow]", "changed": "[yellow]~[/yellow]",
             "skipped": "[dim]-[/dim]", "stale": "[red]![/red]", "reapply": "[yellow]↻[/yellow]"}
    for row in rows:
        why = f" [dim]({'; '.join(row.get('reasons', []))})[/dim]" if row["state"] == "skipped" else ""
        out.print(f"  {marks[row['state']]} {row['state']:<8} {row['step']}{why}")
    if problem:
        console.warn(f"cannot compare with the recipe: {problem}")
    if ledger.foreign:
        console.warn(f"{len(ledger.foreign)} commit(s) on top not made by lgpatch")
    for k in kept:
        out.print(f"[yellow]rescued:[/yellow] {k.ref} ({k.date}): {k.subject}")
    if kept:
        console.note("rescued partial changes: `git show REF` shows one, `git cherry-pick --no-commit REF` brings "
                     "it back, `git update-ref -d REF` drops it")
    if dirty:
        out.print(f"[yellow]dirty:[/yellow] {len(dirty)} uncommitted path(s): " + ", ".join(dirty[:5])
                  + (" …" if len(dirty) > 5 else ""))
    else:
        out.print("clean: no uncommitted edits")
