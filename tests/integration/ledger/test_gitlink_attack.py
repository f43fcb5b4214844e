"""Writes through symbolic links that the source tree itself contains (or that a patch creates) are refused.

The upstream commits `gitlink -> .git`, `up -> ..`, a chain of links ending in `.git`, a link to `.git/hooks` and
one to `../.git` from a subfolder. Every patch, insert, backport, rename and delete that would land in `.git` (or
outside the tree) through them must be refused with exit 8 before anything is written: the tree, the branch and
the contents of `.git` (hooks, config, refs) are compared byte for byte before and after.
Symlinks in patches (`new file mode 120000`) become links when they stay inside the tree and outside `.git`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from helpers import TORCHLIKE, Upstream, git, make_upstream, write_recipe

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration

# Volatile by design: objects and the index are rewritten by a rolled-back step, logs and lgpatch's own folder too.
_VOLATILE = ("objects", "index", "logs", "lgpatch", "ORIG_HEAD")


def git_dir_hashes(wt: Path) -> dict[str, str]:
    """sha256 of every file under wt/.git except the volatile ones: hooks, config, info, refs, HEAD, description."""
    out = {}
    gitdir = wt / ".git"
    for dirpath, dirnames, filenames in os.walk(gitdir):
        rel_dir = Path(dirpath).relative_to(gitdir)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in _VOLATILE]
        for name in filenames:
            rel = rel_dir / name
            if str(rel) in _VOLATILE:
                continue
            p = Path(dirpath) / name
            out[str(rel)] = f"{oct(p.stat().st_mode)} {hashlib.sha256(p.read_bytes()).hexdigest()}"
    return out


class Tree:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.recipes = tmp / "recipes"
        self.wt = tmp / "wt"
        self.outside = tmp / "outside"
        self.outside.mkdir()
        up = make_upstream(tmp / "upstream", TORCHLIKE).path
        os.symlink(".git", up / "gitlink")
        os.symlink("..", up / "up")
        os.symlink("chain2", up / "chain1")
        os.symlink("gitlink", up / "chain2")
        os.symlink(".git/hooks", up / "hooks_link")
        os.symlink("../.git", up / "caffe2" / "dotgit")
        git(up, "add", "-A")
        git(up, "commit", "-qm", "links to .git")
        git(up, "tag", "-f", "v1.0")
        self.up = Upstream(up, git(up, "rev-parse", "HEAD"), "v1.0")

    def recipe(self, steps: str) -> None:
        up = self.up
        write_recipe(self.recipes, f"name: gl\ndescription: links\nsource:\n  git: {{url: \"{up.url()}\", ref: v1.0, "
                                   f"commit: {up.commit}}}\nsteps:\n  - id: fine\n    insert: {{file: README.md, "
                                   f"at: end, text: fine}}\n{steps}", "gl.yaml")

    def patch(self, name: str, text: str) -> None:
        self.recipes.mkdir(parents=True, exist_ok=True)
        (self.recipes / name).write_text(text)

    def snapshot(self) -> tuple[str, str, dict[str, str], list[str]]:
        wt = self.wt
        return (git(wt, "rev-parse", "HEAD"), git(wt, "status", "--porcelain", "--untracked-files=all", "--ignored"),
                git_dir_hashes(wt), sorted(p.name for p in self.outside.iterdir()))


def new_file(path: str, body: str = "+#!/bin/sh\n+echo planted\n", mode: str = "100755") -> str:
    return f"diff --git a/{path} b/{path}\nnew file mode {mode}\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,2 @@\n{body}"


def new_link(path: str, target: str) -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 120000\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n"
            f"+{target}\n\\ No newline at end of file\n")


PATCHES = {
    "hook-through-gitlink": new_file("gitlink/hooks/post-checkout"),
    "hook-through-chain": new_file("chain1/hooks/post-checkout"),
    "hook-through-hooks-link": new_file("hooks_link/post-checkout"),
    "hook-through-nested-link": new_file("caffe2/dotgit/hooks/post-checkout"),
    "outside-through-dotdot": new_file("up/outside/planted.sh"),
    "config-through-gitlink": "--- a/gitlink/config\n+++ b/gitlink/config\n@@ -1 +1,2 @@\n [core]\n"
                              "+\tfsmonitor = /tmp/evil\n",
    "delete-through-gitlink": "--- a/gitlink/HEAD\n+++ /dev/null\n@@ -1 +0,0 @@\n-ref: refs/heads/lgpatch\n",
    "rename-into-gitlink": "diff --git a/README.md b/gitlink/hooks/post-merge\nsimilarity index 100%\n"
                           "rename from README.md\nrename to gitlink/hooks/post-merge\n",
    "new-link-to-git": new_link("evil", ".git"),
    "new-link-to-git-hooks": new_link("caffe2/evil", "../.git/hooks"),
    "new-link-through-gitlink": new_link("evil", "gitlink/hooks"),
    "new-link-outside": new_link("evil", "../outside"),
    "new-link-absolute": new_link("evil", "/etc"),
    "link-then-write-through-it": new_link("inc", "caffe2") + new_file("inc/x.h", "+a\n+b\n", "100644"),
}


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def _refused(lgpatch, tree: Tree, steps: str) -> str:
    """Apply the harmless first step, then the hostile one: exit 8, and nothing in the tree or .git changed."""
    tree.recipe("")
    r = lgpatch("--recipe-path", tree.recipes, "apply", "gl", "--workdir", tree.wt)
    assert r.code == 0, r.err
    before = tree.snapshot()
    tree.recipe(steps)
    r = lgpatch("--recipe-path", tree.recipes, "apply", "gl", "--workdir", tree.wt)
    assert r.code == ExitCode.UNSAFE, r.err
    assert "Traceback" not in r.err and "unsafe path refused" in r.err
    assert tree.snapshot() == before
    assert not (tree.wt / ".git/hooks/post-checkout").exists()
    return r.err


@pytest.mark.parametrize("case", list(PATCHES))
def test_patch_through_a_link_in_the_tree_is_refused(lgpatch, tree: Tree, case: str) -> None:
    tree.patch("evil.patch", PATCHES[case])
    _refused(lgpatch, tree, "  - id: evil\n    patch: evil.patch\n")


@pytest.mark.parametrize("target", ["gitlink/config", "chain1/config", "caffe2/dotgit/config", "up/outside/x"])
def test_insert_through_a_link_in_the_tree_is_refused(lgpatch, tree: Tree, target: str) -> None:
    err = _refused(lgpatch, tree, f"  - id: evil\n    insert: {{file: '{target}', at: end, text: '[core] x'}}\n")
    assert target in err


def test_backport_through_a_link_in_the_tree_is_refused(lgpatch, tree: Tree) -> None:
    up = tree.up
    _refused(lgpatch, tree, f"  - id: evil\n    backport: {{repo: '{up.url()}', ref: v1.0, commit: {up.commit}, "
                            "files: [gitlink/hooks/post-checkout]}\n")


def test_regex_never_reaches_through_a_link(lgpatch, tree: Tree) -> None:
    # git ls-files lists no path below a symlink, so the glob cannot select .git's files through gitlink.
    tree.recipe("  - id: rx\n    regex: {files: ['gitlink/**', 'chain1/*'], pattern: core, replace: evil, "
                "on_missing: ignore}\n")
    r = lgpatch("--recipe-path", tree.recipes, "apply", "gl", "--workdir", tree.wt)
    assert r.code == 0, r.err
    assert "[core]" in (tree.wt / ".git/config").read_text()


def test_a_link_made_by_an_earlier_step_is_followed_only_inside_the_tree(lgpatch, tree: Tree) -> None:
    # Step a makes a dangling link `a -> b`; step b would complete the route with `b -> .git`: refused, and the
    # write through `a` (step hook) never happens. Step a's commit stays; nothing else in .git changes.
    tree.recipe("")
    assert lgpatch("--recipe-path", tree.recipes, "apply", "gl", "--workdir", tree.wt).code == 0
    hooks_before = {k: v for k, v in git_dir_hashes(tree.wt).items() if not k.startswith("refs/")}
    tree.patch("a.patch", new_link("a", "b"))
    tree.patch("b.patch", new_link("b", ".git"))
    tree.patch("hook.patch", new_file("a/hooks/post-checkout"))
    tree.recipe("  - id: a\n    patch: a.patch\n  - id: b\n    patch: b.patch\n  - id: hook\n    patch: hook.patch\n")
    r = lgpatch("--recipe-path", tree.recipes, "apply", "gl", "--workdir", tree.wt)
    assert r.code == ExitCode.UNSAFE, r.err
    assert "recipe/b" in r.err and "'b -> .git'" in r.err
    steps = git(tree.wt, "log", "--format=%(trailers:key=Lgpatch-Step,valueonly)").split()
    assert steps == ["recipe/a", "recipe/fine"]
    assert os.readlink(tree.wt / "a") == "b" and not os.path.lexists(tree.wt / "b")
    assert {k: v for k, v in git_dir_hashes(tree.wt).items() if not k.startswith("refs/")} == hooks_before
    assert git(tree.wt, "status", "--porcelain", "--untracked-files=all") == ""


def test_links_inside_the_tree_are_created_and_written_through(lgpatch, tree: Tree) -> None:
    tree.patch("link.patch", new_link("include/c10", "../c10") + new_link("alias.md", "README.md"))
    tree.patch("through.patch", new_file("include/c10/new.h", "+#pragma once\n+int x;\n", "100644"))
    tree.recipe("  - id: link\n    patch: link.patch\n  - id: through\n    patch: through.patch\n")
    r = lgpatch("--recipe-path", tree.recipes, "apply", "gl", "--workdir", tree.wt)
    assert r.code == 0, r.err
    assert os.readlink(tree.wt / "include/c10") == "../c10"
    assert os.readlink(tree.wt / "alias.md") == "README.md"
    assert (tree.wt / "c10/new.h").read_text() == "#pragma once\nint x;\n"
    # git records them as links (mode 120000), not as files holding the target's name.
    listing = git(tree.wt, "ls-tree", "HEAD", "alias.md", "include/c10")
    assert listing.count("120000 blob") == 2, listing
    assert git(tree.wt, "status", "--porcelain", "--untracked-files=all") == ""
