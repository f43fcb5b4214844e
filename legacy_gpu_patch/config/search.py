"""Where recipes and patchsets are looked up: user folders first (they may override the built-in ones)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from legacy_gpu_patch.config.resources import builtin_patchsets_dir, builtin_recipes_dir

RECIPE_PATH_ENV = "LGPATCH_RECIPE_PATH"
PATCHSET_PATH_ENV = "LGPATCH_PATCHSET_PATH"


@dataclass(frozen=True)
class SearchPath:
    """Where recipes and patchsets are looked up, user folders first (they may override built-ins)."""

    recipe_dirs: tuple[Path, ...]
    patchset_dirs: tuple[Path, ...]

    @classmethod
    def from_options(cls, extra_recipe_dirs: Sequence[str | Path] = ()) -> SearchPath:
        user: list[Path] = [Path(p) for p in extra_recipe_dirs]
        env = os.environ.get(RECIPE_PATH_ENV, "")
        user += [Path(p) for p in env.split(os.pathsep) if p]
        recipe_dirs = [*user, builtin_recipes_dir()]
        patchset_dirs: list[Path] = []
        env_ps = os.environ.get(PATCHSET_PATH_ENV, "")
        patchset_dirs += [Path(p) for p in env_ps.split(os.pathsep) if p]
        for d in user:
            patchset_dirs += [d / "patchsets", d.parent / "patchsets"]
        patchset_dirs.append(builtin_patchsets_dir())
        return cls(tuple(recipe_dirs), tuple(patchset_dirs))

    def for_recipe_file(self, path: Path) -> SearchPath:
        """A recipe given by path finds the patchsets beside it first (its folder's patchsets/ or ../patchsets/)."""
        here = path.resolve().parent
        extra = tuple(d for d in (here / "patchsets", here.parent / "patchsets") if d not in self.patchset_dirs)
        return SearchPath(self.recipe_dirs, extra + self.patchset_dirs)

    def recipe_files(self) -> list[Path]:
        seen: set[str] = set()
        files = []
        for d in self.recipe_dirs:
            if not d.is_dir():
                continue
            for f in sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml")):
                if f.stem not in seen:
                    seen.add(f.stem)
                    files.append(f)
        return files

    def find_patchset(self, name: str) -> Path | None:
        for d in self.patchset_dirs:
            candidate = d / name
            if (candidate / "patchset.yaml").is_file():
                return candidate
        return None

    def patchset_names(self) -> list[str]:
        names: set[str] = set()
        for d in self.patchset_dirs:
            if d.is_dir():
                names.update(p.parent.name for p in d.glob("*/patchset.yaml"))
        return sorted(names)
