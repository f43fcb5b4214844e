"""A tag moved upstream after the mirror was made is noticed on the next apply, as it is on a cold clone.

The upstream is a local repository reached through a file:// URL (git treats it as a remote: ls-remote and fetch
go through the transport as for https). The first apply makes the cache's mirror; then the tag is moved.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Upstream, git, git_recipe, write_recipe

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration

STEPS = "  - id: one\n    insert: {file: README.md, at: end, text: one}\n"


def _recipes(tmp_path: Path, upstream: Upstream, annotated: bool) -> Path:
    if annotated:
        git(upstream.path, "tag", "-f", "-a", "-m", "release", upstream.tag)
    d = tmp_path / "recipes"
    write_recipe(d, git_recipe("tagged", "moved tag fixture", upstream, STEPS), "tagged.yaml")
    return d


def _move_tag(upstream: Upstream, annotated: bool) -> str:
    (upstream.path / "README.md").write_text("sneaky\n")
    git(upstream.path, "commit", "-qam", "sneaky")
    git(upstream.path, "tag", "-f", *(["-a", "-m", "moved"] if annotated else []), upstream.tag)
    return git(upstream.path, "rev-parse", "HEAD")


@pytest.mark.parametrize("annotated", [False, True])
def test_moved_tag_is_refused_with_a_warm_mirror(lgpatch, tmp_path: Path, upstream: Upstream,
                                                 annotated: bool) -> None:
    d = _recipes(tmp_path, upstream, annotated)
    first = lgpatch("--recipe-path", d, "apply", "tagged", "--workdir", tmp_path / "a")
    assert first.code == 0, first.err
    assert "re-checked" not in first.err  # a cold clone has just asked upstream
    moved_to = _move_tag(upstream, annotated)
    r = lgpatch("--recipe-path", d, "apply", "tagged", "--workdir", tmp_path / "b")
    assert r.code == ExitCode.SOURCE, r.err
    assert f"{upstream.tag} now resolves to {moved_to} upstream" in r.err and upstream.commit in r.err
    assert not (tmp_path / "b").exists()
    # Offline, the mirror's copy is all there is: used, and the user is told the tag was not re-checked.
    r = lgpatch("--recipe-path", d, "apply", "tagged", "--workdir", tmp_path / "c", "--offline")
    assert r.code == 0, r.err
    assert "offline, so the tag was not re-checked upstream" in r.err
    assert git(tmp_path / "c", "rev-list", "--max-parents=0", "HEAD") == upstream.commit


def test_unmoved_tag_with_a_warm_mirror_applies_quietly(lgpatch, tmp_path: Path, upstream: Upstream) -> None:
    d = _recipes(tmp_path, upstream, annotated=True)
    assert lgpatch("--recipe-path", d, "apply", "tagged", "--workdir", tmp_path / "a").code == 0
    r = lgpatch("--recipe-path", d, "apply", "tagged", "--workdir", tmp_path / "b")
    assert r.code == 0, r.err
    assert "re-checked" not in r.err


def test_unreachable_upstream_with_a_warm_mirror_says_the_tag_was_not_rechecked(lgpatch, tmp_path: Path,
                                                                                upstream: Upstream) -> None:
    d = _recipes(tmp_path, upstream, annotated=False)
    assert lgpatch("--recipe-path", d, "apply", "tagged", "--workdir", tmp_path / "a").code == 0
    upstream.path.rename(tmp_path / "gone")
    r = lgpatch("--recipe-path", d, "apply", "tagged", "--workdir", tmp_path / "b")
    assert r.code == 0, r.err
    assert "could not be re-checked upstream" in r.err
