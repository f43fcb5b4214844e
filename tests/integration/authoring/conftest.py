"""Fixtures of the authoring tests: a small upstream C project in a real git repository, tagged v1.0, and a recipe
folder made for it by `lgpatch new-recipe`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import Runner, git, make_upstream, write_files

MAIN_C = "".join(f"int f{i}(void) {{ return {i}; }}\n" for i in range(12)) + "int main(void) { return f1(); }\n"
PROJECT = {
    "src/main.c": MAIN_C,
    "src/util.c": "#include \"api.h\"\nAPI_EXPORT int util(void) { return 0; }\n",
    "include/api.h": "#pragma once\n#define API_EXPORT\nAPI_EXPORT int util(void);\nAPI_EXPORT int other(void);\n",
    "README": "a small project\n",
}


@dataclass
class Project:
    up: Path
    recipes: Path
    wt: Path
    lg: Runner

    def __call__(self, *args: str | Path) -> tuple[int, str, str]:
        r = self.lg("--recipe-path", self.recipes, *args)
        return r.code, r.out, r.err

    def ok(self, *args: str | Path) -> str:
        code, out, err = self(*args)
        assert code == 0, f"lgpatch {' '.join(map(str, args))} exited {code}:\n{err}\n{out}"
        return out

    def tree(self) -> str:
        return git(self.wt, "rev-parse", "HEAD^{tree}")

    def edit_file(self, rel: str, old: str, new: str) -> None:
        path = self.wt / rel
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))


def tag_new_version(up: Path, files: dict[str, str | bytes], removed: tuple[str, ...] = (), tag: str = "v1.1") -> str:
    write_files(up, files)
    for rel in removed:
        git(up, "rm", "-q", rel)
    git(up, "add", "-A")
    git(up, "commit", "-qm", f"upstream {tag}")
    git(up, "tag", tag)
    return git(up, "rev-parse", "HEAD")


@pytest.fixture
def project(tmp_path: Path, lgpatch: Runner) -> Project:
    up = make_upstream(tmp_path / "up", dict(PROJECT))
    p = Project(up.path, tmp_path / "recipes", tmp_path / "wt", lgpatch)
    p.ok("new-recipe", "demo", "--git", up.url(), "--ref", "v1.0")
    p.ok("apply", "demo", "-C", p.wt)
    return p
