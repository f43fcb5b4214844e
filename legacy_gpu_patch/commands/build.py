"""`lgpatch build`: build a patched work tree, streaming and classifying errors as they happen."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from legacy_gpu_patch.report.formats import FORMATS

if TYPE_CHECKING:  # the build machinery is imported when the command runs: `lgpatch --help` stays fast
    from legacy_gpu_patch.build.run import BuildOptions, BuildOutcome, PlannedCommand


@click.command("build")
@click.option("--workdir", "-C", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The lgpatch work tree (or a folder inside it).")
@click.option("--arch", "archs", multiple=True, metavar="sm_XX[,sm_YY]",
              help="GPU architectures to build for (sm_86, sm_90+ptx, compute_75); default: the recipe's arch.")
@click.option("--cuda", metavar="X.Y", help="CUDA toolkit to build with; default: the recipe's cuda parameter.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Parallel jobs (MAX_JOBS); default min(cores, available RAM / 1.3 GiB).")
@click.option("--target", "targets", multiple=True, metavar="T", help="Build target (repeatable): ${targets}.")
@click.option("--launcher", type=click.Choice(["ccache", "sccache"]), default=None,
              help="Compiler launcher (CMAKE_*_COMPILER_LAUNCHER); sccache with a dist config = sccache-dist.")
@click.option("--cc", default=None, metavar="CC", help="Host C compiler (CC).")
@click.option("--cxx", default=None, metavar="CXX", help="Host C++ compiler (CXX, CUDAHOSTCXX, NVCC_CCBIN).")
@click.option("--python", "python", default=None, metavar="EXE", help="Interpreter for the build (${python}).")
@click.option("--log", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Build log file (default: REPORT_DIR/build.log).")
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where report.json, junit.xml and summary.md go (default: .git/lgpatch/build in the tree).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text",
              show_default=True, help="Report on stdout (json, junit, github) or a summary on stderr (text).")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--quiet", "-q", is_flag=True, help="Do not show the build output while it runs.")
@click.option("--dry-run", is_flag=True, help="Print the resolved commands and variables; run nothing.")
@click.option("--baseline", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="GREEN_LOG",
              help="Report only findings this passing build's log does not have.")
@click.option("--until-clean", is_flag=True,
              help="Interactive: when a known patchset not in the recipe fixes the error, offer to add it and rebuild.")
@click.pass_context
def command(ctx: click.Context, workdir: Path, archs: tuple[str, ...], cuda: str | None, jobs: int | None,
            targets: tuple[str, ...], launcher: str | None, cc: str | None, cxx: str | None, python: str | None,
            log: Path | None, report_dir: Path | None, fmt: str, as_json: bool, quiet: bool, dry_run: bool,
            baseline: Path | None = None, until_clean: bool = False) -> None:
    """Build the work tree with the recipe's build commands; classify errors live; write reports.

    Exit codes: 0 built, 9 a build command failed, 10 interrupted (Ctrl-C/SIGTERM; the report is still written).
    """
    if until_clean:
        from legacy_gpu_patch.authoring import until_clean as loop
        from legacy_gpu_patch.commands._common import search_path

        once = {**ctx.params, "until_clean": False}
        code = loop.run(workdir, search_path(ctx), report_dir, lambda: _exit_code(ctx, once))
        if code:
            raise click.exceptions.Exit(code)  # the last build's own status, already reported by it
        return
    from legacy_gpu_patch import console as ui
    from legacy_gpu_patch.build.options import BuildRequest, resolve_options
    from legacy_gpu_patch.build.run import plan_commands, run_build
    from legacy_gpu_patch.build.runner import make_display
    from legacy_gpu_patch.classify.classifier import Classifier
    from legacy_gpu_patch.commands._common import search_path
    from legacy_gpu_patch.ledger.worktree import WorkTree
    from legacy_gpu_patch.report.reports import emit, write_step_summary

    fmt = "json" if as_json else fmt
    con = ui.console()
    wt = WorkTree.open(workdir, shared=True)
    try:
        request = BuildRequest(archs=archs, cuda=cuda, jobs=jobs, targets=targets, launcher=launcher, python=python,
                               cc=cc, cxx=cxx, log=log, report_dir=report_dir)
        options = resolve_options(wt.root, wt.recipe(search_path(ctx)), dict(wt.state.params), request)
        for note in options.notes:
            ui.info(f"[cyan]build:[/] {note}")
        if dry_run:
            ui.emit_json(_dry_run_plan(options, plan_commands(options)))
            return
        known = None
        if baseline is not None:  # read first: a missing or unreadable baseline stops the command before it builds
            from legacy_gpu_patch.classify.baseline import baseline_keys

            known = baseline_keys(baseline)
        classifier = Classifier()
        display = make_display(con, classifier, quiet=quiet or ui.is_quiet() or fmt in ("json", "junit"))
        outcome = run_build(options, display=display, classifier=classifier)
    finally:
        wt.release_lock()
    report = outcome.report
    if known is not None:  # findings of the passing build's log are known: drop them, rewrite the reports
        from legacy_gpu_patch.classify.baseline import new_findings
        from legacy_gpu_patch.report.reports import write_reports

        report.findings = new_findings(report.findings, known)
        write_reports(report, options.report_dir)
    emit(report, fmt, sys.stdout, con)
    write_step_summary(report)
    ui.info(f"[dim]log: {options.log_path}  reports: {options.report_dir}[/]")
    _raise_for(outcome, options.report_dir)


def _dry_run_plan(options: BuildOptions, plan: list[PlannedCommand]) -> dict[str, Any]:
    return {
        "variables": options.variables.describe(),
        "env": options.lgpatch_env(),
        "commands": [{"name": c.name, "phase": c.phase, "argv": list(c.argv), "cwd": str(c.cwd),
                      "selected": c.selected, "reason": c.reason} for c in plan],
    }


def _exit_code(ctx: click.Context, params: dict[str, object]) -> int:
    """One plain build (as without --until-clean); its exit code instead of the process exit."""
    from legacy_gpu_patch.errors import LgpatchError

    try:
        ctx.invoke(command, **params)
    except LgpatchError as exc:  # shown here, since the loop goes on (cli.run shows the others)
        click.echo(exc.render(), err=True)
        return int(exc.exit_code)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    return 0


def _raise_for(outcome: BuildOutcome, report_dir: Path) -> None:
    """Exit codes 9 and 10 come from their error classes, mapped to codes by cli.run like every other error."""
    from legacy_gpu_patch.errors import BuildError, ExitCode, InterruptedBuild

    if outcome.exit_code == ExitCode.INTERRUPTED:
        raise InterruptedBuild(f"the report was written to {report_dir}",
                               hint="report.json and the build log there show how far it got")
    if outcome.exit_code == ExitCode.BUILD:
        what = f"{outcome.failed.name}: {outcome.failed.reason}" if outcome.failed else "a build command failed"
        raise BuildError(what, hint=f"{report_dir}/report.json has the classified findings, first root cause first")
