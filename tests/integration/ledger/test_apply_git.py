"""apply / status / revert / export on real git repositories made by the tests (no git mocks)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import (
    LAUNCH_CHECK_STEPS,
    Upstream,
    demo_recipe_head,
    git,
    git_recipe,
    make_upstream,
    write_patchset,
    write_recipe,
)

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration

BOUND_PATCH = """\
--- a/caffe2/utils/GpuDefs.cuh
+++ b/caffe2/utils/GpuDefs.cuh
@@ -4,6 +4,7 @@
 namespace caffe2 {
 
-#if __CUDA_ARCH__ <= 750
+// The warp size is 32 on every NVIDIA architecture.
+#if __CUDA_ARCH__ <= 1290
 constexpr int kWarpSize = 32;
 #else
 #error Unknown __CUDA_ARCH__; please define parameters for compute capability
"""

GPUDEFS = """\
name: gpudefs-arch-bound
description: Widen the __CUDA_ARCH__ guard.
steps:
  - id: widen
    patch: widen.patch
"""

LAUNCH = """\
name: kernel-launch-check
description: Define C10_CUDA_KERNEL_LAUNCH_CHECK.
""" + LAUNCH_CHECK_STEPS


def recipe_text(up: Upstream, extra_steps: str = "", url: str | None = None, commit: str | None = None) -> str:
    return demo_recipe_head(url or up.url(), up.tag, commit or up.commit) + f"""\
  arch: {{type: arch, default: sm_86, choices: [sm_75, sm_86, sm_90]}}
steps:
  - gpudefs-arch-bound
  - patchset: kernel-launch-check
    when: {{cuda: ">=11.0"}}
  - id: rename
    when: {{arch: ">=sm_80"}}
    regex: {{files: ["**/*.h"], exclude: ["c10/macros/*"], pattern: CAFFE2_API, replace: TORCH_API}}
{extra_steps}"""


def write_demo_recipes(d: Path, up: Upstream) -> Path:
    """The demo recipe on `up` and its two patchsets, in the recipe folder `d`."""
    write_recipe(d, recipe_text(up))
    write_patchset(d, "gpudefs-arch-bound", GPUDEFS, {"widen.patch": BOUND_PATCH})
    write_patchset(d, "kernel-launch-check", LAUNCH)
    return d


@pytest.fixture
def recipes(tmp_path: Path, upstream: Upstream) -> Path:
    return write_demo_recipes(tmp_path / "recipes", upstream)


def tree_hash(wt: Path) -> str:
    return git(wt, "rev-parse", "HEAD^{tree}")


def test_apply_every_step_kind_and_status(lgpatch, recipes: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    r = lgpatch("--recipe-path", recipes, "apply", "dm", "--workdir", wt, "--strict")
    assert r.code == 0, r.err
    assert "#if __CUDA_ARCH__ <= 1290" in (wt / "caffe2/utils/GpuDefs.cuh").read_text()
    header = (wt / "c10/cuda/CUDAException.h").read_text()
    assert header.index("C10_CUDA_CHECK_WARN") < header.index("C10_CUDA_KERNEL_LAUNCH_CHECK")
    net = (wt / "caffe2/core/net.h").read_text()
    assert "class TORCH_API NetBase" in net and "CAFFE2_APIS" in net  # word-boundary aware
    assert "CAFFE2_API C10_EXPORT" in (wt / "c10/macros/Export.h").read_text()  # excluded by glob
    assert "3 replacement(s) in 2 file(s)" in r.err
    # One commit per step, each with machine-readable trailers.
    log = git(wt, "log", "--format=%(trailers:key=Lgpatch-Step,valueonly)", "-3").split()
    assert log == ["recipe/rename", "kernel-launch-check/define", "gpudefs-arch-bound/widen"]
    s = lgpatch("status", "-C", wt, "--json")
    status = json.loads(s.out)
    assert [row["state"] for row in status["steps"]] == ["applied"] * 3
    assert status["dirty"] == [] and status["parameters"] == {"cuda": "11.1", "arch": "sm_86"}


def test_when_conditions_select_steps(lgpatch, recipes: Path, tmp_path: Path) -> None:
    r = lgpatch("--recipe-path", recipes, "show", "demo", "--cuda", "10.2", "--arch", "sm_75", "--json")
    plan = {s["step"]: s for s in json.loads(r.out)["steps"]}
    assert plan["gpudefs-arch-bound/widen"]["selected"]
    assert not plan["kernel-launch-check/define"]["selected"]
    assert plan["kernel-launch-check/define"]["reasons"] == ["cuda=10.2 does not match >=11.0"]
    assert not plan["recipe/rename"]["selected"]
    wt = tmp_path / "old"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt, "--cuda", "10.2",
                   "--arch", "sm_75").code == 0
    assert "KERNEL_LAUNCH_CHECK" not in (wt / "c10/cuda/CUDAException.h").read_text()


def test_reapply_is_noop_and_param_change_rewinds(lgpatch, recipes: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt).code == 0
    head = git(wt, "rev-parse", "HEAD")
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt)
    assert r.code == 0 and "already up to date" in r.err
    assert git(wt, "rev-parse", "HEAD") == head
    # cuda 10.2 drops the middle step: rewind to the first step, re-apply the rest.
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt, "--cuda", "10.2")
    assert r.code == 0 and "rewound to gpudefs-arch-bound/widen" in r.err
    steps = git(wt, "log", "--format=%(trailers:key=Lgpatch-Step,valueonly)").split()
    assert steps == ["recipe/rename", "gpudefs-arch-bound/widen"]


def test_changed_step_rewinds_from_that_step(lgpatch, recipes: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt).code == 0
    first = git(wt, "rev-list", "--reverse", "HEAD")
    manifest = recipes / "patchsets/kernel-launch-check/patchset.yaml"
    manifest.write_text(manifest.read_text().replace("cudaGetLastError()", "cudaPeekAtLastError()"))
    status = json.loads(lgpatch("status", "-C", wt, "--json").out)
    assert [row["state"] for row in status["steps"]] == ["applied", "changed", "reapply"]
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt)
    assert r.code == 0 and "1 unchanged" in r.err and "2 step(s) applied" in r.err
    assert "cudaPeekAtLastError" in (wt / "c10/cuda/CUDAException.h").read_text()
    # The unchanged first step kept its commit.
    assert git(wt, "rev-list", "--reverse", "HEAD").split()[:2] == first.split()[:2]


def test_revert_restores_pristine_tree_exactly(lgpatch, recipes: Path, tmp_path: Path, upstream: Upstream) -> None:
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt).code == 0
    assert tree_hash(wt) != git(upstream.path, "rev-parse", "v1.0^{tree}")
    r = lgpatch("revert", "-C", wt)
    assert r.code == 0
    assert tree_hash(wt) == git(upstream.path, "rev-parse", "v1.0^{tree}")
    assert git(wt, "status", "--porcelain") == ""
    for rel in ("caffe2/utils/GpuDefs.cuh", "caffe2/core/net.h", "c10/cuda/CUDAException.h"):
        assert (wt / rel).read_bytes() == (upstream.path / rel).read_bytes()


def test_export_then_git_am_reproduces_the_tree(lgpatch, recipes: Path, tmp_path: Path, upstream: Upstream) -> None:
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt).code == 0
    out = tmp_path / "series"
    assert lgpatch("export", out, "-C", wt).code == 0
    names = (out / "series").read_text().split()
    assert len(names) == 3 and all((out / n).is_file() for n in names)
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(upstream.path), str(fresh))
    git(fresh, "checkout", "-q", upstream.commit)
    git(fresh, "am", "-q", *[str(out / n) for n in names])
    assert tree_hash(fresh) == tree_hash(wt)


def test_dirty_tree_refused_then_stashed(lgpatch, recipes: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt, "--cuda", "10.2").code == 0
    edited = wt / "README.md"
    edited.write_text(edited.read_text() + "// my own edit\n")
    (wt / "notes.txt").write_text("mine\n")
    before = git(wt, "rev-parse", "HEAD")
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt, "--cuda", "11.1")
    assert r.code == ExitCode.DIRTY
    assert "README.md" in r.err and "--stash" in r.err
    assert git(wt, "rev-parse", "HEAD") == before and "my own edit" in edited.read_text()
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt, "--cuda", "11.1", "--stash")
    assert r.code == 0 and "stash" in r.err
    assert "lgpatch: your edits before apply" in git(wt, "stash", "list")
    git(wt, "stash", "pop", "-q")
    assert "my own edit" in edited.read_text() and (wt / "notes.txt").read_text() == "mine\n"
    # revert refuses too while the edits are there.
    assert lgpatch("revert", "-C", wt).code == ExitCode.DIRTY


def test_build_outputs_are_not_user_edits(lgpatch, recipes: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt, "--cuda", "10.2").code == 0
    (wt / "build").mkdir()
    (wt / "build" / "x.o").write_text("obj")
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt).code == 0


def test_moved_tag_is_refused(lgpatch, tmp_path: Path, upstream: Upstream) -> None:
    d = write_demo_recipes(tmp_path / "recipes", upstream)
    (upstream.path / "README.md").write_text("moved\n")
    git(upstream.path, "commit", "-qam", "sneaky")
    git(upstream.path, "tag", "-f", "v1.0")
    r = lgpatch("--recipe-path", d, "apply", "demo", "--workdir", tmp_path / "wt")
    assert r.code == ExitCode.SOURCE
    assert "v1.0 resolves to" in r.err and upstream.commit in r.err
    assert not (tmp_path / "wt").exists()


def test_source_without_tag_but_with_pin_is_used_with_note(lgpatch, recipes: Path, tmp_path: Path,
                                                           upstream: Upstream) -> None:
    local = tmp_path / "local-mirror"
    git(tmp_path, "clone", "-q", "--mirror", str(upstream.path), str(local))
    git(local, "tag", "-d", "v1.0")
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", tmp_path / "wt", "--source", local)
    assert r.code == 0, r.err
    assert "has no ref 'v1.0'" in r.err and upstream.commit[:12] in r.err
    assert git(tmp_path / "wt", "rev-list", "--max-parents=0", "HEAD") == upstream.commit


def test_second_apply_works_offline_from_the_mirror(lgpatch, recipes: Path, tmp_path: Path,
                                                    upstream: Upstream) -> None:
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", tmp_path / "a").code == 0
    # The upstream disappears (no network): a new work tree still comes from the cached mirror.
    upstream.path.rename(tmp_path / "gone")
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", tmp_path / "b", "--offline")
    assert r.code == 0, r.err
    assert tree_hash(tmp_path / "a") == tree_hash(tmp_path / "b")


def test_failing_patch_names_everything_and_leaves_tree(lgpatch, recipes: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt, "--cuda", "10.2").code == 0
    head, tree = git(wt, "rev-parse", "HEAD"), tree_hash(wt)
    bad = BOUND_PATCH.replace("constexpr int kWarpSize = 32;", "constexpr int kWarpSize = 64;")
    (recipes / "patchsets/gpudefs-arch-bound/widen.patch").write_text(bad)
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt)
    assert r.code == ExitCode.PATCH
    for text in ("gpudefs-arch-bound/widen", "widen.patch", "caffe2/utils/GpuDefs.cuh", "@@ -4,6 +4,7 @@",
                 "closest lines found", "constexpr int kWarpSize = 32;"):
        assert text in r.err
    # The rewind already happened (the step changed), so HEAD is at the baseline, clean, nothing half-written.
    assert git(wt, "status", "--porcelain") == ""
    assert "#if __CUDA_ARCH__ <= 750" in (wt / "caffe2/utils/GpuDefs.cuh").read_text()
    assert head != git(wt, "rev-parse", "HEAD") and tree != tree_hash(wt)


SHIFTED_STEP = "  - id: shifted\n    patch: shifted.patch\n"


def test_offset_is_reported_and_strict_refuses_it(lgpatch, tmp_path: Path) -> None:
    files = {"a.c": "".join(f"line {i}\n" for i in range(1, 40))}
    up = make_upstream(tmp_path / "up", files)
    d = tmp_path / "recipes"
    # The hunk says line 10, the text is at line 13: an offset of +3.
    patch = "--- a/a.c\n+++ b/a.c\n@@ -10,3 +10,3 @@\n line 13\n-line 14\n+LINE 14\n line 15\n"
    write_recipe(d, git_recipe("offs", "offset test", up, SHIFTED_STEP))
    (d / "shifted.patch").write_text(patch)
    r = lgpatch("--recipe-path", d, "apply", "offs", "--workdir", tmp_path / "s", "--strict")
    assert r.code == ExitCode.PATCH and "offset +3" in r.err and "strict" in r.err
    assert git(tmp_path / "s", "status", "--porcelain") == ""
    assert "LINE 14" not in (tmp_path / "s/a.c").read_text()
    r = lgpatch("--recipe-path", d, "apply", "offs", "--workdir", tmp_path / "s")
    assert r.code == 0 and "offset +3" in r.err
    assert "LINE 14" in (tmp_path / "s/a.c").read_text()


def test_ci_environment_makes_strict_the_default(lgpatch, tmp_path: Path, monkeypatch) -> None:
    up = make_upstream(tmp_path / "up", {"a.c": "".join(f"line {i}\n" for i in range(1, 20))})
    d = tmp_path / "recipes"
    write_recipe(d, git_recipe("offs", "offset test", up, SHIFTED_STEP))
    (d / "shifted.patch").write_text("--- a/a.c\n+++ b/a.c\n@@ -3,1 +3,1 @@\n-line 5\n+LINE 5\n")
    monkeypatch.setenv("CI", "true")
    assert lgpatch("--recipe-path", d, "apply", "offs", "--workdir", tmp_path / "s").code == ExitCode.PATCH
    assert lgpatch("--recipe-path", d, "apply", "offs", "--workdir", tmp_path / "s", "--no-strict").code == 0


def test_url_patch_offline_with_cache_add(lgpatch, tmp_path: Path, upstream: Upstream) -> None:
    lms = ("--- a/c10/cuda/CUDAException.h\n+++ b/c10/cuda/CUDAException.h\n@@ -1,2 +1,3 @@\n #pragma once\n"
           "+// large model support\n #include <c10/cuda/CUDAMacros.h>\n")
    served = tmp_path / "served" / "lms.patch"
    served.parent.mkdir()
    served.write_text(lms)
    digest = hashlib.sha256(lms.encode()).hexdigest()
    d = tmp_path / "recipes"
    write_recipe(d, git_recipe("lmsdemo", "url-patch test", upstream, f"""\
  - id: ibm-lms
    url-patch: {{url: "http://127.0.0.1:9/lms.patch", sha256: {digest}}}
"""))
    # Offline: the URL cannot be reached, and the error says how to fix that.
    r = lgpatch("--recipe-path", d, "apply", "lmsdemo", "--workdir", tmp_path / "wt")
    assert r.code == ExitCode.SOURCE and "lgpatch cache add" in r.err and digest in r.err
    # A wrong file is refused by `cache add`; the right one makes apply work without the network.
    wrong = tmp_path / "wrong.patch"
    wrong.write_text(lms + "+tampered\n")
    r = lgpatch("--recipe-path", d, "cache", "add", wrong)
    assert r.code == ExitCode.SOURCE and "not expected by any known recipe" in r.err
    r = lgpatch("--recipe-path", d, "cache", "add", served)
    assert r.code == 0 and "lmsdemo: recipe/ibm-lms" in r.err
    r = lgpatch("--recipe-path", d, "apply", "lmsdemo", "--workdir", tmp_path / "wt")
    assert r.code == 0, r.err
    assert "// large model support" in (tmp_path / "wt/c10/cuda/CUDAException.h").read_text()


def test_url_patch_download_is_verified_against_the_pin(lgpatch, tmp_path: Path, upstream: Upstream,
                                                         http_dir) -> None:
    site, base = http_dir
    lms = ("--- a/c10/cuda/CUDAException.h\n+++ b/c10/cuda/CUDAException.h\n@@ -1,2 +1,3 @@\n #pragma once\n"
           "+// large model support\n #include <c10/cuda/CUDAMacros.h>\n")
    (site / "lms.patch").write_text(lms)
    good = hashlib.sha256(lms.encode()).hexdigest()
    d = tmp_path / "recipes"
    text = git_recipe("lmsurl", "url-patch over HTTP", upstream, f"""\
  - id: ibm-lms
    url-patch: {{url: "{base}/lms.patch", sha256: SHA}}
""")
    write_recipe(d, text.replace("SHA", "a" * 64))
    r = lgpatch("--recipe-path", d, "apply", "lmsurl", "--workdir", tmp_path / "bad")
    assert r.code == ExitCode.SOURCE and "but the recipe pins" in r.err
    assert git(tmp_path / "bad", "status", "--porcelain") == ""
    assert "large model" not in (tmp_path / "bad/c10/cuda/CUDAException.h").read_text()
    write_recipe(d, text.replace("SHA", good))
    r = lgpatch("--recipe-path", d, "apply", "lmsurl", "--workdir", tmp_path / "good")
    assert r.code == 0, r.err
    assert "// large model support" in (tmp_path / "good/c10/cuda/CUDAException.h").read_text()
    # Now cached by content: the site can go away.
    (site / "lms.patch").unlink()
    r = lgpatch("--recipe-path", d, "apply", "lmsurl", "--workdir", tmp_path / "again")
    assert r.code == 0, r.err


def test_backport_fetches_file_at_upstream_ref(lgpatch, tmp_path: Path, upstream: Upstream) -> None:
    # Upstream moves on: a later tag has the fixed file; the backport takes it from there at apply time.
    (upstream.path / "caffe2/utils/GpuDefs.cuh").write_text("// fixed upstream\nconstexpr int kWarpSize = 32;\n")
    git(upstream.path, "commit", "-qam", "fix")
    git(upstream.path, "tag", "v1.7.0")
    later = git(upstream.path, "rev-parse", "HEAD")
    d = tmp_path / "recipes"
    write_recipe(d, git_recipe("bp", "backport test", upstream, f"""\
  - id: gpudefs-from-1.7
    backport: {{ref: v1.7.0, commit: {later}, files: [caffe2/utils/GpuDefs.cuh]}}
"""))
    r = lgpatch("--recipe-path", d, "apply", "bp", "--workdir", tmp_path / "wt")
    assert r.code == 0, r.err
    assert (tmp_path / "wt/caffe2/utils/GpuDefs.cuh").read_text().startswith("// fixed upstream")
    # A backport whose pin does not match the tag is refused.
    (d / "demo.yaml").write_text((d / "demo.yaml").read_text().replace(later, upstream.commit))
    r = lgpatch("--recipe-path", d, "apply", "bp", "--workdir", tmp_path / "wt3")
    assert r.code == ExitCode.SOURCE and "v1.7.0 resolves to" in r.err


def test_regex_on_missing_and_count_guard(lgpatch, tmp_path: Path, upstream: Upstream) -> None:
    d = tmp_path / "recipes"
    base = git_recipe("rx", "regex policies", upstream, "")
    write_recipe(d, base + "  - id: none\n    regex: {files: ['**/*.h'], pattern: NOPE_API, replace: X}\n")
    r = lgpatch("--recipe-path", d, "apply", "rx", "--workdir", tmp_path / "a")
    assert r.code == ExitCode.PATCH and "matched nothing" in r.err
    write_recipe(d, base + "  - id: none\n    regex: {files: ['**/*.h'], pattern: NOPE_API, replace: X, "
                 "on_missing: warn}\n")
    r = lgpatch("--recipe-path", d, "apply", "rx", "--workdir", tmp_path / "b")
    assert r.code == 0 and "matched nothing" in r.err
    write_recipe(d, base + "  - id: count\n    regex: {files: ['**/*.h'], pattern: CAFFE2_API, replace: "
                 "TORCH_API, count: 99}\n")
    r = lgpatch("--recipe-path", d, "apply", "rx", "--workdir", tmp_path / "c")
    assert r.code == ExitCode.PATCH and "expected 99 replacement(s)" in r.err
    assert "CAFFE2_API" in (tmp_path / "c/caffe2/core/net.h").read_text()


def test_insert_is_idempotent(lgpatch, tmp_path: Path) -> None:
    up = make_upstream(tmp_path / "up", {"x.h": "#pragma once\n#define A 1\n#define B 2\n"})
    d = tmp_path / "recipes"
    write_recipe(d, git_recipe("ins", "insert test", up, parameters="  ptx_arch: {default: compute_75}\n", steps="""\
  - id: add-b
    insert: {file: x.h, before: '^#define B', text: "#define A2 3"}
  - id: add-end
    insert: {file: x.h, text: "#define ARCH \\"${ptx_arch}\\""}
  - id: add-again
    insert: {file: x.h, at: start, text: "#define A2 3"}
"""))
    r = lgpatch("--recipe-path", d, "apply", "ins", "--workdir", tmp_path / "wt")
    assert r.code == 0, r.err
    assert (tmp_path / "wt/x.h").read_text() == (
        '#pragma once\n#define A 1\n#define A2 3\n#define B 2\n#define ARCH "compute_75"\n')
    assert "already present" in r.err
    # A changed parameter value changes the templated step only.
    r = lgpatch("--recipe-path", d, "apply", "ins", "--workdir", tmp_path / "wt", "--param", "ptx_arch=compute_61")
    assert r.code == 0 and "1 unchanged" in r.err
    assert '#define ARCH "compute_61"' in (tmp_path / "wt/x.h").read_text()


def test_foreign_commits_are_never_moved(lgpatch, recipes: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt).code == 0
    (wt / "mine.txt").write_text("x\n")
    git(wt, "add", "mine.txt")
    git(wt, "commit", "-qm", "my work")
    mine = git(wt, "rev-parse", "HEAD")
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt, "--cuda", "10.2")
    assert r.code == ExitCode.STATE and "did not make" in r.err
    assert git(wt, "rev-parse", "HEAD") == mine


def test_wrong_recipe_for_tree_and_no_tree(lgpatch, recipes: Path, tmp_path: Path) -> None:
    r = lgpatch("status", "-C", tmp_path)
    assert r.code == ExitCode.STATE and "not inside an lgpatch work tree" in r.err
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt).code == 0
    write_recipe(recipes, (recipes / "demo.yaml").read_text().replace("name: demo", "name: other")
                 .replace("aliases: [dm]", "aliases: []"), "other.yaml")
    r = lgpatch("--recipe-path", recipes, "apply", "other", "--workdir", wt)
    assert r.code == ExitCode.STATE and "made for recipe demo" in r.err


def test_existing_folder_that_is_not_a_work_tree_is_refused(lgpatch, recipes: Path, tmp_path: Path) -> None:
    other = tmp_path / "mine"
    other.mkdir()
    (other / "important.txt").write_text("keep me\n")
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", other)
    assert r.code == ExitCode.STATE and "not an lgpatch work tree" in r.err
    assert (other / "important.txt").read_text() == "keep me\n" and not (other / ".git").exists()


def test_changed_pin_on_existing_tree_is_refused(lgpatch, recipes: Path, tmp_path: Path, upstream: Upstream) -> None:
    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt).code == 0
    (upstream.path / "README.md").write_text("v1.1\n")
    git(upstream.path, "commit", "-qam", "next")
    git(upstream.path, "tag", "v1.1")
    newer = git(upstream.path, "rev-parse", "HEAD")
    text = (recipes / "demo.yaml").read_text().replace(upstream.commit, newer).replace("ref: v1.0", "ref: v1.1")
    (recipes / "demo.yaml").write_text(text)
    r = lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt)
    assert r.code == ExitCode.STATE and "new --workdir" in r.err


def test_second_process_is_refused_while_the_lock_is_held(lgpatch, recipes: Path, tmp_path: Path) -> None:
    from helpers import run_cli_subprocess

    from legacy_gpu_patch.ledger.worktree import WorkTree

    wt = tmp_path / "wt"
    assert lgpatch("--recipe-path", recipes, "apply", "demo", "--workdir", wt).code == 0
    holder = WorkTree.open(wt)  # exclusive, as apply/revert hold it
    try:
        proc = run_cli_subprocess("status", "-C", wt)
        assert proc.returncode == ExitCode.STATE and "another lgpatch process" in proc.stderr
    finally:
        holder.release_lock()
    reader = WorkTree.open(wt, shared=True)  # as a long build or verify holds it
    try:
        assert run_cli_subprocess("status", "-C", wt).returncode == 0  # readers share
        proc = run_cli_subprocess("--recipe-path", recipes, "apply", "demo", "--workdir", wt, "--cuda", "10.2")
        assert proc.returncode == ExitCode.STATE and "another lgpatch process" in proc.stderr
    finally:
        reader.release_lock()
    assert run_cli_subprocess("status", "-C", wt).returncode == 0


def test_submodules_follow_the_recipe_and_the_flag(lgpatch, tmp_path: Path, monkeypatch) -> None:
    # git ≥ 2.38 refuses file:// submodules unless allowed; this is test plumbing, not lgpatch behaviour.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.file.allow")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "always")
    sub = make_upstream(tmp_path / "cub", {"cub/cub.cuh": "// cub\n"})
    up = make_upstream(tmp_path / "up", {"README.md": "top\n"}, tag="v0")
    git(up.path, "submodule", "add", "-q", sub.url(), "third_party/cub")
    git(up.path, "commit", "-qm", "add submodule")
    git(up.path, "tag", "v1.0")
    tagged = Upstream(up.path, git(up.path, "rev-parse", "HEAD"), "v1.0")
    d = tmp_path / "recipes"
    note = '  - id: note\n    insert: {file: README.md, text: "patched"}\n'
    write_recipe(d, git_recipe("subm", "submodule fixture", tagged, note, git_options=", submodules: true"))
    assert lgpatch("--recipe-path", d, "apply", "subm", "--workdir", tmp_path / "with").code == 0
    assert (tmp_path / "with/third_party/cub/cub/cub.cuh").read_text() == "// cub\n"
    assert lgpatch("--recipe-path", d, "apply", "subm", "--workdir", tmp_path / "without",
                   "--no-submodules").code == 0
    assert not (tmp_path / "without/third_party/cub/cub").exists()
