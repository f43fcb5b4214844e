"""bench/_ledger_revert.py on real git ledgers: a step reverted alone where it can be, with the fewest later steps
on its lines where it cannot, and a clear error (the tree at its HEAD) where nothing helps."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import git, write_files
from helpers.chainer_cpu import ledger_revert

BASE = "".join(f"line {i}\n" for i in range(30))


def commit(tree: Path, subject: str, files: dict[str, str] | None = None) -> str:
    if files:
        write_files(tree, files)
        git(tree, "add", "-A")
    git(tree, "commit", "-q", "--allow-empty", "-m", subject)
    return git(tree, "rev-parse", "HEAD")


def edit(line: int, text: str, source: str) -> str:
    lines = source.splitlines(keepends=True)
    lines[line] = text + "\n"
    return "".join(lines)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    commit(tmp_path, "lgpatch: baseline", {"a.py": BASE, "b.py": BASE})
    return tmp_path


def test_a_step_nothing_builds_on_is_reverted_alone(tree: Path) -> None:
    step = commit(tree, "lgpatch: one/step", {"a.py": edit(3, "step", BASE)})
    commit(tree, "lgpatch: two/far", {"a.py": edit(25, "far", edit(3, "step", BASE))})  # same file, other lines
    commit(tree, "lgpatch: three/other", {"b.py": edit(3, "other", BASE)})
    assert ledger_revert().revert_step(tree, step) == ("one/step",)
    assert (tree / "a.py").read_text() == edit(25, "far", BASE)
    assert (tree / "b.py").read_text() == edit(3, "other", BASE)


def test_later_steps_on_its_lines_are_reverted_with_it_nearest_first(tree: Path) -> None:
    step = commit(tree, "lgpatch: one/step", {"a.py": edit(3, "step", BASE)})
    commit(tree, "lgpatch: two/builds", {"a.py": edit(3, "builds", BASE)})
    commit(tree, "lgpatch: three/other", {"b.py": edit(3, "other", BASE)})
    commit(tree, "lgpatch: four/far", {"a.py": edit(25, "far", edit(3, "builds", BASE))})
    # four is on a.py too but away from line 3: two alone is what one's revert needs
    assert ledger_revert().revert_step(tree, step) == ("two/builds", "one/step")
    assert (tree / "a.py").read_text() == edit(25, "far", BASE)


def test_a_chain_of_later_steps_is_reverted_newest_first(tree: Path) -> None:
    step = commit(tree, "lgpatch: one/step", {"a.py": edit(3, "step", BASE)})
    commit(tree, "lgpatch: two/builds", {"a.py": edit(3, "builds", BASE)})
    commit(tree, "lgpatch: three/again", {"a.py": edit(3, "again", BASE)})
    assert ledger_revert().revert_step(tree, step) == ("three/again", "two/builds", "one/step")
    assert (tree / "a.py").read_text() == BASE
    assert git(tree, "status", "--porcelain") == ""


def test_a_step_that_cannot_be_reverted_is_named_and_the_tree_stays_at_head(tree: Path) -> None:
    module = ledger_revert()
    commit(tree, "lgpatch: one/step", {"a.py": edit(3, "step", BASE)})
    empty = commit(tree, "lgpatch: two/empty")  # git refuses to revert a commit that changed nothing
    head = git(tree, "rev-parse", "HEAD")
    with pytest.raises(module.RevertError, match="two/empty cannot be reverted"):
        module.revert_step(tree, empty)
    assert git(tree, "rev-parse", "HEAD") == head and git(tree, "status", "--porcelain") == ""
