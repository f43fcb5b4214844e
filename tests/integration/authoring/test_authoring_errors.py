"""Bad input to edit/refresh gets a clear error and changes nothing (files, tree, refs); inline recipe steps."""

from __future__ import annotations

import pytest
from conftest import Project
from helpers import git

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration


def _state(p: Project) -> tuple[dict[str, str], str, str, str]:
    files = {str(f): f.read_text() for f in sorted(p.recipes.rglob("*")) if f.is_file()}
    return (files, git(p.wt, "status", "--porcelain"), git(p.wt, "rev-parse", "HEAD"),
            git(p.wt, "for-each-ref", "refs/lgpatch"))


def test_edit_of_an_unknown_step_suggests_the_closest(project: Project) -> None:
    project.edit_file("README", "small", "tiny")
    project.ok("refresh", "-C", project.wt, "--name", "tiny")
    code, _, err = project("edit", "tinny", "-C", project.wt)
    assert code == ExitCode.STATE and "no step 'tinny'" in err and "demo/tiny" in err


@pytest.mark.parametrize("args, code, message", [
    (["--name", "Bad Name"], ExitCode.CONFIG, "is not a valid name"),
    (["--fold"], ExitCode.STATE, "--fold needs a step being edited"),
    (["--into", "no/such"], ExitCode.CONFIG, "is not a valid name"),
])
def test_refresh_refusals_change_nothing(project: Project, args: list[str], code: int, message: str) -> None:
    project.edit_file("src/main.c", "return 3;", "return 30;")
    before = _state(project)
    got, _, err = project("refresh", "-C", project.wt, *args)
    assert got == code and message in err
    assert _state(project) == before


def test_binary_edits_are_refused_and_kept(project: Project) -> None:
    (project.wt / "logo.bin").write_bytes(b"\x00\x01\x02binary")
    before = _state(project)
    code, _, err = project("refresh", "-C", project.wt)
    assert code == ExitCode.PATCH and "binary file(s) cannot be a patch step: logo.bin" in err
    assert _state(project) == before and (project.wt / "logo.bin").read_bytes() == b"\x00\x01\x02binary"


def test_a_foreign_commit_is_refused(project: Project) -> None:
    project.edit_file("README", "small", "tiny")
    git(project.wt, "commit", "-qam", "mine")
    project.edit_file("README", "tiny", "wee")
    code, _, err = project("refresh", "-C", project.wt)
    assert code == ExitCode.STATE and "did not make" in err
    assert "wee" in (project.wt / "README").read_text() and git(project.wt, "log", "-1", "--format=%s") == "mine"


def test_editing_an_inline_recipe_step_adds_an_inline_patch_step_after_it(project: Project) -> None:
    recipe = project.recipes / "demo.yaml"
    recipe.write_text(recipe.read_text().replace(
        "steps:\n", "steps:\n  - id: rename\n    regex: {files: [\"src/*.c\"], pattern: API_EXPORT, replace: API}\n"))
    project.ok("apply", "demo", "-C", project.wt)
    project.ok("edit", "recipe/rename", "-C", project.wt)
    project.edit_file("src/util.c", "return 0;", "return 1;")
    out = project.ok("refresh", "-C", project.wt, "--name", "util-one", "-m", "util returns one")
    assert "new step recipe/util-one" in out
    text = recipe.read_text()
    assert text.index("id: rename") < text.index("id: util-one") < text.index("- demo")
    assert (project.recipes / "util-one.patch").is_file()
    log = git(project.wt, "log", "--reverse", "--format=%(trailers:key=Lgpatch-Step,valueonly)")
    assert [x for x in log.splitlines() if x] == ["recipe/rename", "recipe/util-one"]
    assert git(project.wt, "status", "--porcelain") == ""
