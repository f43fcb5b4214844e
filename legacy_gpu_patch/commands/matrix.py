"""`lgpatch matrix RECIPE…`: a CI job matrix (JSON for `strategy.matrix: ${{ fromJSON(...) }}`), pruned by what the
CUDA knowledge says cannot work, each exclusion with its reason."""

from __future__ import annotations

import json
import os
import sys

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import load


@click.command("matrix")
@click.argument("recipes", nargs=-1, required=True)
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=V1[,V2…]",
              help="Values of a parameter to sweep (repeatable); parameters not given keep the recipe's default.")
@click.option("--format", "fmt", type=click.Choice(["json", "github"]), default="json", show_default=True,
              help="json: {include, excluded} on stdout; github: matrix=…, excluded=…, count=… lines for "
                   "$GITHUB_OUTPUT (appended to it when set, and printed; the exclusions also go to "
                   "$GITHUB_STEP_SUMMARY when set).")
@click.pass_context
def command(ctx: click.Context, recipes: tuple[str, ...], params: tuple[str, ...], fmt: str) -> None:
    """Expand RECIPEs × parameter values into a job matrix; combinations that cannot build are excluded."""
    from legacy_gpu_patch.ci.matrix import GITHUB_MATRIX_LIMIT, expand, parse_sweeps

    sweeps = parse_sweeps(params)
    matrix = expand([(name, load(ctx, name)) for name in recipes], sweeps)
    for ex in matrix.excluded:
        console.note(f"excluded {ex['job']}: {ex['reason']}")
    console.info(f"{len(matrix.include)} job(s), {len(matrix.excluded)} excluded")
    if len(matrix.include) > GITHUB_MATRIX_LIMIT:
        console.warn(f"{len(matrix.include)} jobs: GitHub Actions runs at most {GITHUB_MATRIX_LIMIT} per matrix")
    if fmt == "json":
        console.emit_json(matrix.to_dict())
        return
    lines = [
        "matrix=" + json.dumps(matrix.github_matrix(), separators=(",", ":")),
        "excluded=" + json.dumps(list(matrix.excluded), separators=(",", ":")),
        f"count={len(matrix.include)}",
    ]
    text = "".join(line + "\n" for line in lines)
    out = os.environ.get("GITHUB_OUTPUT")
    if out:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and matrix.excluded:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(excluded_markdown(matrix.excluded))
    sys.stdout.write(text)


def excluded_markdown(excluded: tuple[dict[str, object], ...]) -> str:
    rows = [f"- `{e['job']}`: {e['reason']}" for e in excluded]
    return "\n".join([f"### lgpatch matrix: {len(excluded)} combination(s) excluded", "", *rows]) + "\n"
