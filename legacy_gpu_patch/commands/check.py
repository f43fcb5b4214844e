"""`lgpatch check RECIPE --ref OTHER_TAG [--source PATH | --commit X] [--json]`."""

from __future__ import annotations

from pathlib import Path

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import collect_params, load, param_options
from legacy_gpu_patch.errors import PatchError


@click.command("check")
@click.argument("recipe")
@click.option("--ref", required=True, metavar="OTHER_TAG", help="The other upstream version (a tag or branch).")
@click.option("--source", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A local clone or mirror holding both versions (default: the recipe's URL via the cache).")
@click.option("--commit", metavar="X", default=None,
              help="The commit OTHER_TAG must name (or the commit to check when it is no ref).")
@param_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report on stdout.")
@click.pass_context
def command(ctx: click.Context, recipe: str, ref: str, source: Path | None, commit: str | None, cuda: str | None,
            arch: str | None, python_version: str | None, params: tuple[str, ...], as_json: bool) -> None:
    """Apply RECIPE's series to another upstream version in a scratch tree; report each step.

    Status per step: exact, offset, fuzz, fails (file missing, hunk not found, …) or skipped; regex steps also show
    their matches at the recipe's pin ("then") and at OTHER_TAG ("now"). Exit code 5 when a step fails.
    """
    from legacy_gpu_patch.authoring.check import check
    from legacy_gpu_patch.ledger.plan import resolve_params

    r = load(ctx, recipe)
    values = resolve_params(r, collect_params(cuda, arch, python_version, params))
    report = check(r, values, ref, source, commit)
    if as_json:
        console.emit_json(report.to_dict())
    else:
        _print(report)
    if report.failed:
        raise PatchError(f"{len(report.failed)} of {len(report.steps)} step(s) of {r.name} do not apply to {ref}: "
                         + ", ".join(s.step for s in report.failed),
                         hint=f"to port: pin the recipe to {ref}, `lgpatch apply` it into a new work tree, then for "
                         "each failing step `lgpatch edit STEP`, make its change by hand, `lgpatch refresh`")


def _print(report: object) -> None:
    from legacy_gpu_patch.authoring.check import CheckReport

    assert isinstance(report, CheckReport)
    for note in report.notes:
        console.note(note)
    click.echo(f"{report.recipe}: series pinned at {report.pinned[:report.pinned.index('@') + 14]}, "
               f"checked against {report.other} ({report.other_commit[:12]})")
    width = max((len(s.step) for s in report.steps), default=10)
    for s in report.steps:
        extra = ""
        if s.kind == "regex" and s.status != "skipped":
            extra = f"  matches: {s.matches_then} then, {s.matches_now} now"
            if s.matches_then != s.matches_now:
                extra += " (changed)"
        if s.status_then not in (None, "exact", s.status):
            extra += f"  (at the pin: {s.status_then})"
        click.echo(f"  {s.status:<8} {s.step:<{width}}  {s.kind:<9} {s.detail}{extra}")
    counts = report.to_dict()["summary"]
    click.echo(f"{len(report.steps) - counts['fails'] - counts['skipped']} of {len(report.steps)} step(s) apply "
               f"({counts['exact']} exact, {counts['offset']} offset, {counts['fuzz']} fuzz), "
               f"{counts['fails']} fail, {counts['skipped']} skipped")
