"""`lgpatch --recipe-path DIR new-recipe NAME (--git URL --ref TAG | --sdist NAME==VER)`."""

from __future__ import annotations

import os
from pathlib import Path

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.commands._common import search_path
from legacy_gpu_patch.config.recipe import RECIPE_PATH_ENV
from legacy_gpu_patch.errors import ConfigError


@click.command("new-recipe")
@click.argument("name")
@click.option("--git", "git_url", metavar="URL", help="The upstream git repository (with --ref).")
@click.option("--ref", metavar="TAG", help="The tag (or branch) to pin; the recipe pins the commit it names now.")
@click.option("--sdist", metavar="NAME==VER", help="A source distribution on the package index instead of git.")
@click.option("--index", default="https://pypi.org/simple", show_default=True, metavar="URL",
              help="The package index for --sdist (PEP 691 JSON simple API).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result on stdout.")
@click.pass_context
def command(ctx: click.Context, name: str, git_url: str | None, ref: str | None, sdist: str | None, index: str,
            as_json: bool) -> None:
    """Write DIR/NAME.yaml (DIR: the first --recipe-path) pinning the source, and an empty DIR/patchsets/NAME."""
    from legacy_gpu_patch.authoring.new_recipe import create

    if bool(git_url) == bool(sdist) or bool(git_url) != bool(ref):
        raise click.UsageError("give either --git URL --ref TAG, or --sdist NAME==VER")
    given = (ctx.find_root().obj or {}).get("recipe_path", ())
    env = [p for p in os.environ.get(RECIPE_PATH_ENV, "").split(os.pathsep) if p]
    folders = list(given) or env
    if not folders:
        raise ConfigError("new-recipe needs a recipe folder to write to",
                          hint=f"lgpatch --recipe-path DIR new-recipe {name} … (or set {RECIPE_PATH_ENV})")
    made = create(Path(folders[0]), name, search_path(ctx), git=git_url, ref=ref, sdist=sdist, index=index)
    if as_json:
        console.emit_json({"recipe": name, "recipe_file": str(made.recipe_file), "patchset": str(made.patchset_dir),
                           "pin": made.pin})
        return
    click.echo(str(made.recipe_file))
    console.info(f"pinned {made.source_line}")
    console.info(f"empty patchset {made.patchset_dir}; next: `lgpatch --recipe-path {folders[0]} apply {name} "
                 f"-C WORKDIR`, then `lgpatch edit -C WORKDIR` and `lgpatch refresh -C WORKDIR`")
