"""Options and helpers shared by several commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.config.recipe import Recipe, SearchPath, find_recipe
from legacy_gpu_patch.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def search_path(ctx: click.Context) -> SearchPath:
    obj = ctx.find_root().obj or {}
    search = SearchPath.from_options(obj.get("recipe_path", ()))
    if not obj.get("search_shown"):  # -v: once per command, however often a command asks
        obj["search_shown"] = True
        console.detail("recipes from " + ", ".join(map(str, search.recipe_dirs)))
        console.detail("patchsets from " + ", ".join(map(str, search.patchset_dirs)))
    return search


def load(ctx: click.Context, name: str) -> Recipe:
    return find_recipe(name, search_path(ctx))


def param_options(func: F) -> F:
    """--cuda, --arch, --python and --param k=v: the parameter values a user gives on the command line."""
    func = click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE",
                        help="Set a recipe parameter (repeatable).")(func)
    func = click.option("--python", "python_version", metavar="X.Y", help="Shorthand for --param python=X.Y.")(func)
    func = click.option("--arch", metavar="sm_XX[,sm_YY+ptx]",
                        help="Shorthand for --param arch=...: one target or a list (sm_80,sm_86,sm_90+ptx).")(func)
    func = click.option("--cuda", metavar="X.Y", help="Shorthand for --param cuda=X.Y.")(func)
    return func


def collect_params(cuda: str | None, arch: str | None, python_version: str | None,
                   params: tuple[str, ...]) -> dict[str, str]:
    given: dict[str, str] = {}
    for item in params:
        if "=" not in item:
            raise ConfigError(f"--param {item!r}: expected NAME=VALUE")
        key, _, value = item.partition("=")
        given[key.strip()] = value.strip()
    for key, shorthand in (("cuda", cuda), ("arch", arch), ("python", python_version)):
        if shorthand is not None:
            given[key] = shorthand
    return given


def workdir_option(default: str = ".") -> Callable[[F], F]:
    return click.option("--workdir", "-C", type=click.Path(file_okay=False, path_type=Path), default=default,
                        show_default=True, help="The lgpatch work tree (or a folder inside it).")
