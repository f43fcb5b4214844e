"""lgpatch jit-cache: inspect and configure the CUDA driver's PTX JIT cache (seed 2's slow start and its cure)."""

from __future__ import annotations

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.cuda import jit_cache as jc


@click.group("jit-cache")
def command() -> None:
    """Inspect and configure the CUDA driver's PTX JIT cache.

    Code built as PTX (a GPU newer than the toolkit) is JIT-compiled by the driver when it loads; the result is
    cached on disk. Disabled, too small or not persistent, that cache makes every start pay the compile again
    (tens of seconds for cuDNN-sized modules).
    """


@command.command("status")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
def status_cmd(as_json: bool) -> None:
    """Where the cache is, how full, how large it may grow, and what is wrong with it."""
    st = jc.status()
    if as_json:
        console.emit_json(st.to_json())
        return
    out = console.out()
    out.print(f"path        {st.path} ({st.path_source}{', ' + st.filesystem if st.filesystem else ''})")
    out.print(f"exists      {'yes' if st.exists else 'no (created at the first JIT)'}; "
              f"writable {'yes' if st.writable else '[red]no[/red]'}")
    out.print(f"used        {jc.human(st.used_bytes)} in {st.files} files")
    size = (f"{st.maxsize_bytes} ({jc.human(st.maxsize_bytes)}) from CUDA_CACHE_MAXSIZE" if st.maxsize_bytes
            else f"driver default ({jc.human(jc.DEFAULT_BYTES)} on current desktop/server drivers, "
                 f"{jc.human(jc.OLD_DEFAULT_BYTES)} on older or embedded ones)")
    out.print(f"max size    {size}; the driver's maximum is {jc.human(jc.MAX_BYTES)}")
    out.print(f"disabled    {'[red]yes[/red] (CUDA_CACHE_DISABLE)' if st.disabled else 'no'}")
    out.print(f"force JIT   {'[yellow]yes[/yellow] (CUDA_FORCE_PTX_JIT)' if st.force_ptx_jit else 'no'}")
    for p in st.problems:
        console.warn(p)
    if st.problems:
        out.print("fix: eval \"$(lgpatch jit-cache env)\"  (or add `lgpatch jit-cache env --format dotenv` to your "
                  "service's environment file)")
    else:
        out.print("[green]the JIT cache is enabled and usable[/green]")


@command.command("env")
@click.option("--format", "fmt", type=click.Choice(["shell", "dotenv"]), default="shell", show_default=True,
              help="shell: export lines for eval; dotenv: KEY=VALUE for systemd EnvironmentFile / docker --env-file.")
@click.option("--path", type=click.Path(file_okay=False), help="Cache folder (default: keep a usable one).")
def env_cmd(fmt: str, path: str | None) -> None:
    """Print settings that make the cache enabled, persistent and 4 GiB large.

    Use as: eval "$(lgpatch jit-cache env)"
    """
    click.echo(jc.render_env(jc.recommended_env(path=path), fmt), nl=False)


@command.command("warm", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--path", type=click.Path(file_okay=False), help="Cache folder (default: keep a usable one).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result on stdout.")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def warm_cmd(ctx: click.Context, path: str | None, as_json: bool, argv: tuple[str, ...]) -> None:
    """Run CMD with the cache settings so the first, slow JIT happens now (e.g. right after installing a wheel).

    Example: lgpatch jit-cache warm -- python -c "import chainer.cuda; chainer.cuda.cupy.zeros(1)"
    """
    result = jc.warm(list(argv), path=path)
    if as_json:
        console.emit_json(result.to_json())
    else:
        console.info(f"ran {' '.join(argv)} in {result.elapsed_s:.2f} s (exit status {result.returncode}); "
                     f"JIT cache {result.path}: {jc.human(result.bytes_before)} → {jc.human(result.bytes_after)} "
                     f"(+{jc.human(max(result.filled_bytes, 0))}, {result.files_after - result.files_before:+d} "
                     "files)")
        console.note("later starts with the same settings (eval \"$(lgpatch jit-cache env)\") reuse this cache")
    if result.returncode != 0:
        # Like `env CMD` or `time CMD`: the command's own status is passed on (docs/exit-codes.md), via cli.run.
        ctx.exit(result.returncode if 0 < result.returncode < 256 else 1)
