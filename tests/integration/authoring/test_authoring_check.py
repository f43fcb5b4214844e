"""`lgpatch check RECIPE --ref OTHER_TAG`: the series against another upstream version, in scratch trees only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import MAIN_C, Project, tag_new_version
from helpers import git, write_patchset

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration


@pytest.fixture
def two_versions(project: Project) -> Project:
    write_patchset(project.recipes, "port", """\
name: port
description: The port.
steps:
  - id: main
    patch: main.patch
  - id: readme
    patch: readme.patch
  - id: rename
    regex: {files: ["**/*.h", "**/*.c"], pattern: API_EXPORT, replace: API_PUBLIC}
  - id: banner
    insert: {file: src/util.c, at: start, text: "/* ported */"}
""", {
        "main.patch": "--- a/src/main.c\n+++ b/src/main.c\n@@ -2,3 +2,3 @@\n int f1(void) { return 1; }\n"
                      "-int f2(void) { return 2; }\n+int f2(void) { return 20; }\n int f3(void) { return 3; }\n",
        "readme.patch": "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-a small project\n+a small ported project\n",
    })
    recipe = project.recipes / "demo.yaml"
    recipe.write_text(recipe.read_text().replace("steps:\n", "steps:\n  - port\n"))
    project.ok("apply", "demo", "-C", project.wt)
    # v1.1: two functions added above f2 (the hunk moves by 2 lines), README gone, one API_EXPORT fewer.
    tag_new_version(project.up, {
        "src/main.c": "int g0(void);\nint g1(void);\n" + MAIN_C,
        "include/api.h": "#pragma once\n#define API_EXPORT\nAPI_EXPORT int util(void);\nint other(void);\n",
    }, removed=("README",))
    return project


def test_check_reports_offset_fails_and_regex_counts(two_versions: Project) -> None:
    p = two_versions
    tree, status = p.tree(), git(p.wt, "status", "--porcelain")
    code, out, err = p("check", "demo", "--ref", "v1.1", "--json")
    assert code == ExitCode.PATCH and "1 of 4 step(s) of demo do not apply to v1.1: port/readme" in err
    report = json.loads(out)
    by_step = {s["step"]: s for s in report["steps"]}
    assert by_step["port/main"]["status"] == "offset"
    assert by_step["port/main"]["hunks"] == [{"file": "src/main.c", "header": "@@ -2,3 +2,3 @@", "offset": 2,
                                               "fuzz": 0}]
    assert by_step["port/readme"]["status"] == "fails"
    assert by_step["port/readme"]["detail"] == "file missing: README"
    assert by_step["port/rename"]["status"] == "exact"
    assert (by_step["port/rename"]["matches_then"], by_step["port/rename"]["matches_now"]) == (4, 3)
    assert by_step["port/banner"]["status"] == "exact"
    assert report["commit"] == git(p.up, "rev-parse", "v1.1")
    assert report["summary"] == {"exact": 2, "offset": 1, "fuzz": 0, "fails": 1, "skipped": 0}
    # nothing of the user's trees is touched
    assert p.tree() == tree and git(p.wt, "status", "--porcelain") == status
    assert git(p.up, "status", "--porcelain") == ""


def test_check_text_output_and_hunk_not_found(two_versions: Project) -> None:
    p = two_versions
    tag_new_version(p.up, {"src/main.c": MAIN_C.replace("int f2(void) { return 2; }\n", "")}, tag="v2.0")
    code, out, _ = p("check", "demo", "--ref", "v2.0")
    assert code == ExitCode.PATCH
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith("  ")}
    assert lines["port/main"].split()[0] == "fails"
    assert "hunk not found: hunk #1 in src/main.c (@@ -2,3 +2,3 @@)" in lines["port/main"]
    assert "matches: 4 then, 3 now (changed)" in lines["port/rename"]  # v2.0 is made on top of v1.1


def test_check_with_source_and_commit(two_versions: Project) -> None:
    p = two_versions
    v11 = git(p.up, "rev-parse", "v1.1")
    code, out, _ = p("check", "demo", "--ref", "v1.1", "--source", p.up, "--commit", v11, "--json")
    assert code == ExitCode.PATCH and json.loads(out)["commit"] == v11
    code, _, err = p("check", "demo", "--ref", "v1.1", "--source", p.up, "--commit", git(p.up, "rev-parse", "v1.0"))
    assert code == ExitCode.SOURCE and "resolves to" in err


def test_check_of_the_pinned_version_is_all_exact(two_versions: Project) -> None:
    code, out, _ = two_versions("check", "demo", "--ref", "v1.0", "--json")
    assert code == 0
    assert {s["status"] for s in json.loads(out)["steps"]} == {"exact"}


def test_port_the_series_forward_editing_the_step_that_fails(two_versions: Project, tmp_path: Path) -> None:
    """check says a step fails on v2.0; pinned to v2.0, `edit` of that step puts the tree before it, the change is
    made by hand, refresh replaces the step, and the series then applies exactly."""
    p = two_versions
    v2 = tag_new_version(p.up, {"src/main.c": MAIN_C.replace("return 2; }", "return 2; } /* v2 */"),
                                "README": "a small project\n"}, tag="v2.0")  # made on v1.1, README back
    recipe = p.recipes / "demo.yaml"
    recipe.write_text(recipe.read_text().replace('ref: "v1.0"', 'ref: "v2.0"')
                      .replace(git(p.up, "rev-parse", "v1.0"), v2))
    wt2 = tmp_path / "wt2"
    code, _, err = p("apply", "demo", "-C", wt2)
    assert code == ExitCode.PATCH and "port/main: hunk #1 of main.patch does not apply" in err
    info = json.loads(p.ok("edit", "port/main", "-C", wt2, "--json"))
    assert info["pending"] is True and info["at"] == "the pristine baseline"
    main = wt2 / "src/main.c"
    main.write_text(main.read_text().replace("return 2; } /* v2 */", "return 20; } /* v2 */"))
    out = p.ok("refresh", "-C", wt2)
    assert "folded into port/main" in out
    assert "+int f2(void) { return 20; } /* v2 */" in (p.recipes / "patchsets/port/main.patch").read_text()
    steps = git(wt2, "log", "--reverse", "--format=%(trailers:key=Lgpatch-Step,valueonly)").split()
    assert steps == ["port/main", "port/readme", "port/rename", "port/banner"]
    assert git(wt2, "status", "--porcelain") == ""
    code, out, _ = p("check", "demo", "--ref", "v2.0", "--json")
    assert code == 0 and {s["status"] for s in json.loads(out)["steps"]} == {"exact"}
