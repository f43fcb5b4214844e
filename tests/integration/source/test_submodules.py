"""Submodules from the mirror cache: offline checkout of exactly the pinned commits, only the listed paths.

The superproject's .gitmodules points at an unreachable host (as GitHub is from an offline cluster node); the
submodules' real histories live in local clones that `lgpatch cache add-mirror` puts into the cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Runner, git, make_upstream, write_recipe

from legacy_gpu_patch.source.submodules import resolve_url

pytestmark = pytest.mark.integration

UNREACHABLE = "https://git.invalid/org"


def _superproject(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An upstream with submodules `third_party/a` and `third_party/b`; `a` has a nested submodule `deps/c`."""
    c = make_upstream(tmp_path / "src-c", {"c.h": "int c;\n"}, tag="c1")
    b = make_upstream(tmp_path / "src-b", {"b.h": "int b_old;\n"}, tag="b1")
    (b.path / "b.h").write_text("int b;\n")
    git(b.path, "commit", "-qam", "b pinned")  # the pin is not the tagged commit: only the gitlink says which
    a = make_upstream(tmp_path / "src-a", {"a.h": "int a;\n"}, tag="a1")
    _add_gitlink(a.path, "deps/c", f"{UNREACHABLE}/c.git", c.commit)
    top = make_upstream(tmp_path / "upstream", {"CMakeLists.txt": "project(top)\n"}, tag="v1.0")
    _add_gitlink(top.path, "third_party/a", "../a.git", git(a.path, "rev-parse", "HEAD"))
    _add_gitlink(top.path, "third_party/b", f"{UNREACHABLE}/b.git", git(b.path, "rev-parse", "HEAD"))
    git(top.path, "tag", "-f", "v1.0")
    pins = {"a": git(a.path, "rev-parse", "HEAD"), "b": git(b.path, "rev-parse", "HEAD"), "c": c.commit}
    return top.path, pins


def _add_gitlink(repo: Path, path: str, url: str, commit: str) -> None:
    """Record a submodule without cloning it (what `git submodule add` leaves in the tree and index)."""
    with open(repo / ".gitmodules", "a", encoding="utf-8") as f:
        f.write(f'[submodule "{path}"]\n\tpath = {path}\n\turl = {url}\n')
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},{path}")
    git(repo, "add", ".gitmodules")
    git(repo, "commit", "-qm", f"submodule {path}")


def _recipe(tmp_path: Path, top: Path, submodules: str) -> Path:
    commit = git(top, "rev-parse", "HEAD")
    return write_recipe(tmp_path / "recipes", f"""\
name: demo
description: superproject with submodules
source:
  git: {{url: "{UNREACHABLE}/top.git", ref: v1.0, commit: {commit}, submodules: {submodules}}}
steps:
  - id: touch
    insert: {{file: CMakeLists.txt, after: "project", text: "# patched"}}
""")


def _seed_cache(lgpatch: Runner, tmp_path: Path, top: Path, which: str = "abc") -> None:
    for name, url in (("upstream", f"{UNREACHABLE}/top.git"), ("src-a", f"{UNREACHABLE}/a.git"),
                      ("src-b", f"{UNREACHABLE}/b.git"), ("src-c", f"{UNREACHABLE}/c.git")):
        if name == "upstream" or name[-1] in which:
            r = lgpatch("cache", "add-mirror", url, tmp_path / name)
            assert r.code == 0, r.err


def test_relative_urls_resolve_against_the_superproject() -> None:
    assert resolve_url("../cpuinfo.git", "https://github.com/pytorch/pytorch") == "https://github.com/pytorch/cpuinfo.git"
    assert resolve_url("./sub", "https://h/o/top.git") == "https://h/o/top.git/sub"
    assert resolve_url("../b", "/srv/git/top") == "/srv/git/b"
    assert resolve_url("https://x/y.git", "/srv/git/top") == "https://x/y.git"


def test_listed_paths_only_offline_at_the_pins(lgpatch: Runner, tmp_path: Path) -> None:
    top, pins = _superproject(tmp_path)
    recipe = _recipe(tmp_path, top, "[third_party/b]")
    _seed_cache(lgpatch, tmp_path, top, which="b")
    work = tmp_path / "work"
    r = lgpatch("--recipe-path", recipe.parent, "apply", "demo", "-C", work, "--offline")
    assert r.code == 0, r.err
    assert (work / "third_party/b/b.h").read_text() == "int b;\n"  # the gitlink's commit, not the tag
    assert git(work / "third_party/b", "rev-parse", "HEAD") == pins["b"]
    assert not any((work / "third_party/a").iterdir())  # not listed: left uninitialized
    # an ordinary submodule git understands, and the tree is clean for lgpatch (status works, no dirt)
    assert git(work, "submodule", "status", "third_party/b").startswith(pins["b"])  # no +/- mark
    assert lgpatch("status", "-C", work).code == 0


def test_true_means_all_recursively_with_relative_urls(lgpatch: Runner, tmp_path: Path) -> None:
    top, pins = _superproject(tmp_path)
    recipe = _recipe(tmp_path, top, "true")
    _seed_cache(lgpatch, tmp_path, top)
    work = tmp_path / "work"
    r = lgpatch("--recipe-path", recipe.parent, "apply", "demo", "-C", work, "--offline")
    assert r.code == 0, r.err
    assert git(work / "third_party/a", "rev-parse", "HEAD") == pins["a"]  # url ../a.git, resolved
    assert (work / "third_party/a/deps/c/c.h").read_text() == "int c;\n"  # nested, from c's own mirror
    assert "submodules checked out" in r.err


def test_missing_mirror_offline_names_the_submodule_and_creates_nothing(lgpatch: Runner, tmp_path: Path) -> None:
    top, pins = _superproject(tmp_path)
    recipe = _recipe(tmp_path, top, "[third_party/a, third_party/b]")
    _seed_cache(lgpatch, tmp_path, top, which="a")  # b's mirror missing
    work = tmp_path / "work"
    r = lgpatch("--recipe-path", recipe.parent, "apply", "demo", "-C", work, "--offline")
    assert r.code != 0
    assert "third_party/b" in r.err and pins["b"][:12] in r.err and "cache add-mirror" in r.err
    assert not work.exists()


def test_unknown_submodule_path_is_a_clear_error(lgpatch: Runner, tmp_path: Path) -> None:
    top, _ = _superproject(tmp_path)
    recipe = _recipe(tmp_path, top, "[third_party/zz]")
    _seed_cache(lgpatch, tmp_path, top)
    r = lgpatch("--recipe-path", recipe.parent, "apply", "demo", "-C", tmp_path / "work", "--offline")
    assert r.code != 0
    assert "no submodule at third_party/zz" in r.err and "third_party/a" in r.err


def test_no_submodules_flag_and_mirror_of_a_shallow_clone(lgpatch: Runner, tmp_path: Path) -> None:
    top, pins = _superproject(tmp_path)
    recipe = _recipe(tmp_path, top, "[third_party/b]")
    # a shallow clone holding only the pinned commit, as one carries to an offline machine
    shallow = tmp_path / "b-shallow"
    git(tmp_path, "init", "-q", "--bare", str(shallow))
    git(shallow, "fetch", "-q", "--depth", "1", (tmp_path / "src-b").as_uri(), pins["b"])
    r = lgpatch("cache", "add-mirror", f"{UNREACHABLE}/b.git", shallow)
    assert r.code == 4 and "no branch, tag or HEAD commit" in r.err  # nothing reaches the commit
    mirrors = Path(lgpatch("cache", "path").out.strip()) / "mirrors"
    assert not list(mirrors.glob("**/b.git*"))  # no half mirror left behind
    git(shallow, "update-ref", "refs/heads/pinned", pins["b"])
    assert lgpatch("cache", "add-mirror", f"{UNREACHABLE}/b.git", shallow).code == 0
    assert lgpatch("cache", "add-mirror", f"{UNREACHABLE}/top.git", tmp_path / "upstream").code == 0
    work = tmp_path / "work"
    r = lgpatch("--recipe-path", recipe.parent, "apply", "demo", "-C", work, "--offline")
    assert r.code == 0, r.err
    assert (work / "third_party/b/b.h").read_text() == "int b;\n"
    bare = tmp_path / "work2"
    r = lgpatch("--recipe-path", recipe.parent, "apply", "demo", "-C", bare, "--offline", "--no-submodules")
    assert r.code == 0, r.err
    assert not any((bare / "third_party/b").iterdir())


def test_recipe_schema_rejects_bad_submodule_lists(lgpatch: Runner, tmp_path: Path) -> None:
    top, _ = _superproject(tmp_path)
    recipe = _recipe(tmp_path, top, "[../escape]")
    r = lgpatch("--recipe-path", recipe.parent, "show", "demo")
    assert r.code != 0 and "submodules" in r.err
    recipe = _recipe(tmp_path, top, "maybe")
    r = lgpatch("--recipe-path", recipe.parent, "show", "demo")
    assert r.code != 0 and "submodules" in r.err


@pytest.mark.parametrize("offline", [True, False])
def test_missing_submodule_with_source_says_both_ways_out(lgpatch: Runner, tmp_path: Path, offline: bool) -> None:
    """--source gives the superproject only: the message names the submodule (path, URL, commit), the two ways
    out (cache add-mirror, --no-submodules), never "pass --source", and no work tree is left half made."""
    top, pins = _superproject(tmp_path)
    recipe = _recipe(tmp_path, top, "[third_party/a, third_party/b]")
    assert lgpatch("cache", "add-mirror", f"{UNREACHABLE}/a.git", tmp_path / "src-a").code == 0  # b not cached
    work = tmp_path / "work"
    args = ["--recipe-path", recipe.parent, "apply", "demo", "-C", work, "--source", top]
    r = lgpatch(*args, *(["--offline"] if offline else []))
    assert r.code != 0
    for needed in ("third_party/b", f"{UNREACHABLE}/b.git", pins["b"], f"cache add-mirror {UNREACHABLE}/b.git",
                   "--no-submodules"):
        assert needed in r.err, (needed, r.err)
    assert "pass --source" not in r.err
    assert not work.exists()
    r = lgpatch(*args, "--no-submodules", *(["--offline"] if offline else []))
    assert r.code == 0, r.err  # the way out it names works
