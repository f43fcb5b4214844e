"""`lgpatch new-recipe NAME (--git URL --ref TAG | --sdist NAME==VER)`: a recipe that pins its source and starts with
an empty patchset of its own, ready for `lgpatch apply` and the edit/refresh loop.

The pin is found with the engine's own source code: a git tag is fetched into the cache's bare mirror (so the first
apply needs no network) and resolved there; an sdist is looked up on the package index (PEP 691 JSON), downloaded
into the content-addressed cache and its sha256 written into the recipe.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from legacy_gpu_patch.authoring import yamledit
from legacy_gpu_patch.authoring.txn import write_atomic
from legacy_gpu_patch.config.recipe import NAME, SearchPath, load_recipe
from legacy_gpu_patch.errors import ConfigError, SourceError
from legacy_gpu_patch.gitutil import Git
from legacy_gpu_patch.source import cache, mirrors, sources

PYPI = "https://pypi.org/simple"


@dataclass(frozen=True)
class NewRecipe:
    recipe_file: Path
    patchset_dir: Path
    pin: str  # the commit or sha256 written into the recipe
    source_line: str


def resolve_tag(url: str, ref: str) -> str:
    """The commit `ref` (a tag, else a branch) of `url` names, fetched into the mirror cache."""
    mirror = cache.mirror_path(url)
    if not mirror.exists():
        mirrors.clone_mirror(url, mirror)
    store = Git(mirror)
    for refspec in (f"+refs/tags/{ref}:refs/tags/{ref}", f"+refs/heads/{ref}:refs/heads/{ref}"):
        try:
            mirrors.fetch_into(mirror, url, [refspec])  # the tag as upstream has it now, not as cached
        except SourceError:
            continue
        commit = store.rev(refspec.rsplit(":", 1)[1])
        if commit:
            return commit
    raise SourceError(f"{url} has no tag or branch {ref!r}", hint=f"`git ls-remote --tags {url}` lists its tags")


def sdist_pin(requirement: str, index: str) -> tuple[str, str, str]:
    """(name, version, sha256) of NAME==VERSION's sdist on the index; the file is downloaded into the cache."""
    m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)\s*", requirement)
    if m is None:
        raise ConfigError(f"--sdist {requirement!r}: expected NAME==VERSION (for example chainer==1.24.0)")
    name, version = m.group(1), m.group(2)
    page = sources.index_page(index, name)
    wanted = re.compile(rf"{re.escape(name)}-{re.escape(version)}\.(tar\.gz|zip|tar\.bz2)$", re.I)
    for entry in sources.index_files(page):
        filename = str(entry.get("filename", ""))
        sha = entry.get("hashes", {}).get("sha256")
        if wanted.search(filename.replace("_", "-")) and sha:
            cache.fetch_url(urllib.parse.urljoin(page, entry["url"]), sha, f"sdist {filename}")
            return name, version, sha
    raise SourceError(f"{page} has no sdist of {name} {version}",
                      hint="check the version (`pip download --no-binary :all: NAME==VER` shows what exists)")


def create(recipes_dir: Path, name: str, search: SearchPath, *, git: str | None = None, ref: str | None = None,
           sdist: str | None = None, index: str = PYPI) -> NewRecipe:
    if not re.fullmatch(NAME, name):
        raise ConfigError(f"recipe name {name!r}: use lowercase letters, digits, '.', '+', '_', '-'")
    recipe_file = recipes_dir / f"{name}.yaml"
    patchset_dir = recipes_dir / "patchsets" / name
    for existing in (recipe_file, patchset_dir / "patchset.yaml"):
        if existing.exists():
            raise ConfigError(f"{existing} already exists; new-recipe never overwrites a recipe",
                              hint="choose another NAME or edit the existing recipe")
    if git and ref:
        pin = resolve_tag(git, ref)
        source = f"source:\n  git: {{url: {json.dumps(git)}, ref: {json.dumps(ref)}, commit: {pin}}}\n"
        what = f"{git} {ref}"
    elif sdist:
        pkg, version, pin = sdist_pin(sdist, index)
        extra = f", index: {json.dumps(index)}" if index != PYPI else ""
        source = (f"source:\n  sdist: {{name: {json.dumps(pkg)}, version: {json.dumps(version)}, "
                  f"sha256: {pin}{extra}}}\n")
        what = f"{pkg} {version} (sdist)"
    else:
        raise ConfigError("new-recipe needs --git URL --ref TAG, or --sdist NAME==VERSION")
    text = (f"name: {name}\n"
            f"description: {yamledit.scalar(f'{what}, ported with lgpatch')}\n"
            f"{source}"
            "steps:\n"
            f"  - {name}   # the recipe's own patchset: `lgpatch refresh` adds steps to it\n")
    write_atomic(patchset_dir / "patchset.yaml",
                 yamledit.patchset_manifest(name, f"Hand edits of recipe {name}").encode())
    write_atomic(recipe_file, text.encode())
    try:
        recipe = load_recipe(recipe_file, search)  # what we wrote must load: a bug here must not reach apply
        if sdist:
            sources.sdist_file(recipe, offline=True)  # the engine's own lookup finds the pinned file in the cache
    except BaseException:
        recipe_file.unlink(missing_ok=True)
        (patchset_dir / "patchset.yaml").unlink(missing_ok=True)  # only what we wrote: the folder may hold more
        raise
    return NewRecipe(recipe_file, patchset_dir, pin, source.strip().splitlines()[-1].strip())
