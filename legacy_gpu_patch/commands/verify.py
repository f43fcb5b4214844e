"""`lgpatch verify`: run the recipe's compile probes in the patched tree and in a pristine checkout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from legacy_gpu_patch.commands._common import search_path, workdir_option
from legacy_gpu_patch.errors import ConfigError, VerifyError

if TYPE_CHECKING:
    from legacy_gpu_patch.build import verify

_STYLE = {"ok": "green", "wrong": "bold red", "skipped": "yellow", "not-standalone": "cyan",
          "not-applicable": "dim"}


def _split_archs(values: tuple[str, ...]) -> list[str]:
    from legacy_gpu_patch.config import conditions

    archs: list[str] = []
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            try:
                conditions.arch_number(item)
            except ValueError as exc:
                raise ConfigError(f"--arch: {exc}") from None
            archs.append(item)
    return list(dict.fromkeys(archs))


@click.command("verify")
@workdir_option()
@click.option("--arch", "arch_opts", multiple=True, metavar="sm_XX[,sm_YY]",
              help="GPU architectures to compile CUDA probes for (default: the work tree's arch parameter).")
@click.option("--probe", "only", multiple=True, metavar="NAME", help="Run only this probe (repeatable).")
@click.option("--cuda-include", "cuda_includes", multiple=True, type=click.Path(file_okay=False),
              help="Extra include folder for toolkit libraries (cuSPARSE, cuBLAS, ...); repeatable. "
                   "Also LGPATCH_CUDA_INCLUDE; the nvidia-* wheels' include folders are found by themselves.")
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the scratch folder (generated headers, probe sources) under this folder.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report on stdout.")
@click.pass_context
def command(ctx: click.Context, workdir: Path, arch_opts: tuple[str, ...], only: tuple[str, ...],
            cuda_includes: tuple[str, ...], keep: Path | None, as_json: bool) -> None:
    """Compile each probe of the recipe's `verify:` section with the real nvcc / C++ compiler, in the patched
    tree and in a pristine checkout of its baseline. A probe passes when the patched file compiles and the
    pristine one does what the recipe declares (fails with the expected error, or compiles). Probes that cannot
    compile standalone are listed with their reason. Exit code 13 when any probe gives the wrong answer."""
    from legacy_gpu_patch.build import verify
    from legacy_gpu_patch.ledger.worktree import WorkTree

    wt = WorkTree.open(workdir, shared=True)
    try:
        recipe = wt.recipe(search_path(ctx))
        params = dict(wt.state.params)
        # an arch parameter may hold a list (a multi-architecture tree): each of its targets is probed
        archs = _split_archs(arch_opts) or (_split_archs((str(params["arch"]),)) if params.get("arch") else ["sm_90"])
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
        toolchain = verify.find_toolchain(cuda_includes)
        report = verify.run_probes(wt.root, wt.baseline, recipe.name, list(recipe.verify), params,
                                   recipe.param_kinds(), archs, toolchain, only=only, keep=keep)
    finally:
        wt.release_lock()
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    _show(report, to_stdout=not as_json)  # with --json, stdout holds the JSON alone
    if not report.results:
        from legacy_gpu_patch import console

        console.console().print(f"[yellow]recipe {recipe.name} has no compile probes (verify: section)[/]")
    if report.wrong:
        names = ", ".join(f"{r.probe}" + (f"@{r.arch}" if r.arch else "") for r in report.wrong)
        raise VerifyError(f"{len(report.wrong)} probe(s) gave the wrong answer: {names}",
                          hint="each line above says which tree did what; --json has the compiler commands")


def _show(report: verify.VerifyReport, to_stdout: bool) -> None:
    from rich.table import Table

    from legacy_gpu_patch import console

    table = Table(title=f"compile probes: {report.recipe}  ({', '.join(report.archs)})", show_lines=False)
    table.add_column("probe")
    table.add_column("arch")
    table.add_column("verdict")
    table.add_column("what happened", overflow="fold")
    for r in report.results:
        detail = r.reason
        if r.pristine is not None and not r.pristine.ok and r.pristine.first_error:
            detail += f"\npristine: {r.pristine.first_error}"
        table.add_row(r.probe, r.arch or "host", f"[{_STYLE.get(r.verdict, '')}]{r.verdict}[/]", detail)
    (console.out() if to_stdout else console.console()).print(table)
