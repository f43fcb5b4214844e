"""lgpatch cache: the download and mirror cache (add files for offline machines, show where it is)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import search_path
from legacy_gpu_patch.config.patchset import UrlPatchBody
from legacy_gpu_patch.config.recipe import all_recipes
from legacy_gpu_patch.config.source_schema import SdistSource
from legacy_gpu_patch.errors import ConfigError, SourceError
from legacy_gpu_patch.source import cache as store


def expected_files(ctx: click.Context) -> dict[str, list[str]]:
    """sha256 → what the known recipes expect under it (sdists and url-patches)."""
    wanted: dict[str, list[str]] = {}
    for r in all_recipes(search_path(ctx)):
        if isinstance(r.source, SdistSource):
            wanted.setdefault(r.source.sha256, []).append(f"{r.name}: source sdist")
        for entry in r.entries:
            for step in entry.steps():
                if isinstance(step.body, UrlPatchBody):
                    wanted.setdefault(step.body.sha256, []).append(f"{r.name}: {step.key} ({step.body.url})")
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


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


@command.command("size")
@click.option("--json", "as_json", is_flag=True)
def size(as_json: bool) -> None:
    """How much the cache holds: downloads, mirrors and leftover temporaries."""
    from legacy_gpu_patch.source import cachegc

    found = cachegc.entries()
    totals = {kind: sum(e.size for e in found if e.kind == kind) for kind in ("download", "mirror", "temporary")}
    if as_json:
        console.emit_json({"root": str(store.cache_root()), "total": sum(totals.values()), **totals,
                           "entries": [{"kind": e.kind, "path": str(e.path), "size": e.size} for e in found]})
        return
    for e in found:
        click.echo(f"{_human(e.size):>10}  {e.kind:<9}  {e.label}")
    for kind, total in totals.items():
        count = sum(1 for e in found if e.kind == kind)
        click.echo(f"{_human(total):>10}  {kind}s ({count})")
    click.echo(f"{_human(sum(totals.values())):>10}  total in {store.cache_root()}")


@command.command("gc")
@click.option("--mirrors", is_flag=True, help="Also remove mirrors that no known recipe (or its submodules) uses.")
@click.option("--dry-run", "-n", is_flag=True, help="Only say what would be removed.")
@click.pass_context
def gc(ctx: click.Context, mirrors: bool, dry_run: bool) -> None:
    """Remove leftover temporaries and downloads no known recipe pins (with --mirrors: unused mirrors too)."""
    from legacy_gpu_patch.source import cachegc

    garbage = cachegc.collectable(list(all_recipes(search_path(ctx))), mirrors)
    for e in garbage:
        if not dry_run:
            cachegc.remove(e)
        click.echo(f"{'would remove' if dry_run else 'removed'} {e.kind} {e.label} ({_human(e.size)})")
    freed = sum(e.size for e in garbage)
    console.info(f"{'would free' if dry_run else 'freed'} {_human(freed)} in {len(garbage)} item(s)")


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
    for row in rows:
        mark = "[green]cached [/green]" if row["cached"] else "[yellow]missing[/yellow]"
        console.info(f"{mark} {row['sha256'][:16]}…  {'; '.join(row['used_by'])}")
    if not rows:
        raise ConfigError("no known recipe expects any downloaded file")
