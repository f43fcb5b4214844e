"""safepath and treewrite on real folders with real symlinks: every parent is resolved, and a real path outside
the tree or inside any .git folder is refused before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from legacy_gpu_patch.errors import UnsafePathError
from legacy_gpu_patch.ledger import treewrite
from legacy_gpu_patch.safepath import check_link_target, real_relpath, resolve_inside


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "wt"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "sub" / ".git").mkdir(parents=True)  # a nested repository
    (root / "src").mkdir()
    (tmp_path / "outside").mkdir()
    links = {"gitlink": ".git", "up": "..", "c1": "c2", "c2": "gitlink", "nested": "sub/.git", "ok": "src",
             "okchain": "ok", "src/back": "../.git", "self": "."}
    for name, target in links.items():
        os.symlink(target, root / name)
    return root


@pytest.mark.parametrize("rel", ["gitlink/hooks/post-checkout", "gitlink/config", "c1/hooks/pre-commit",
                                 "up/outside/x", "up/wt/.git/config", "nested/config", "src/back/hooks/x",
                                 "okchain/back/config", "self/.git/config", "self/gitlink/hooks/x"])
def test_writes_that_resolve_into_git_or_out_are_refused(tree: Path, rel: str) -> None:
    with pytest.raises(UnsafePathError):
        resolve_inside(tree, rel, "t")
    with pytest.raises(UnsafePathError):
        treewrite.write_file(tree, rel, b"#!/bin/sh\n", 0o755)
    assert sorted(os.listdir(tree / ".git/hooks")) == [] and not (tree.parent / "outside/x").exists()


@pytest.mark.parametrize("rel, real", [("ok/new.h", "src/new.h"), ("okchain/a/b.h", "src/a/b.h"),
                                       ("self/src/x.h", "src/x.h"), ("plain/dir/f.c", "plain/dir/f.c")])
def test_writes_through_links_inside_the_tree_land_at_their_real_path(tree: Path, rel: str, real: str) -> None:
    assert real_relpath(tree, rel) == real
    assert treewrite.write_file(tree, rel, b"x\n") == real
    assert (tree / real).read_bytes() == b"x\n"


def test_deleting_through_a_link_into_git_is_refused(tree: Path) -> None:
    (tree / ".git/config").write_text("[core]\n")
    with pytest.raises(UnsafePathError):
        treewrite.delete_file(tree, "gitlink/config")
    assert (tree / ".git/config").exists()


@pytest.mark.parametrize("rel, target", [("a", ".git"), ("a", "gitlink"), ("src/a", "../.git/hooks"),
                                         ("a", "../outside"), ("a", "/etc"), ("a", "c1/hooks"), ("a", ""),
                                         ("src/a", "../../wt/.git")])
def test_new_links_into_git_or_out_are_refused(tree: Path, rel: str, target: str) -> None:
    with pytest.raises(UnsafePathError):
        check_link_target(tree, rel, target, "t")
    with pytest.raises(UnsafePathError):
        treewrite.make_link(tree, rel, target)
    assert not os.path.lexists(tree / rel)


@pytest.mark.parametrize("rel, target", [("a", "src"), ("src/a", "../README"), ("a", "."), ("d/a", "later/x")])
def test_new_links_inside_the_tree_are_made(tree: Path, rel: str, target: str) -> None:
    assert treewrite.make_link(tree, rel, target) == rel
    assert os.readlink(tree / rel) == target


def test_special_files_are_not_written(tree: Path) -> None:
    os.mkfifo(tree / "src/pipe")
    with pytest.raises(UnsafePathError, match="not a regular file"):
        resolve_inside(tree, "src/pipe", "t")
