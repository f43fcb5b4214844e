"""`lgpatch edit STEP` in the middle of a series: refresh folds into (or adds after) STEP and re-applies the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project
from helpers import git, write_patchset

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration

S1 = """--- a/src/main.c
+++ b/src/main.c
@@ -2,3 +2,3 @@
 int f1(void) { return 1; }
-int f2(void) { return 2; }
+int f2(void) { return 20; }
 int f3(void) { return 3; }
"""
S3 = """--- a/src/main.c
+++ b/src/main.c
@@ -10,3 +10,3 @@
 int f9(void) { return 9; }
-int f10(void) { return 10; }
+int f10(void) { return 100; }
 int f11(void) { return 11; }
"""
SERIES = """\
name: series
description: A series of four steps.
steps:
  - id: s1
    patch: s1.patch
  - id: s2
    description: rename the export macro
    regex: {files: ["include/*.h", "src/*.c"], pattern: API_EXPORT, replace: API_PUBLIC}
  - id: s3
    patch: s3.patch
  - id: s4
    insert: {file: README, at: end, text: "patched"}
"""


@pytest.fixture
def series(project: Project) -> Project:
    write_patchset(project.recipes, "series", SERIES, {"s1.patch": S1, "s3.patch": S3})
    recipe = project.recipes / "demo.yaml"
    recipe.write_text(recipe.read_text().replace("steps:\n", "steps:\n  - series\n"))
    project.ok("apply", "demo", "-C", project.wt)
    return project


def _ledger(wt: Path) -> list[str]:
    log = git(wt, "log", "--reverse", "--format=%(trailers:key=Lgpatch-Step,valueonly)", "HEAD")
    return [line for line in log.splitlines() if line.strip()]


ALL = ["series/s1", "series/s2", "series/s3", "series/s4"]


def test_edit_puts_the_tree_after_the_step_and_records_it(series: Project) -> None:
    out = series.ok("edit", "series/s1", "-C", series.wt, "--json")
    info = json.loads(out)
    assert info["step"] == "series/s1" and info["above"] == ALL[1:]
    assert _ledger(series.wt) == ["series/s1"]
    marker = json.loads((series.wt / ".git/lgpatch/edit.json").read_text())
    assert marker["step"] == "series/s1" and marker["commit"] == git(series.wt, "rev-parse", "HEAD")
    status = json.loads(series.ok("status", "-C", series.wt, "--json"))
    assert [r["state"] for r in status["steps"]] == ["applied", "pending", "pending", "pending"]


def test_editing_a_middle_patch_step_folds_and_reapplies_the_later_ones(series: Project, tmp_path: Path) -> None:
    series.ok("edit", "s1", "-C", series.wt)
    series.edit_file("src/main.c", "return 4;", "return 40;")
    out = series.ok("refresh", "-C", series.wt)
    assert "folded into series/s1" in out
    s1 = (series.recipes / "patchsets/series/s1.patch").read_text()
    assert "+int f2(void) { return 20; }" in s1 and "+int f4(void) { return 40; }" in s1
    assert _ledger(series.wt) == ALL
    main = (series.wt / "src/main.c").read_text()
    assert "return 40;" in main and "return 100;" in main and "API_PUBLIC" in (series.wt / "include/api.h").read_text()
    assert not (series.wt / ".git/lgpatch/edit.json").exists()
    assert git(series.wt, "status", "--porcelain") == ""
    fresh = tmp_path / "fresh"
    series.ok("apply", "demo", "-C", fresh)
    assert git(fresh, "rev-parse", "HEAD^{tree}") == series.tree()


def test_a_later_step_that_no_longer_applies_stops_with_the_hunk_report(series: Project) -> None:
    series.ok("edit", "s1", "-C", series.wt)
    series.edit_file("src/main.c", "int f10(void) { return 10; }", "int f10(void) { return -10; }")
    code, _, err = series("refresh", "-C", series.wt)
    assert code == ExitCode.PATCH
    assert "series/s3: hunk #1 of s3.patch does not apply to src/main.c" in err
    assert "your edits are saved as step series/s1" in err
    assert "return -10;" in (series.recipes / "patchsets/series/s1.patch").read_text()  # the edits are kept
    assert _ledger(series.wt) == ["series/s1", "series/s2"]  # stopped at the last step that applied
    assert git(series.wt, "status", "--porcelain") == ""
    rescue = git(series.wt, "for-each-ref", "--format=%(refname)", "refs/lgpatch/rescue")
    assert rescue and "return -10;" in git(series.wt, "show", f"{rescue}:src/main.c")
    # the user now fixes things by hand: the next command must not take that for a killed step and stash it
    series.edit_file("src/main.c", "return 11;", "return 111;")
    _, _, err = series("status", "-C", series.wt)
    assert "set aside" not in err and "return 111;" in (series.wt / "src/main.c").read_text()


def test_a_declarative_step_edited_by_hand_gets_a_patch_step_after_it(series: Project) -> None:
    before = (series.recipes / "patchsets/series/patchset.yaml").read_text()
    series.ok("edit", "series/s2", "-C", series.wt)
    series.edit_file("include/api.h", "int other(void);", "int other(void); /* kept */")
    series.ok("refresh", "-C", series.wt, "-m", "Keep other")
    manifest = (series.recipes / "patchsets/series/patchset.yaml").read_text()
    regex_item = before[before.index("  - id: s2"):before.index("  - id: s3")]
    assert regex_item in manifest, "the regex step must be left exactly as written"
    assert manifest.index("id: s2") < manifest.index("id: keep-other") < manifest.index("id: s3")
    assert _ledger(series.wt) == ["series/s1", "series/s2", "series/keep-other", "series/s3", "series/s4"]
    assert "API_PUBLIC int other(void); /* kept */" in (series.wt / "include/api.h").read_text()


def test_fold_replaces_a_declarative_step_by_a_patch_step(series: Project) -> None:
    series.ok("edit", "series/s2", "-C", series.wt)
    series.edit_file("include/api.h", "int other(void);", "int other(void); /* kept */")
    series.ok("refresh", "-C", series.wt, "--fold")
    manifest = (series.recipes / "patchsets/series/patchset.yaml").read_text()
    assert "regex:" not in manifest and "patch: s2.patch" in manifest
    assert "description: rename the export macro" in manifest
    s2 = (series.recipes / "patchsets/series/s2.patch").read_text()
    assert "+API_PUBLIC int util(void);" in s2 and "/* kept */" in s2  # the regex's effect plus the edit
    assert _ledger(series.wt) == ALL
    assert git(series.wt, "status", "--porcelain") == ""


def test_edit_refuses_to_move_a_dirty_tree(series: Project) -> None:
    series.edit_file("README", "a small", "a big")
    code, _, err = series("edit", "s1", "-C", series.wt)
    assert code == ExitCode.DIRTY and "uncommitted edits" in err
    assert "a big" in (series.wt / "README").read_text()
    assert _ledger(series.wt) == ALL
