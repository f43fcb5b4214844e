"""patchfile.compute on real files in temporary folders: exact, offset, fuzz, failures, git features, line endings.

Where git can produce or apply the same patch, the test uses real git (`git diff`, `git format-patch`, `git apply`)
to make the input and to cross-check the result, so "what git would do" is never guessed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import git, write_files

from legacy_gpu_patch.errors import PatchError, UnsafePathError
from legacy_gpu_patch.ledger.patchfile import Origin, PatchResult, closest_lines, compute, write_changes

ORIGIN = Origin("gpudefs-arch-bound", "widen", "widen.patch")
NUMBERED = "".join(f"L{i}\n" for i in range(1, 31))


def apply(root: Path, text: str, **kw) -> PatchResult:
    result = compute(root, text, ORIGIN, **kw)
    write_changes(root, result.changes)
    return result


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (outside .git) with its bytes: to show that nothing was written."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for f in filenames:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def git_made_patch(tmp: Path, before: dict[str, str | bytes], change, *diff_args: str) -> tuple[Path, str]:
    """A repo with `before` committed; `change(root)` edits it; returns (pristine tree, `git diff` text)."""
    repo = tmp / "gitrepo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "core.autocrlf", "false")
    write_files(repo, before)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "before")
    change(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "after\n\nbody of the commit message")
    text = _git_bytes(repo, "format-patch", "-1", "--stdout", *diff_args).decode("utf-8", errors="surrogateescape")
    git(repo, "checkout", "-q", "HEAD~1")
    tree = tmp / "tree"
    shutil.copytree(repo, tree, ignore=shutil.ignore_patterns(".git"))
    return tree, text


def _git_bytes(cwd: Path, *args: str) -> bytes:
    import subprocess

    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


def git_apply_result(tmp: Path, tree: Path, text: str) -> dict[str, bytes]:
    """What real `git apply` makes of the same patch on a copy of the tree."""
    copy = tmp / "git-apply-copy"
    shutil.copytree(tree, copy)
    git(copy, "init", "-q")
    (copy / "p.patch").write_bytes(text.encode("utf-8", errors="surrogateescape"))
    git(copy, "apply", "p.patch")
    (copy / "p.patch").unlink()
    return snapshot(copy)


# ------------------------------------------------------------------------------------------- exact / offset / fuzz

HUNK_AT_8 = """\
--- a/f.c
+++ b/f.c
@@ -5,7 +5,7 @@ section text
 L5
 L6
 L7
-L8
+EIGHT
 L9
 L10
 L11
"""


def test_exact_apply(tmp_path: Path) -> None:
    write_files(tmp_path, {"f.c": NUMBERED})
    result = apply(tmp_path, HUNK_AT_8)
    assert (tmp_path / "f.c").read_text() == NUMBERED.replace("L8\n", "EIGHT\n")
    assert [(h.file, h.header, h.offset, h.fuzz) for h in result.hunks] == [
        ("f.c", "@@ -5,7 +5,7 @@ section text", 0, 0)]
    assert result.inexact == []


@pytest.mark.parametrize("shift", [3, -3, 12])
def test_offset_is_reported(tmp_path: Path, shift: int) -> None:
    if shift > 0:
        content = "".join(f"extra {i}\n" for i in range(shift)) + NUMBERED
    else:
        content = NUMBERED.split("L1\n", 1)[1].replace("L2\nL3\nL4\n", "", 1)  # drop 4 lines, the hunk moves up
        shift = -4
    write_files(tmp_path, {"f.c": content})
    result = apply(tmp_path, HUNK_AT_8)
    assert [(h.offset, h.fuzz) for h in result.hunks] == [(shift, 0)]
    assert result.inexact == result.hunks
    assert "EIGHT\n" in (tmp_path / "f.c").read_text() and "L8\n" not in (tmp_path / "f.c").read_text()


@pytest.mark.parametrize(("edited", "fuzz"), [
    (["L5"], 1), (["L11"], 1), (["L5", "L11"], 1), (["L5", "L6"], 2), (["L10", "L11"], 2),
])
def test_fuzz_is_reported_and_keeps_the_files_own_context(tmp_path: Path, edited: list[str], fuzz: int) -> None:
    content = NUMBERED
    for line in edited:
        content = content.replace(f"{line}\n", f"{line} edited locally\n")
    write_files(tmp_path, {"f.c": content})
    result = apply(tmp_path, HUNK_AT_8)
    assert [(h.offset, h.fuzz) for h in result.hunks] == [(0, fuzz)]
    # The changed line is changed; the context lines the hunk ignored keep the file's text (as GNU patch does).
    assert (tmp_path / "f.c").read_text() == content.replace("L8\n", "EIGHT\n")


def test_offset_and_fuzz_together(tmp_path: Path) -> None:
    content = "header\nheader\n" + NUMBERED.replace("L5\n", "L5 edited\n")
    write_files(tmp_path, {"f.c": content})
    result = apply(tmp_path, HUNK_AT_8)
    assert [(h.offset, h.fuzz) for h in result.hunks] == [(2, 1)]


def test_fuzz_beyond_the_limit_fails(tmp_path: Path) -> None:
    content = NUMBERED.replace("L5\n", "x\n").replace("L6\n", "y\n").replace("L7\n", "z\n")
    write_files(tmp_path, {"f.c": content})
    with pytest.raises(PatchError, match=r"hunk #1 of widen\.patch does not apply to f\.c"):
        compute(tmp_path, HUNK_AT_8, ORIGIN)
    # max_fuzz=0 turns a fuzz-1 match into a failure too.
    write_files(tmp_path, {"f.c": NUMBERED.replace("L5\n", "x\n")})
    with pytest.raises(PatchError):
        compute(tmp_path, HUNK_AT_8, ORIGIN, max_fuzz=0)
    assert compute(tmp_path, HUNK_AT_8, ORIGIN, max_fuzz=1).hunks[0].fuzz == 1


def test_two_hunks_apply_in_order_with_their_own_offsets(tmp_path: Path) -> None:
    patch = (
        "--- a/f.c\n+++ b/f.c\n"
        "@@ -2,3 +2,3 @@\n L2\n-L3\n+THREE\n L4\n"
        "@@ -20,3 +20,4 @@\n L20\n L21\n+TWENTY-ONE AND A HALF\n L22\n"
    )
    content = NUMBERED.replace("L10\n", "L10\nnew a\nnew b\n")  # the second hunk moves by +2
    write_files(tmp_path, {"f.c": content})
    result = apply(tmp_path, patch)
    assert [(h.offset, h.fuzz) for h in result.hunks] == [(0, 0), (2, 0)]
    text = (tmp_path / "f.c").read_text()
    assert "THREE\n" in text and "L21\nTWENTY-ONE AND A HALF\nL22\n" in text


def test_hunk_matching_nearest_to_its_place(tmp_path: Path) -> None:
    # The same text twice: the hunk applies to the copy nearest to where it says, not the first one.
    block = "int x;\nint y;\nint z;\n"
    content = block + "".join(f"pad {i}\n" for i in range(20)) + block
    write_files(tmp_path, {"f.c": content})
    patch = "--- a/f.c\n+++ b/f.c\n@@ -24,3 +24,3 @@\n int x;\n-int y;\n+long y;\n int z;\n"
    result = apply(tmp_path, patch)
    assert result.hunks[0].offset == 0
    text = (tmp_path / "f.c").read_text()
    assert text.startswith(block) and text.endswith("int x;\nlong y;\nint z;\n")


# ------------------------------------------------------------------------------------------- failures

GPUDEFS = (
    "#ifndef CAFFE2_UTILS_GPU_DEFS_H_\n#define CAFFE2_UTILS_GPU_DEFS_H_\n\nnamespace caffe2 {\n\n"
    "#if __CUDA_ARCH__ <= 750\nconstexpr int kWarpSize = 32;\n#else\n"
    "#error Unknown __CUDA_ARCH__; please define parameters for compute capability\n#endif\n\n"
    "} // namespace caffe2\n\n#endif\n"
)
WIDEN_WRONG = """\
--- a/caffe2/utils/GpuDefs.cuh
+++ b/caffe2/utils/GpuDefs.cuh
@@ -4,6 +4,7 @@ namespace caffe2 {
 namespace caffe2 {
\x20
-#if __CUDA_ARCH__ <= 700
+// The warp size is 32 on every NVIDIA architecture.
+#if __CUDA_ARCH__ <= 1290
 constexpr int kWarpSize = 64;
 #else
 #error Unknown __CUDA_ARCH__; please define parameters for compute capability
"""


def test_failure_message_names_everything(tmp_path: Path) -> None:
    write_files(tmp_path, {"caffe2/utils/GpuDefs.cuh": GPUDEFS})
    with pytest.raises(PatchError) as info:
        compute(tmp_path, WIDEN_WRONG, ORIGIN)
    message = info.value.message
    assert message.startswith(
        "gpudefs-arch-bound/widen: hunk #1 of widen.patch does not apply to caffe2/utils/GpuDefs.cuh\n")
    assert "  hunk: @@ -4,6 +4,7 @@ namespace caffe2 {\n" in message
    assert "expected (old side of the hunk):" in message and "#if __CUDA_ARCH__ <= 700" in message
    # The closest lines of the file, with their real 1-based line numbers.
    assert "closest lines found in caffe2/utils/GpuDefs.cuh:" in message
    assert "         6: #if __CUDA_ARCH__ <= 750\n" in message
    assert "         7: constexpr int kWarpSize = 32;\n" in message
    assert "the tree was left as it was before this step" in message
    assert info.value.hint and "refresh the patch" in info.value.hint


def test_failure_in_a_later_hunk_names_that_hunk(tmp_path: Path) -> None:
    write_files(tmp_path, {"f.c": NUMBERED})
    patch = ("--- a/f.c\n+++ b/f.c\n@@ -2,3 +2,3 @@\n L2\n-L3\n+THREE\n L4\n"
             "@@ -20,3 +20,3 @@\n L20\n-NOT THERE\n+X\n L22\n")
    with pytest.raises(PatchError, match=r"hunk #2 of widen.patch does not apply to f\.c\n  hunk: @@ -20,3 \+20,3 @@"):
        compute(tmp_path, patch, ORIGIN)
    assert (tmp_path / "f.c").read_text() == NUMBERED


def test_closest_lines_falls_back_to_similarity() -> None:
    lines = [f"line {i}\n" for i in range(100)]
    lines[40] = "constexpr int kWarpSize = 32;\n"
    at, near = closest_lines(lines, ["constexpr int kWarpSize = 64;\n"], 38)
    assert (at, near) == (41, ["constexpr int kWarpSize = 32;\n"])
    assert closest_lines([], ["x\n"], 0) == (1, [])


def test_several_files_one_failing_writes_nothing(tmp_path: Path) -> None:
    write_files(tmp_path, {"a.c": NUMBERED, "b.c": NUMBERED, "c.c": NUMBERED})
    patch = (
        "--- a/a.c\n+++ b/a.c\n@@ -1,2 +1,2 @@\n-L1\n+ONE\n L2\n"
        "--- /dev/null\n+++ b/new.c\n@@ -0,0 +1 @@\n+new\n"
        "--- a/b.c\n+++ b/b.c\n@@ -1,2 +1,2 @@\n-NOPE\n+ONE\n L2\n"
        "--- a/c.c\n+++ b/c.c\n@@ -1,2 +1,2 @@\n-L1\n+ONE\n L2\n"
    )
    before = snapshot(tmp_path)
    with pytest.raises(PatchError, match=r"does not apply to b\.c"):
        compute(tmp_path, patch, ORIGIN)
    assert snapshot(tmp_path) == before  # no file changed, none created, no temporary files left


@pytest.mark.parametrize(("patch", "problem"), [
    ("--- a/missing.c\n+++ b/missing.c\n@@ -1 +1 @@\n-a\n+b\n", "changes missing.c, which does not exist"),
    ("--- /dev/null\n+++ b/f.c\n@@ -0,0 +1 @@\n+x\n", "creates f.c, which already exists"),
    ("--- a/f.c\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-L1\n-L2\n", "deletes f.c, but the file holds more"),
    ("", "contains no file changes"),
    ("just some words\nno diff here\n", "contains no file changes"),
    ("--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,3 @@\n-L1\n+X\n", "is not a valid unified diff"),  # hunk cut short
    ("diff --git a/f.bin b/f.bin\nindex 1..2 100644\nGIT binary patch\nliteral 1\nIcmZpc00000\n\n",
     "binary diff"),
])
def test_bad_patches_are_patch_errors(tmp_path: Path, patch: str, problem: str) -> None:
    write_files(tmp_path, {"f.c": NUMBERED})
    before = snapshot(tmp_path)
    with pytest.raises(PatchError) as info:
        compute(tmp_path, patch, ORIGIN)
    assert problem in info.value.message
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------- files appear / vanish


def test_new_file_with_mode(tmp_path: Path) -> None:
    def change(root: Path) -> None:
        write_files(root, {"tools/run.sh": "#!/bin/sh\necho hi\n", "include/new.h": "#pragma once\n"})
        os.chmod(root / "tools/run.sh", 0o755)

    tree, text = git_made_patch(tmp_path, {"README": "x\n"}, change)
    result = apply(tree, text)
    assert {c.path for c in result.changes} == {"tools/run.sh", "include/new.h"}
    assert (tree / "include/new.h").read_text() == "#pragma once\n"
    assert (tree / "tools/run.sh").stat().st_mode & 0o777 == 0o755
    assert (tree / "include/new.h").stat().st_mode & 0o777 == 0o644


def test_deleted_file(tmp_path: Path) -> None:
    tree, text = git_made_patch(tmp_path, {"old.h": "a\nb\n", "keep.h": "k\n"}, lambda r: (r / "old.h").unlink())
    assert "deleted file mode" in text
    expected = git_apply_result(tmp_path, tree, text)
    apply(tree, text)
    assert not (tree / "old.h").exists()
    assert snapshot(tree) == expected


def test_rename_with_changes_git_format(tmp_path: Path) -> None:
    body = "".join(f"line {i}\n" for i in range(20))

    def change(root: Path) -> None:
        (root / "src/old_name.cu").rename(root / "src/new_name.cu")
        p = root / "src/new_name.cu"
        p.write_text(p.read_text().replace("line 10\n", "line ten\n"))

    tree, text = git_made_patch(tmp_path, {"src/old_name.cu": body}, change, "-M")
    assert "rename from src/old_name.cu" in text
    expected = git_apply_result(tmp_path, tree, text)
    result = apply(tree, text)
    assert [(c.path, c.rename_from) for c in result.changes] == [
        ("src/old_name.cu", None), ("src/new_name.cu", "src/old_name.cu")]
    assert snapshot(tree) == expected


def test_pure_rename_and_mode_change(tmp_path: Path) -> None:
    def change(root: Path) -> None:
        (root / "a.h").rename(root / "b.h")
        os.chmod(root / "run.sh", 0o755)

    tree, text = git_made_patch(tmp_path, {"a.h": "same\n", "run.sh": "echo\n"}, change, "-M")
    assert "similarity index 100%" in text and "new mode 100755" in text
    apply(tree, text)
    assert not (tree / "a.h").exists() and (tree / "b.h").read_text() == "same\n"
    assert (tree / "run.sh").stat().st_mode & 0o777 == 0o755


def test_rename_onto_an_existing_file_is_refused(tmp_path: Path) -> None:
    # git apply refuses this ("already exists in working directory"); silently overwriting b.h would lose it.
    write_files(tmp_path, {"a.h": "same\n", "b.h": "precious\n"})
    patch = "diff --git a/a.h b/b.h\nsimilarity index 100%\nrename from a.h\nrename to b.h\n"
    with pytest.raises(PatchError, match=r"b\.h"):
        compute(tmp_path, patch, ORIGIN)


# ------------------------------------------------------------------------------------------- end of file, line endings


@pytest.mark.parametrize(("before", "after"), [
    ("a\nb", "a\nB\n"),  # old side has no final newline
    ("a\nb\n", "a\nB"),  # new side has none
    ("a\nb", "a\nB"),  # neither
    ("a\nb", "a\nb\nc"),  # append after a last line without newline
])
def test_no_newline_at_end_of_file(tmp_path: Path, before: str, after: str) -> None:
    tree, text = git_made_patch(tmp_path, {"f.txt": before}, lambda r: (r / "f.txt").write_text(after))
    assert "\\ No newline at end of file" in text
    expected = git_apply_result(tmp_path, tree, text)
    apply(tree, text)
    assert (tree / "f.txt").read_bytes() == after.encode() == expected["f.txt"]


def test_crlf_file_with_crlf_patch(tmp_path: Path) -> None:
    before = {"w.c": b"one\r\ntwo\r\nthree\r\n", "e.c": b"a\r\nb"}

    def change(root: Path) -> None:
        (root / "w.c").write_bytes(b"one\r\nTWO\r\nthree\r\nfour\r\n")
        (root / "e.c").write_bytes(b"a\r\nB\r\n")

    tree, text = git_made_patch(tmp_path, before, change)
    assert "\r\n" in text
    expected = git_apply_result(tmp_path, tree, text)
    apply(tree, text)
    assert (tree / "w.c").read_bytes() == b"one\r\nTWO\r\nthree\r\nfour\r\n" == expected["w.c"]
    assert (tree / "e.c").read_bytes() == b"a\r\nB\r\n" == expected["e.c"]


def test_lf_patch_on_crlf_file_fails_cleanly(tmp_path: Path) -> None:
    write_files(tmp_path, {"w.c": b"one\r\ntwo\r\nthree\r\n"})
    with pytest.raises(PatchError, match=r"does not apply to w\.c"):
        compute(tmp_path, "--- a/w.c\n+++ b/w.c\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n", ORIGIN)
    assert (tmp_path / "w.c").read_bytes() == b"one\r\ntwo\r\nthree\r\n"


def test_non_utf8_bytes_survive(tmp_path: Path) -> None:
    write_files(tmp_path, {"l1.c": b"/* caf\xe9 */\nint a;\nint b;\n"})
    apply(tmp_path, "--- a/l1.c\n+++ b/l1.c\n@@ -2,2 +2,2 @@\n int a;\n-int b;\n+long b;\n")
    assert (tmp_path / "l1.c").read_bytes() == b"/* caf\xe9 */\nint a;\nlong b;\n"


def test_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    write_files(tmp_path, {"run.sh": "echo 1\n"})
    os.chmod(tmp_path / "run.sh", 0o755)
    apply(tmp_path, "--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n-echo 1\n+echo 2\n")
    assert (tmp_path / "run.sh").stat().st_mode & 0o777 == 0o755


# ------------------------------------------------------------------------------------------- input formats


def test_git_format_patch_with_mail_header(tmp_path: Path) -> None:
    def change(root: Path) -> None:
        (root / "f.c").write_text(NUMBERED.replace("L8\n", "EIGHT\n"))
        (root / "g.c").write_text("-- \nnot a signature\n")

    tree, text = git_made_patch(tmp_path, {"f.c": NUMBERED, "g.c": "x\n"}, change)
    assert text.startswith("From ") and "Subject: [PATCH] after" in text and "\n-- \n" in text
    expected = git_apply_result(tmp_path, tree, text)
    result = apply(tree, text)
    assert {c.path for c in result.changes} == {"f.c", "g.c"}
    assert snapshot(tree) == expected


def test_gnu_diff_with_timestamps_and_strip_levels(tmp_path: Path) -> None:
    write_files(tmp_path, {"src/f.c": NUMBERED})
    stamped = ("--- old/src/f.c\t2020-01-01 00:00:00.000000000 +0000\n"
               "+++ new/src/f.c\t2020-01-02 00:00:00.000000000 +0000\n"
               "@@ -1,2 +1,2 @@\n-L1\n+ONE\n L2\n")
    apply(tmp_path, stamped)
    assert (tmp_path / "src/f.c").read_text().startswith("ONE\nL2\n")
    apply(tmp_path, "--- src/f.c\n+++ src/f.c\n@@ -1,2 +1,2 @@\n-ONE\n+1\n L2\n", strip=0)
    assert (tmp_path / "src/f.c").read_text().startswith("1\nL2\n")
    apply(tmp_path, "--- x/y/src/f.c\n+++ x/y/src/f.c\n@@ -1,2 +1,2 @@\n-1\n+uno\n L2\n", strip=2)
    assert (tmp_path / "src/f.c").read_text().startswith("uno\nL2\n")


def test_quoted_file_names(tmp_path: Path) -> None:
    names = ["café.h", "tab\tname.h", 'quote"name.h', "with space.h"]

    def change(root: Path) -> None:
        for n in names:
            (root / n).write_text("after\n")

    tree, text = git_made_patch(tmp_path, {n: "before\n" for n in names}, change)
    assert '"a/caf\\303\\251.h"' in text and '"a/tab\\tname.h"' in text and '"a/quote\\"name.h"' in text
    result = apply(tree, text)
    assert sorted(c.path for c in result.changes) == sorted(names)
    assert all((tree / n).read_text() == "after\n" for n in names)


def test_quoted_names_with_raw_utf8(tmp_path: Path) -> None:
    # With core.quotepath=false (a common setting) git quotes a name only for its tab or quote and leaves UTF-8 as
    # is; a latin-1 round trip when unquoting once turned 'é' into a lone surrogate.
    names = ["é\tx.h", "数据\tx.h"]
    write_files(tmp_path, {n: "x\n" for n in names})
    quoted = [n.replace("\t", "\\t") for n in names]  # git's quoting of the tab; the UTF-8 stays raw
    patch = "".join(
        f'diff --git "a/{q}" "b/{q}"\n--- "a/{q}"\n+++ "b/{q}"\n@@ -1 +1 @@\n-x\n+y\n' for q in quoted
    )
    result = apply(tmp_path, patch)
    assert sorted(c.path for c in result.changes) == sorted(names)


def test_backslash_in_a_file_name_is_not_a_folder(tmp_path: Path) -> None:
    # A backslash is an ordinary file-name character on POSIX; rewriting it to '/' once made a patch for
    # `dir\name.h` change the different file `dir/name.h`.
    write_files(tmp_path, {"dir\\name.h": "same\n", "dir/name.h": "same\n"})
    patch = '--- "a/dir\\\\name.h"\n+++ "b/dir\\\\name.h"\n@@ -1 +1 @@\n-same\n+patched\n'
    try:
        result = compute(tmp_path, patch, ORIGIN)
    except UnsafePathError:
        return  # refusing such a name is acceptable; changing another file is not
    assert [c.path for c in result.changes] == ["dir\\name.h"]


def test_same_file_in_two_sections(tmp_path: Path) -> None:
    write_files(tmp_path, {"f.c": NUMBERED})
    patch = ("--- a/f.c\n+++ b/f.c\n@@ -1,2 +1,2 @@\n-L1\n+ONE\n L2\n"
             "--- a/f.c\n+++ b/f.c\n@@ -1,2 +1,2 @@\n-ONE\n+UNO\n L2\n")
    apply(tmp_path, patch)
    assert (tmp_path / "f.c").read_text().startswith("UNO\nL2\n")


def test_failing_huge_hunk_shows_its_ends_not_all_of_it(tmp_path: Path) -> None:
    # A 200k-line hunk whose old side differs from the file in one line in the middle: the error shows the first
    # and last lines of the hunk, the closest lines, and where the rest is: a few dozen lines, not 400,008.
    n = 200_000
    write_files(tmp_path, {"big.c": "".join(f"line {i}\n" for i in range(n))})
    old = [f"line {i}\n" for i in range(n)]
    old[n // 2] = "not in the file\n"
    patch = (f"--- a/big.c\n+++ b/big.c\n@@ -1,{n} +1,{n} @@\n" + "".join(" " + ln for ln in old[:-1])
             + f"-{old[-1]}+changed\n")
    with pytest.raises(PatchError) as info:
        compute(tmp_path, patch, ORIGIN)
    message = info.value.message
    assert len(message.splitlines()) < 60, len(message.splitlines())
    assert "line 0\n" in message and f"line {n - 1}\n" in message  # the hunk's ends
    assert "line 100000" not in message  # its middle is left out …
    assert f"not shown: the whole hunk ({n} old line(s)) is lines 4-{n + 4} of widen.patch" in message  # … found
    assert f"lines 1-{n} of big.c in the work tree" in message
    assert (tmp_path / "big.c").read_text().startswith("line 0\n")
