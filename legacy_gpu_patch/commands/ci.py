"""`lgpatch ci RECIPE --out DIR`: one CI job — apply (strict), build, repair and label the wheel, smoke-test it in a
fresh venv, write JSON/JUnit/Markdown reports (and GitHub annotations + step summary on GitHub Actions)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from legacy_gpu_patch.commands._common import collect_params, load, param_options


@click.command("ci")
@click.argument("recipe")
@param_options
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Job folder: work/ (the tree), wheels/, reports/ (ci.json, junit.xml, summary.md, build/).")
@click.option("--job", default=None, help="Job name in the reports (default: the matrix-style name).")
@click.option("--build-python", "build_python", default=None, metavar="EXE",
              help="Interpreter for the build (default: the one running lgpatch).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Parallel build jobs (MAX_JOBS).")
@click.option("--compiler-cache", type=click.Choice(["auto", "ccache", "sccache", "none"]), default="auto",
              show_default=True, help="auto: sccache if on PATH, else ccache, else none.")
@click.option("--auditwheel", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
              help="auto: auditwheel repair when it is installed (CUDA libraries excluded); on: required.")
@click.option("--smoke-code", default=None, metavar="PYTHON",
              help="Python code for the CPU smoke test, instead of the recipe's built-in one.")
@click.option("--smoke-only", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              metavar="WHEEL", help="Only smoke-test this built wheel (e.g. on a GPU runner); no apply or build.")
@click.option("--offline", is_flag=True, help="Use only the cache for the source.")
@click.option("--quiet", "-q", is_flag=True, help="Do not show the build's output while it runs.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: the ci report on stdout.")
@click.pass_context
def command(ctx: click.Context, recipe: str, cuda: str | None, arch: str | None, python_version: str | None,
            params: tuple[str, ...], out: Path, job: str | None, build_python: str | None, jobs: int | None,
            compiler_cache: str, auditwheel: str, smoke_code: str | None, smoke_only: Path | None, offline: bool,
            quiet: bool, fmt: str) -> None:
    """Run one CI job for RECIPE into --out; exit with the code of the failure class (docs/exit-codes.md)."""
    import os

    from legacy_gpu_patch import console
    from legacy_gpu_patch.ci import report as ci_report
    from legacy_gpu_patch.ci.job import JobOptions, python_mismatch, run_job
    from legacy_gpu_patch.ci.matrix import job_name
    from legacy_gpu_patch.ledger.plan import resolve_params

    r = load(ctx, recipe)
    given = collect_params(cuda, arch, python_version, params)
    values = resolve_params(r, given)
    name = job or job_name(r, values, [n for n in r.params if n in given])
    opts = JobOptions(r, recipe, values, out.absolute(), python=build_python, jobs=jobs,
                      compiler_cache=compiler_cache, auditwheel=auditwheel, smoke_code=smoke_code, offline=offline,
                      job=name, smoke_only=smoke_only, quiet=quiet or fmt == "json")
    mismatch = python_mismatch(values, build_python)
    result = run_job(opts)
    if mismatch:
        result.report.notes.append(mismatch)
        console.warn(mismatch)
    paths = ci_report.write(result.report, opts.reports)
    if os.environ.get("GITHUB_ACTIONS", "").lower() == "true":
        # the runner reads workflow commands from stdout and stderr; with --format json stdout is the report alone
        stream = sys.stderr if fmt == "json" else sys.stdout
        for line in ci_report.github_lines(result.report, result.build_annotations):
            stream.write(line + "\n")
    if fmt == "json":
        console.emit_json(result.report.to_dict())
    rep = result.report
    if rep.wheel:
        console.info(f"wheel: {rep.wheel['path']} ({rep.wheel['size']} bytes, sha256 {rep.wheel['sha256']})")
    console.info(f"{rep.job}: {rep.status}; reports: {paths['json']}, {paths['junit']}, {paths['markdown']}")
    if result.error is not None:
        raise result.error
