"""lgpatch doctor: GPU, driver, toolkits, cuDNN, compilers — what can build and run here, and what to pass."""

from __future__ import annotations

from typing import Any

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import collect_params, param_options, search_path
from legacy_gpu_patch.errors import DoctorError

_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "error": "red"}
_STATUS = {"native": "[green]native[/green]", "sass-compatible": "[green]native (compatible cubin)[/green]",
           "ptx": "[yellow]PTX JIT[/yellow]", "impossible": "[red]cannot run[/red]"}


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report on stdout.")
@click.option("--recipe", "recipe_name", metavar="RECIPE",
              help="Check one recipe: exit 12 when this machine cannot build or run it.")
@param_options
@click.pass_context
def command(ctx: click.Context, as_json: bool, recipe_name: str | None, cuda: str | None, arch: str | None,
            python_version: str | None, params: tuple[str, ...]) -> None:
    """Check GPU, driver, toolkits and compilers; say what can build and run.

    Without a GPU it still checks the toolchain. With --recipe R (and --param k=v, --cuda, --arch) the exit code
    tells CI whether this machine can build and run that recipe.
    """
    from legacy_gpu_patch.cuda import doctor

    recipe = None
    values: dict[str, Any] = {}
    search = search_path(ctx)
    if recipe_name:
        from legacy_gpu_patch.config.recipe import find_recipe
        from legacy_gpu_patch.ledger.plan import resolve_params

        recipe = find_recipe(recipe_name, search)
        values = resolve_params(recipe, collect_params(cuda, arch, python_version, params))
    elif cuda or arch or python_version or params:
        raise click.UsageError("--cuda/--arch/--python/--param need --recipe")
    report = doctor.diagnose(recipe=recipe, recipe_params=values, search=search)
    if as_json:
        console.emit_json(report.to_json())
    else:
        _render(report)
    if recipe is not None and not report.recipe_ok:
        check = report.recipe_check or {}
        problems = list(check.get("problems") or [])
        raise DoctorError(
            f"this machine cannot build or run {recipe.name}" + (f": {problems[0]}" if problems else ""),
            hint=(f"{len(problems) - 1} more problem(s) above; " if len(problems) > 1 else "")
            + "`lgpatch doctor --recipe R --json` has every check",
        )


def _render(report: Any) -> None:
    """The human view on stdout: machine facts, the verdict per toolkit and GPU, findings, recipes, one recipe."""
    out = console.out()
    out.print(_machine_table(report))
    if report.plans:
        out.print(_verdict_table(report))
    findings = _findings_table(report)
    out.print(findings if findings.row_count else "[green]no problems found[/green]")
    if report.recipes:
        out.print(_recipes_table(report))
    elif report.recipes_note:
        out.print(f"[dim]{report.recipes_note}[/dim]")
    if report.recipe_check is not None:
        _print_recipe_check(out, report)
    out.print(f"[dim]doctor took {report.elapsed_s:.2f} s[/dim]")


def _titled_table(title: str, **kw: Any) -> Any:
    from rich.table import Table

    return Table(title=title, title_justify="left", title_style="bold", **kw)


def _machine_table(report: Any) -> Any:
    machine = _titled_table("this machine", box=None, show_header=False)
    machine.add_column(style="bold")
    machine.add_column()
    g = report.gpus
    if g.gpus:
        for gpu in g.gpus:
            how = "" if gpu.cc_source == "reported" else f" ({gpu.cc_source})"
            machine.add_row(f"GPU {gpu.index}", f"{gpu.name} — sm_{gpu.number}{how}, {gpu.memory_mib or '?'} MiB")
        machine.add_row("driver", f"{g.driver} (CUDA {g.driver_cuda or '?'}) via {g.source}")
    else:
        machine.add_row("GPU", f"[yellow]none[/yellow] ({g.error})")
    for n in report.nvccs:
        lim = report.host_limits.get(n.path, {})
        limit = f"; host gcc <= {lim['gcc_max']}" if lim.get("gcc_max") else ""
        machine.add_row("nvcc", f"{n.full_version or n.version or '?'} {n.path}{limit}"
                        + (f" [red]{n.error}[/red]" if n.error else ""))
    if not report.nvccs:
        machine.add_row("nvcc", "[yellow]none found[/yellow]")
    for c in report.cudnn:
        machine.add_row("cuDNN", f"{c['version']} ({c['header']})")
    for c in report.compilers:
        machine.add_row(c.name, f"{c.version or '?'} {c.path}")
    machine.add_row("cmake", f"{report.cmake.get('version') or 'not found'}")
    machine.add_row("python", f"{report.python['version']} ({report.python['executable']}), numpy "
                              f"{report.numpy or 'not installed'}")
    jit = report.jit
    machine.add_row("JIT cache", f"{jit.path} ({jit.path_source}), {_human(jit.used_bytes)} used, max "
                                 f"{_human(jit.maxsize_bytes) if jit.maxsize_bytes else 'driver default'}"
                                 + (" [red]disabled[/red]" if jit.disabled else ""))
    return machine


def _verdict_table(report: Any) -> Any:
    verdict = _titled_table("what runs where")
    for col in ("CUDA", "GPU", "verdict", "TORCH_CUDA_ARCH_LIST", "nvcc flags", "driver"):
        verdict.add_column(col)
    for _n, gpu, p in report.plans:
        drv = p.driver.status if p.driver else "?"
        drv_style = {"ok": "green", "minor-compat": "yellow", "refuse": "red"}.get(drv, "")
        verdict.add_row(p.toolkit, f"{gpu.index}: sm_{p.gpu}", _STATUS.get(p.status, p.status),
                        p.flags.torch_cuda_arch_list if p.flags else "-",
                        " ".join(p.flags.nvcc_gencode) if p.flags else "-",
                        f"[{drv_style}]{drv}[/{drv_style}]" if drv_style else drv)
    return verdict


def _findings_table(report: Any) -> Any:
    findings = _titled_table("findings", show_lines=False)
    for col in ("", "topic", "finding", "fix"):
        findings.add_column(col)
    for f in report.findings:
        if f.severity == "ok":
            continue
        s = _STYLE[f.severity]
        findings.add_row(f"[{s}]{f.severity}[/{s}]", f.topic, f.message, f.fix or "")
    return findings


def _recipes_table(report: Any) -> Any:
    rt = _titled_table("recipes")
    for col in ("recipe", "fits", "why"):
        rt.add_column(col)
    for r in report.recipes:
        why = "; ".join(r.get("runs_on") or []) if r["fits"] else "; ".join(r.get("reasons") or [])
        rt.add_row(r["name"], "[green]yes[/green]" if r["fits"] else "[red]no[/red]", why)
    return rt


def _print_recipe_check(out: Any, report: Any) -> None:
    rc = report.recipe_check
    head = f"recipe {rc['recipe']} ({', '.join(f'{k}={v}' for k, v in rc['params'].items())})"
    if rc["ok"] and not report.gpus.gpus:
        out.print(f"[green]{head}: this machine can build it[/green] (no GPU here: running it is not checked)")
    elif rc["ok"]:
        out.print(f"[green]{head}: this machine can build and run it[/green]")
    else:
        out.print(f"[red]{head}: this machine cannot build or run it[/red]")
    for p in rc["problems"]:
        out.print(f"  [red]✗[/red] {p}")
    for w in rc["warnings"]:
        out.print(f"  [yellow]![/yellow] {w}")


def _human(n: int | None) -> str:
    from legacy_gpu_patch.cuda.jit_cache import human

    return human(n)
