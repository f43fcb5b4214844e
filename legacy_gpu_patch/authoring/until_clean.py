"""`lgpatch build --until-clean`: build; when the first classified error that a known patchset fixes names one the
recipe does not list yet, offer to add it, re-apply and build again; otherwise stop with the error and the
edit/refresh hint (the hand-porting loop: `lgpatch edit`, change files, `lgpatch refresh`).

Interactive only: it changes the recipe file on the user's say-so, which a CI job must never do by itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from legacy_gpu_patch import console
from legacy_gpu_patch.authoring import session, yamledit
from legacy_gpu_patch.authoring.placement import check_writable
from legacy_gpu_patch.authoring.txn import read_json, write_atomic
from legacy_gpu_patch.config.recipe import Recipe, SearchPath, load_recipe
from legacy_gpu_patch.errors import ConfigError
from legacy_gpu_patch.ledger.worktree import WorkTree


def require_tty() -> None:
    if not sys.stdin.isatty():
        raise click.UsageError("--until-clean is interactive (it asks before it changes the recipe) and stdin is "
                               "not a terminal; run plain `lgpatch build` in scripts and CI")


def addable_patchset(report: dict[str, Any], recipe: Recipe, search: SearchPath) -> tuple[str, dict[str, Any]] | None:
    """(patchset, finding): the first error finding whose patchset exists on the search path but is not in the
    recipe."""
    listed = {e.patchset.name for e in recipe.entries if e.patchset is not None}
    finder = search.for_recipe_file(recipe.path)
    for finding in report.get("findings", []):
        if finding.get("severity") != "error":
            continue
        for name in finding.get("patchset", []):
            if name not in listed and finder.find_patchset(name) is not None:
                return name, finding
    return None


def add_patchset(root: Path, recipe: Recipe, search: SearchPath, name: str) -> Recipe:
    """`- name` at the end of the recipe's steps (validated by loading it back), then the tree re-applied."""
    check_writable(recipe.path.parent, f"recipe {recipe.name}")
    old = recipe.path.read_bytes()
    text = yamledit.insert_item(recipe.path, old.decode("utf-8"), f"- {name}\n", None)
    write_atomic(recipe.path, text.encode())
    try:
        updated = load_recipe(recipe.path, search)
    except ConfigError:
        write_atomic(recipe.path, old)
        raise
    wt = WorkTree.open(root)
    try:
        session.reapply(wt, updated)
    finally:
        wt.release_lock()
    return updated


def run(root: Path, search: SearchPath, report_dir: Path | None, build_once: Callable[[], int]) -> int:
    from legacy_gpu_patch.build.run import default_report_dir

    require_tty()
    added: list[str] = []
    while True:
        code = build_once()
        if code == 0:
            console.info("[green]clean build[/green]" + (f" after adding {', '.join(added)}" if added else ""))
            return 0
        wt = WorkTree.open(root, lock=False, repair=False)
        recipe = session.tree_recipe(wt, search)
        report = read_json((report_dir or default_report_dir(wt.root)) / "report.json") or {}
        offer = addable_patchset(report, recipe, search)
        if offer is None or offer[0] in added:
            _stop_hint(wt.root, report)
            return code
        name, finding = offer
        where = f" ({finding.get('file')}:{finding.get('line')})" if finding.get("file") else ""
        console.info(f"[bold]{finding.get('category')}[/bold]: {finding.get('message')}{where}")
        if not click.confirm(f"patchset {name} fixes this and is not in recipe {recipe.name}; add it to "
                             f"{recipe.path} and rebuild?", default=True, err=True):
            _stop_hint(wt.root, report)
            return code
        add_patchset(wt.root, recipe, search, name)
        added.append(name)
        console.info(f"added patchset {name}; rebuilding")


def _stop_hint(root: Path, report: dict[str, Any]) -> None:
    errors = [f for f in report.get("findings", []) if f.get("severity") == "error"]
    if errors:
        first = errors[0]
        console.info(f"[red]stopped at:[/red] {first.get('category')}: {first.get('message')}")
    console.info(f"no known patchset to add; fix it by hand: `lgpatch edit -C {root}`, change the files, "
                 f"`lgpatch refresh -C {root}` (the message defaults to this error), then build again")
