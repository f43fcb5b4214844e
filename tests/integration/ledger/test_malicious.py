"""Malicious patches, recipes and sdists are refused before anything is written, inside or outside the tree.

Every case checks the same three things: the exit code (UNSAFE, or CONFIG where the schema already rejects the
recipe), the work tree exactly as it was (HEAD, tree hash, `git status --porcelain` empty), and the folder outside
the tree byte-for-byte unchanged. The fixture upstream commits symbolic links that point out of the tree.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest
from helpers import TORCHLIKE, Upstream, git, make_upstream, write_recipe

from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration

TARGET_H = "#pragma once\nclass CAFFE2_API Outside {};\n"


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Files (bytes), links (their target) and folders under root, skipping root/.git (and only that one)."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


class World:
    """tmp/outside (must never change), tmp/upstream (with links out of the tree), tmp/recipes, tmp/wt."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.outside = tmp / "outside"
        self.outside.mkdir()
        (self.outside / "sentinel.txt").write_text("do not touch\n")
        (self.outside / "target.h").write_text(TARGET_H)
        self.recipes = tmp / "recipes"
        self.wt = tmp / "wt"
        self.upstream = make_upstream(tmp / "upstream", {**TORCHLIKE, "inc/real.h": "int CAFFE2_API r;\n"})
        up = self.upstream.path
        # Links committed in the upstream: a folder link out by absolute path, one out by '..', a file link out,
        # and a harmless link inside the tree.
        os.symlink(str(self.outside), up / "escape_abs")
        os.symlink("../outside", up / "escape_rel")
        os.symlink("../../outside/target.h", up / "inc/evil.h")
        os.symlink("real.h", up / "inc/alias.h")
        git(up, "add", "-A")
        git(up, "commit", "-qm", "links")
        git(up, "tag", "-f", "v1.0")
        self.upstream = Upstream(up, git(up, "rev-parse", "HEAD"), "v1.0")
        self.before_outside = snapshot(self.outside)
        self.top = sorted(p.name for p in tmp.iterdir())

    def recipe(self, steps: str, source: str | None = None) -> None:
        up = self.upstream
        source = source or f'git: {{url: "{up.url()}", ref: v1.0, commit: {up.commit}}}'
        write_recipe(self.recipes, f"name: evil\ndescription: malicious steps\nsource:\n  {source}\nsteps:\n{steps}",
                     "evil.yaml")

    def sdist_recipe(self, url: str, archive: bytes) -> None:
        self.recipe("  - id: noop\n    regex: {files: ['*.py'], pattern: never, replace: x, on_missing: ignore}\n",
                    source=f"sdist: {{url: '{url}', sha256: {hashlib.sha256(archive).hexdigest()}}}")

    def patch_recipe(self, patch: str) -> None:
        self.recipes.mkdir(parents=True, exist_ok=True)
        (self.recipes / "evil.patch").write_text(patch)
        self.recipe("  - id: evil\n    patch: evil.patch\n")

    def assert_pristine_tree(self) -> None:
        wt, up = self.wt, self.upstream
        assert git(wt, "rev-parse", "HEAD") == up.commit
        assert git(wt, "rev-parse", "HEAD^{tree}") == git(up.path, "rev-parse", "HEAD^{tree}")
        assert git(wt, "status", "--porcelain", "--untracked-files=all", "--ignored") == ""
        assert snapshot(wt) == snapshot(up.path)

    def assert_outside_untouched(self) -> None:
        assert snapshot(self.outside) == self.before_outside
        assert sorted(p.name for p in self.tmp.iterdir() if p.name not in ("recipes", "wt", "site")) == [
            n for n in self.top if n not in ("recipes", "wt", "site")]


def assert_refusal_message(err: str) -> None:
    """One paragraph from lgpatch (after the step's ✗ line), no traceback."""
    assert "Traceback" not in err
    assert err.count("lgpatch: unsafe path refused:") == 1, err
    lines = err.splitlines()
    assert lines[-1].startswith("lgpatch: unsafe path refused:") or lines[-2].startswith("lgpatch: unsafe"), err


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def new_file(path: str, body: str = "+evil\n") -> str:
    return f"--- /dev/null\n+++ {path}\n@@ -0,0 +1 @@\n{body}"


def patch_cases(outside: Path) -> dict[str, str]:
    return {
        "absolute": new_file(f"{outside}/planted.txt"),
        "absolute-existing": f"--- {outside}/sentinel.txt\n+++ {outside}/sentinel.txt\n@@ -1 +1 @@\n"
                             "-do not touch\n+touched\n",
        "dotdot": new_file("b/../outside/planted.txt"),
        "dotdot-deep": new_file("b/caffe2/../../outside/planted.txt"),
        "dotdot-stripped": new_file("../outside/planted.txt"),  # -p1 must not strip the '..' away
        "git-hook": new_file("b/.git/hooks/post-checkout", "+#!/bin/sh\n"),
        "git-config": "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1,2 @@\n [core]\n+\tfsmonitor = evil\n",
        "git-case": new_file("b/.GIT/hooks/post-checkout"),
        "nested-git": new_file("b/caffe2/.git/hooks/post-checkout", "+#!/bin/sh\n"),
        "symlink-dir-abs": new_file("b/escape_abs/planted.txt"),
        "symlink-dir-rel": new_file("b/escape_rel/planted.txt"),
        "symlink-file": "--- a/inc/evil.h\n+++ b/inc/evil.h\n@@ -1,2 +1,2 @@\n #pragma once\n"
                        "-class CAFFE2_API Outside {};\n+class TORCH_API Outside {};\n",
        "symlink-delete": "--- a/escape_rel/sentinel.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-do not touch\n",
        "symlink-replace": "--- a/escape_rel\n+++ b/escape_rel\n@@ -1 +1 @@\n-../outside\n"
                           "\\ No newline at end of file\n+../outside/sentinel.txt\n\\ No newline at end of file\n",
        # The first file section is harmless: the escape in the second must still stop the whole patch.
        "second-file": "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-fixture tree\n+changed\n"
                       + new_file("b/escape_rel/planted.txt"),
    }


CASE_NAMES = list(patch_cases(Path("/x")))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_malicious_patch_is_refused(lgpatch, world: World, case: str) -> None:
    world.patch_recipe(patch_cases(world.outside)[case])
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == ExitCode.UNSAFE, r.err
    assert_refusal_message(r.err)
    world.assert_pristine_tree()
    world.assert_outside_untouched()


def test_refusal_after_good_steps_keeps_them(lgpatch, world: World) -> None:
    (world.recipes / "evil.patch").parent.mkdir(parents=True, exist_ok=True)
    (world.recipes / "evil.patch").write_text(new_file("b/escape_abs/planted.txt"))
    world.recipe("  - id: fine\n    regex: {files: ['caffe2/**/*.h'], pattern: CAFFE2_API, replace: TORCH_API}\n"
                 "  - id: evil\n    patch: evil.patch\n")
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == ExitCode.UNSAFE, r.err
    steps = git(world.wt, "log", "--format=%(trailers:key=Lgpatch-Step,valueonly)").split()
    assert steps == ["recipe/fine"]
    assert git(world.wt, "status", "--porcelain", "--untracked-files=all") == ""
    world.assert_outside_untouched()


def test_regex_through_a_link_out_of_the_tree_is_refused(lgpatch, world: World) -> None:
    world.recipe("  - id: rename\n    regex: {files: ['inc/evil.h', 'inc/real.h'], pattern: CAFFE2_API, "
                 "replace: TORCH_API}\n")
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == ExitCode.UNSAFE, r.err
    assert "inc/evil.h" in r.err
    world.assert_pristine_tree()
    world.assert_outside_untouched()


def test_regex_leaves_a_link_inside_the_tree_alone(lgpatch, world: World) -> None:
    # inc/alias.h -> real.h is matched by the glob. Refusing it as unsafe (it points inside the tree) would make a
    # tree-wide rename fail on any tree with such a link (PyTorch 1.5 has two). The target is renamed under its
    # own path; the link needs no change.
    world.recipe("  - id: rename\n    regex: {files: ['inc/real.h', 'inc/alias.h'], pattern: CAFFE2_API, "
                 "replace: TORCH_API}\n")
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == 0, r.err
    assert (world.wt / "inc/real.h").read_text() == "int TORCH_API r;\n"
    assert os.readlink(world.wt / "inc/alias.h") == "real.h"
    world.assert_outside_untouched()


@pytest.mark.parametrize("target", ["inc/evil.h", "escape_rel/sentinel.txt", "escape_abs/new.h"])
def test_insert_through_a_link_is_refused(lgpatch, world: World, target: str) -> None:
    world.recipe(f"  - id: ins\n    insert: {{file: {target}, text: '// planted', at: end}}\n")
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == ExitCode.UNSAFE, r.err
    world.assert_pristine_tree()
    world.assert_outside_untouched()


@pytest.mark.parametrize("files", ["[escape_abs/x.h]", "[escape_rel/sentinel.txt]", "[inc/evil.h]", "[.git/config]"])
def test_backport_through_a_link_or_into_git_is_refused(lgpatch, world: World, files: str) -> None:
    up = world.upstream
    world.recipe(f"  - id: bp\n    backport: {{ref: v1.0, commit: {up.commit}, files: {files}}}\n")
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == ExitCode.UNSAFE, r.err
    world.assert_pristine_tree()
    world.assert_outside_untouched()


@pytest.mark.parametrize("step", [
    "backport: {ref: v1.0, commit: COMMIT, files: [../outside/sentinel.txt]}",
    "backport: {ref: v1.0, commit: COMMIT, files: [caffe2/../../outside/x]}",
    "backport: {ref: v1.0, commit: COMMIT, files: [/etc/passwd]}",
    "insert: {file: ../outside/sentinel.txt, text: x}",
    "patch: ../outside/target.h",
])
def test_escaping_paths_in_recipes_are_schema_errors(lgpatch, world: World, step: str) -> None:
    world.recipe(f"  - id: bad\n    {step.replace('COMMIT', world.upstream.commit)}\n")
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == ExitCode.CONFIG, r.err
    assert "recipes/evil.yaml:7: steps[0]." in r.err
    assert "must not contain '..'" in r.err or "must be a relative path" in r.err
    assert not world.wt.exists()
    world.assert_outside_untouched()


def test_url_patch_with_escape_is_refused(lgpatch, world: World) -> None:
    evil = new_file("b/../outside/planted.txt").encode()
    f = world.tmp / "dl" / "lms.patch"
    f.parent.mkdir()
    f.write_bytes(evil)
    world.recipe(f"  - id: lms\n    url-patch: {{url: 'http://127.0.0.1:9/lms.patch', "
                 f"sha256: {hashlib.sha256(evil).hexdigest()}}}\n")
    assert lgpatch("--recipe-path", world.recipes, "cache", "add", f).code == 0
    world.top = sorted(p.name for p in world.tmp.iterdir())
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == ExitCode.UNSAFE, r.err
    world.assert_pristine_tree()
    world.assert_outside_untouched()


# ------------------------------------------------------------------------------------------- sdists


def make_sdist(members: list[tuple[str, str, str]]) -> bytes:
    """A .tar.gz from (name, kind, data) with kind file|symlink|hardlink|dir; names are written as given."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.mtime = 0
            if kind == "file":
                payload = data.encode()
                info.size = len(payload)
                tf.addfile(info, io.BytesIO(payload))
                continue
            if kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, data
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, data
            elif kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            tf.addfile(info)
    return buf.getvalue()


GOOD = [("evil-1.0/setup.py", "file", "print('hi')\n"), ("evil-1.0/pkg/__init__.py", "file", "")]


def sdist_cases(outside: Path) -> dict[str, list[tuple[str, str, str]]]:
    return {
        "dotdot-member": [*GOOD, ("evil-1.0/../../outside/planted.txt", "file", "evil\n")],
        "dotdot-after-top": [*GOOD, ("evil-1.0/pkg/../../../planted.txt", "file", "evil\n")],
        "absolute-member": [*GOOD, (f"{outside}/planted.txt", "file", "evil\n")],
        "symlink-abs": [*GOOD, ("evil-1.0/pkg/out", "symlink", str(outside)),
                        ("evil-1.0/pkg/out/planted.txt", "file", "evil\n")],
        "symlink-rel": [*GOOD, ("evil-1.0/pkg/out", "symlink", "../../outside"),
                        ("evil-1.0/pkg/out/planted.txt", "file", "evil\n")],
        "symlink-file-then-write": [*GOOD, ("evil-1.0/s.txt", "symlink", f"{outside}/sentinel.txt"),
                                    ("evil-1.0/s.txt", "file", "overwritten\n")],
        "hardlink-outside": [*GOOD, ("evil-1.0/passwd", "hardlink", f"{outside}/sentinel.txt")],
        "hardlink-dotdot": [*GOOD, ("evil-1.0/passwd", "hardlink", "evil-1.0/../../outside/sentinel.txt")],
        "git-dir": [*GOOD, ("evil-1.0/.git/hooks/post-commit", "file", "#!/bin/sh\n")],
        # A nested .git (a fake repository whose config runs a command for any git call in pkg/) is refused too.
        "nested-git-dir": [*GOOD, ("evil-1.0/pkg/.git/HEAD", "file", "ref: refs/heads/main\n"),
                           ("evil-1.0/pkg/.git/config", "file", "[core]\n\tfsmonitor = touch /tmp/pwned\n")],
    }


@pytest.mark.parametrize("case", list(sdist_cases(Path("/x"))))
def test_malicious_sdist_from_the_cache_is_refused(lgpatch, world: World, case: str) -> None:
    data = make_sdist(sdist_cases(world.outside)[case])
    f = world.tmp / "dl" / "evil-1.0.tar.gz"
    f.parent.mkdir()
    f.write_bytes(data)
    assert lgpatch("--recipe-path", world.recipes, "cache", "add", "--any", f).code == 0
    world.top = sorted(p.name for p in world.tmp.iterdir())
    world.sdist_recipe("http://127.0.0.1:9/evil-1.0.tar.gz", data)
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == ExitCode.UNSAFE, r.err
    assert_refusal_message(r.err)
    assert not world.wt.exists()  # the half-unpacked tree was removed, nothing moved into place
    world.assert_outside_untouched()


def test_malicious_sdist_over_http_is_refused(lgpatch, world: World) -> None:
    import functools
    import http.server
    import threading

    site = world.tmp / "site"
    site.mkdir()
    data = make_sdist(sdist_cases(world.outside)["symlink-rel"])
    (site / "evil-1.0.tar.gz").write_bytes(data)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/evil-1.0.tar.gz"
        world.sdist_recipe(url, data)
        r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    finally:
        server.shutdown()
    assert r.code == ExitCode.UNSAFE, r.err
    assert not world.wt.exists()
    world.assert_outside_untouched()


def test_good_sdist_unpacks(lgpatch, world: World) -> None:
    # The control: the same machinery with a harmless archive works, so the refusals above are about the members.
    data = make_sdist([*GOOD, ("evil-1.0/pkg/link.py", "symlink", "__init__.py")])
    f = world.tmp / "dl" / "evil-1.0.tar.gz"
    f.parent.mkdir()
    f.write_bytes(data)
    assert lgpatch("--recipe-path", world.recipes, "cache", "add", "--any", f).code == 0
    world.sdist_recipe("http://127.0.0.1:9/evil-1.0.tar.gz", data)
    r = lgpatch("--recipe-path", world.recipes, "apply", "evil", "--workdir", world.wt)
    assert r.code == 0, r.err
    assert (world.wt / "setup.py").read_text() == "print('hi')\n"
    assert os.readlink(world.wt / "pkg/link.py") == "__init__.py"
