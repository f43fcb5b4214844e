"""new-recipe → apply → edit → refresh on real git trees: the edits become patch steps that reproduce the tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Project
from helpers import git, write_patchset

from legacy_gpu_patch.config.recipe import SearchPath, find_recipe
from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration


def _steps(project: Project) -> list[str]:
    recipe = find_recipe(str(project.recipes / "demo.yaml"), SearchPath.from_options([project.recipes]))
    keys = []
    for entry in recipe.entries:
        keys += [s.key for s in entry.patchset.steps] if entry.patchset else [entry.step.key]  # type: ignore[union-attr]
    return keys


def _ledger(project: Project) -> list[str]:
    log = git(project.wt, "log", "--reverse", "--format=%(trailers:key=Lgpatch-Step,valueonly)", "HEAD")
    return [line for line in log.splitlines() if line.strip()]


def test_new_recipe_pins_the_tag_and_applies_as_is(project: Project) -> None:
    text = (project.recipes / "demo.yaml").read_text()
    assert git(project.up, "rev-parse", "v1.0") in text
    assert (project.recipes / "patchsets" / "demo" / "patchset.yaml").is_file()
    assert git(project.wt, "rev-parse", "HEAD") == git(project.up, "rev-parse", "v1.0")
    assert git(project.wt, "status", "--porcelain") == ""


def test_new_recipe_refuses_to_overwrite(project: Project) -> None:
    code, _, err = project("new-recipe", "demo", "--git", project.up.as_uri(), "--ref", "v1.0")
    assert code == ExitCode.CONFIG and "already exists" in err


def test_new_recipe_unknown_tag_is_a_source_error(project: Project) -> None:
    code, _, err = project("new-recipe", "other", "--git", project.up.as_uri(), "--ref", "v9.9")
    assert code == ExitCode.SOURCE and "no tag or branch 'v9.9'" in err
    assert not (project.recipes / "other.yaml").exists()


def test_edit_refresh_revert_apply_reproduces_the_tree(project: Project, tmp_path: Path) -> None:
    project.ok("edit", "-C", project.wt)
    project.edit_file("src/main.c", "return f1();", "return f2();")
    (project.wt / "src" / "new.c").write_text("int added(void) { return 1; }\n")
    (project.wt / "README").unlink()
    edited = _worktree_tree(project.wt)
    out = project.ok("refresh", "-C", project.wt, "-m", "Call f2 from main")
    assert "new step demo/call-f2-from-main" in out
    assert project.tree() == edited, "the refreshed step must hold exactly the edited tree"
    assert git(project.wt, "status", "--porcelain", "--untracked-files=all") == ""
    patch = (project.recipes / "patchsets" / "demo" / "call-f2-from-main.patch").read_text()
    assert patch.startswith("From ") and "Subject: [PATCH] Call f2 from main" in patch
    assert "deleted file mode" in patch and "new file mode" in patch
    assert _ledger(project) == ["demo/call-f2-from-main"]
    assert git(project.wt, "for-each-ref", "refs/lgpatch/rescue") == ""  # exact: nothing left to rescue
    project.ok("revert", "-C", project.wt)
    assert project.tree() == git(project.up, "rev-parse", "v1.0^{tree}")
    project.ok("apply", "demo", "-C", project.wt)
    assert project.tree() == edited
    fresh = tmp_path / "fresh"
    project.ok("apply", "demo", "-C", fresh)
    assert git(fresh, "rev-parse", "HEAD^{tree}") == edited


def _worktree_tree(wt: Path) -> str:
    """The tree object of the work tree with its uncommitted edits (through a scratch index)."""
    import os
    import shutil
    import subprocess

    index = wt / ".git" / "test-index"
    shutil.copy2(wt / ".git" / "index", index)  # keeps the mtime git's racy check needs
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "add", "-A"], cwd=wt, env=env, check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=wt, env=env, check=True, capture_output=True, text=True)
    index.unlink()
    return tree.stdout.strip()


def test_two_refreshes_make_two_steps_in_order(project: Project) -> None:
    project.edit_file("src/main.c", "return 3;", "return 33;")
    project.ok("refresh", "-C", project.wt, "-m", "First change")
    project.edit_file("src/main.c", "return 7;", "return 77;")
    project.ok("refresh", "-C", project.wt, "--name", "second", "-m", "Second change")
    assert _steps(project) == ["demo/first-change", "demo/second"]
    assert _ledger(project) == ["demo/first-change", "demo/second"]
    second = (project.recipes / "patchsets" / "demo" / "second.patch").read_text()
    assert "+int f7(void) { return 77; }" in second
    assert "+int f3" not in second and "-int f3" not in second  # the first change is the first step's, only


def test_refresh_into_existing_patchset_keeps_its_order(project: Project) -> None:
    write_patchset(project.recipes, "fixes", """\
name: fixes
description: Fixes kept by hand.
steps:
  # the first fix
  - id: one
    patch: one.patch
  - id: two
    insert: {file: README, at: end, text: "two"}
mirrors: upstream#1
""", {"one.patch": "--- a/src/util.c\n+++ b/src/util.c\n@@ -2 +2 @@\n-API_EXPORT int util(void) { return 0; }\n"
                   "+API_EXPORT int util(void) { return 1; }\n"})
    recipe = project.recipes / "demo.yaml"
    recipe.write_text(recipe.read_text().replace("steps:\n", "steps:\n  - fixes\n"))
    project.ok("apply", "demo", "-C", project.wt)
    project.edit_file("include/api.h", "int other(void);", "int other(int);")
    project.ok("refresh", "-C", project.wt, "--into", "fixes", "--name", "three", "-m", "Other takes an int")
    manifest = (project.recipes / "patchsets" / "fixes" / "patchset.yaml").read_text()
    assert manifest.index("id: one") < manifest.index("id: two") < manifest.index("id: three")
    assert "# the first fix" in manifest and manifest.rstrip().endswith("mirrors: upstream#1")
    assert _steps(project) == ["fixes/one", "fixes/two", "fixes/three"]
    assert _ledger(project) == ["fixes/one", "fixes/two", "fixes/three"]
    assert git(project.wt, "status", "--porcelain") == ""


def test_refresh_without_edits_says_so_and_changes_nothing(project: Project) -> None:
    before = (project.recipes / "patchsets" / "demo" / "patchset.yaml").read_text()
    code, _, err = project("refresh", "-C", project.wt)
    assert code == ExitCode.STATE and "nothing to refresh" in err
    assert (project.recipes / "patchsets" / "demo" / "patchset.yaml").read_text() == before
