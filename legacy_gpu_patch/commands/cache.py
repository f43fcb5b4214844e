"""lgpatch cache: the download and mirror cache (add files for offline machines, show where it is)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import search_path
from legacy_gpu_patch.config.recipe import all_recipes
from legacy_gpu_patch.errors import ConfigError, SourceError
from legacy_gpu_patch.source import cache as store


def expected_files(ctx: click.Context) -> dict[str, list[str]]:
    """sha256 → what the known recipes expect under it (sdists and url-patches)."""
    wanted: dict[str, list[str]] = {}
    for r in all_recipes(search_path(ctx)):
        if r.source_kind == "sdist":
            wanted.setdefault(r.source["sha256"], []).append(f"{r.name}: source sdist")
        for entry in r.entries:
            step_list = [entry.step] if entry.step else list(entry.patchset.steps if entry.patchset else ())
            for step in step_list:
                if step.kind == "url-patch":
                    wanted.setdefault(step.body["sha256"], []).append(f"{r.name}: {step.key} ({step.body['url']})")
    return wanted


@click.group("cache")
def command() -> None:
    """Manage the download and mirror cache."""


@command.command("add")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--any", "allow_any", is_flag=True, help="Accept files no known recipe expects.")
@click.pass_context
def add(ctx: click.Context, files: tuple[Path, ...], allow_any: bool) -> None:
    """Put FILES whose sha256 a recipe expects into the cache, so apply works offline."""
    wanted = expected_files(ctx)
    for f in files:
        digest = store.sha256_file(f)
        if digest not in wanted and not allow_any:
            raise SourceError(
                f"{f}: sha256 {digest} is not expected by any known recipe; nothing was added",
                hint="a wrong or modified file; compare with the recipe's sha256, or pass --any on purpose",
            )
        store.add_file(f, digest)
        console.info(f"added {f} as sha256:{digest[:12]}… — " + "; ".join(wanted.get(digest, ["(no recipe)"])))


@command.command("add-mirror")
@click.argument("url")
@click.argument("clone", type=click.Path(exists=True, file_okay=False, path_type=Path))
def add_mirror(url: str, clone: Path) -> None:
    """Use the local git CLONE as the cache's mirror of URL (a source or a submodule), for offline apply."""
    from legacy_gpu_patch.source.mirrors import add_mirror as add

    mirror = add(url, clone)
    console.info(f"{url} → {mirror}")


@command.command("path")
def path() -> None:
    """Print the cache folder (LGPATCH_CACHE overrides it)."""
    click.echo(str(store.cache_root()))


@command.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """What the known recipes expect and whether the cache has it."""
    rows: list[dict[str, Any]] = []
    for digest, users in expected_files(ctx).items():
        rows.append({"sha256": digest, "cached": store.download_path(digest).is_file(), "used_by": users})
    if as_json:
        console.emit_json(rows)
        return
    full = not console.stdout_is_terminal()  # in a pipe: the whole sha256, never cut
    for row in rows:
        mark = "[green]cached [/green]" if row["cached"] else "[yellow]missing[/yellow]"
        console.result(f"{mark} {row['sha256'] if full else row['sha256'][:16] + '…'}  {'; '.join(row['used_by'])}")
    if not rows:
        raise ConfigError("no known recipe expects any downloaded file")
