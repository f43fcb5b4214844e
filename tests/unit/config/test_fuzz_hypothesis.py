"""Property-based tests: garbled recipes and garbled patches give a clean lgpatch error, never another exception.

Inputs are mutations of a valid recipe and a valid git patch (lines deleted, duplicated, swapped; random bytes;
values of the wrong type or with explicit YAML tags; random keys; hostile file names), plus wholly random text.
The properties: the library raises only LgpatchError subclasses (ConfigError, PatchError, UnsafePathError), and the
CLI exits with a documented code, prints one 'lgpatch:' paragraph and never a traceback.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import (
    LAUNCH_CHECK_STEPS,
    PIN,
    demo_recipe_head,
    git,
    git_recipe,
    make_upstream,
    write_files,
    write_patchset,
    write_recipe,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from legacy_gpu_patch.config.recipe import SearchPath, load_recipe
from legacy_gpu_patch.config.yamlio import loads
from legacy_gpu_patch.errors import ConfigError, ExitCode, PatchError, UnsafePathError
from legacy_gpu_patch.ledger.patchfile import Origin, compute

FAST = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SLOW = settings(max_examples=50, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Some @example mutations below address lines of RECIPE by index: the head from conftest is its first 7 lines.
RECIPE = demo_recipe_head() + f"""\
  arch:
    type: arch
    default: sm_86
    choices: [sm_75, sm_86, sm_90]
  cudnn: {{type: bool, default: true}}
  ptx_arch: {{default: compute_75}}
steps:
  - widen-guard
  - patchset: launch-check
    when: {{cuda: ">=11.0"}}
  - id: rename
    when: {{arch: [">=sm_80", sm_75]}}
    regex:
      files: ["**/*.h", "**/*.cu"]
      exclude: ["c10/macros/*"]
      pattern: CAFFE2_API
      replace: TORCH_API_${{ptx_arch}}
      count: 3
  - id: backport
    backport: {{ref: v1.7.0, commit: {PIN}, files: [a/b.h]}}
  - id: lms
    url-patch: {{url: "https://example.org/lms.patch", sha256: {"a" * 64}, strip: 1}}
ignore: ["build/"]
build:
  env: {{MAX_JOBS: 2}}
  commands:
    - {{name: configure, phase: configure, argv: [cmake, ..], when: {{cudnn: true}}}}
verify:
  - {{name: probe, file: probe.cu, lang: cuda, unpatched: fail}}
notes: hello
"""
PATCHSET_WIDEN = """\
name: widen-guard
description: Widen the guard.
steps:
  - id: widen
    patch: widen.patch
"""
PATCHSET_LAUNCH = """\
name: launch-check
description: Define the macro.
when: {arch: ">=sm_70"}
""" + LAUNCH_CHECK_STEPS

# ------------------------------------------------------------------------------------------- mutations

WRONG_VALUES = [
    "[]", "{}", "123", "-1", "true", "null", "~", "''", "'>=x'", "[1, [2]]", "{a: {b: c}}", "0o17", "0x1F",
    ".nan", "1e400", "2001-12-14", "!!binary aGVsbG8=", "!!int x", "!!float x", "!!bool x", "!!timestamp x",
    "!!seq x", "!!map x", "!!set {x}", "!!omap [x]", "!!python/object/apply:os.system ['true']", "&a x", "*a",
    "<<", "'${nope}'", "'(unclosed'", "'../../etc/passwd'", "/abs", "'\\x00'", "\"\\ud800\"", "|\n  block",
    "'sm_9O'", "'>=sm_80,<'", "[>=11, <sm_80]", "? complex", "'a: b'",
]
KEY_CHARS = st.sampled_from([*"abcdefghijklmnopqrstuvwxyz_-.0123456789 ", "é", "\t", ":", "#", "$", "{"])

mutation = st.one_of(
    st.tuples(st.just("delete"), st.integers(0, 10**6)),
    st.tuples(st.just("duplicate"), st.integers(0, 10**6)),
    st.tuples(st.just("swap"), st.integers(0, 10**6), st.integers(0, 10**6)),
    st.tuples(st.just("bytes"), st.integers(0, 10**6), st.binary(min_size=1, max_size=6)),
    st.tuples(st.just("value"), st.integers(0, 10**6), st.sampled_from(WRONG_VALUES)),
    st.tuples(st.just("key"), st.integers(0, 10**6), st.text(KEY_CHARS, min_size=1, max_size=10),
              st.sampled_from(["", "  ", "    ", "      "]), st.sampled_from([*WRONG_VALUES, "x", "1"])),
    st.tuples(st.just("indent"), st.integers(0, 10**6), st.integers(-3, 3)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
)
mutations = st.lists(mutation, min_size=1, max_size=4)


def mutate(text: str, ops: list[tuple]) -> bytes:
    """Apply line-level mutations; returns bytes because some mutations are not valid UTF-8."""
    lines: list[bytes] = text.encode().split(b"\n")
    for op in ops:
        kind, at = op[0], op[1] % max(1, len(lines))
        if kind == "delete" and lines:
            del lines[at]
        elif kind == "duplicate" and lines:
            lines.insert(at, lines[at])
        elif kind == "swap" and lines:
            other = op[2] % len(lines)
            lines[at], lines[other] = lines[other], lines[at]
        elif kind == "bytes" and lines:
            line = lines[at]
            pos = op[1] % (len(line) + 1)
            lines[at] = line[:pos] + op[2] + line[pos:]
        elif kind == "value" and lines:
            line = lines[at]
            if b": " in line:
                lines[at] = line.split(b": ", 1)[0] + b": " + op[2].encode()
            elif b"- " in line:
                lines[at] = line.split(b"- ", 1)[0] + b"- " + op[2].encode()
            else:
                lines[at] = line + b" " + op[2].encode()
        elif kind == "key":
            lines.insert(at, f"{op[3]}{op[2]}: {op[4]}".encode())
        elif kind == "indent" and lines:
            shift = op[2]
            lines[at] = b" " * shift + lines[at] if shift > 0 else lines[at][-shift:]
        elif kind == "truncate":
            joined = b"\n".join(lines)
            return joined[: op[1] % (len(joined) + 1)]
    return b"\n".join(lines)


def check_cli_result(code: int, err: str, allowed: set[int]) -> None:
    assert "Traceback" not in err, err
    assert code in allowed, f"exit {code}:\n{err}"
    if code != 0:
        last = [ln for ln in err.splitlines() if ln.startswith("lgpatch:")]
        assert last, err
        assert "internal error" not in err, err


# ------------------------------------------------------------------------------------------- recipes


@pytest.fixture
def recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    d = tmp_path / "recipes"
    write_recipe(d, RECIPE)
    write_patchset(d, "widen-guard", PATCHSET_WIDEN, {"widen.patch": "--- a/x.h\n+++ b/x.h\n@@ -1 +1 @@\n-a\n+b\n"})
    write_patchset(d, "launch-check", PATCHSET_LAUNCH)
    return d


def test_the_base_recipe_is_valid(recipes: Path) -> None:
    recipe = load_recipe(recipes / "demo.yaml", SearchPath.from_options([recipes]))
    assert len(recipe.entries) == 5  # the mutations start from a recipe that uses every feature


@FAST
@given(ops=mutations)
@example(ops=[("value", 1, "!!int x")])
@example(ops=[("value", 6, "!!seq x")])
@example(ops=[("value", 1, "!!bool x")])
@example(ops=[("value", 1, "!!timestamp x")])
@example(ops=[("value", 1, "!!map x")])
@example(ops=[("bytes", 0, b"\x00")])
@example(ops=[("value", 25, "many")])
@example(ops=[("value", 28, "{url: 'https://e.org/p', sha256: " + "a" * 64 + ", strip: x}")])
def test_garbled_recipe_gives_config_error(recipes: Path, ops: list[tuple]) -> None:
    (recipes / "demo.yaml").write_bytes(mutate(RECIPE, ops))
    try:
        load_recipe(recipes / "demo.yaml", SearchPath.from_options([recipes]))
    except ConfigError as exc:
        assert exc.message.startswith(("recipes/demo.yaml", "recipes/patchsets/")), exc.message


@FAST
@given(ops=mutations)
@example(ops=[("value", 1, "!!float x")])
@example(ops=[("bytes", 3, b"\x07")])
def test_garbled_recipe_through_the_cli(lgpatch, recipes: Path, ops: list[tuple]) -> None:
    (recipes / "demo.yaml").write_bytes(mutate(RECIPE, ops))
    r = lgpatch("--recipe-path", recipes, "show", "demo", "--json")
    check_cli_result(r.code, r.err, {ExitCode.OK, ExitCode.CONFIG})


@FAST
@given(text=st.lists(st.sampled_from([*"abc:-[]{}!&*#'\"\n ,?|>%@`\\\t", "name", "steps", "!!int", "0x"]),
                    max_size=80).map("".join))
@example(text="a: " + "[" * 3000)
@example(text="a: " + "{b: " * 3000)
def test_random_yaml_text(text: str) -> None:
    try:
        loads(text, "f.yaml")
    except ConfigError as exc:
        assert exc.message.startswith("f.yaml"), exc.message


@FAST
@given(ops=mutations)
def test_garbled_patchset_manifest(recipes: Path, ops: list[tuple]) -> None:
    (recipes / "patchsets/launch-check/patchset.yaml").write_bytes(mutate(PATCHSET_LAUNCH, ops))
    try:
        load_recipe(recipes / "demo.yaml", SearchPath.from_options([recipes]))
    except ConfigError as exc:
        assert exc.message.startswith("recipes/patchsets/launch-check/patchset.yaml"), exc.message


# ------------------------------------------------------------------------------------------- patches

TREE = {
    "src/a.c": "".join(f"int a{i};\n" for i in range(30)),
    "src/b.h": "#pragma once\nint CAFFE2_API b;",  # no newline at the end
    "old.txt": "rename me\nplease\n",
    "gone.txt": "delete me\n",
}
PATCH = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: t <t@t>
Subject: [PATCH] base

---
diff --git a/src/a.c b/src/a.c
index 1111111..2222222 100644
--- a/src/a.c
+++ b/src/a.c
@@ -3,7 +3,7 @@ int a1;
 int a2;
 int a3;
 int a4;
-int a5;
+long a5;
 int a6;
 int a7;
 int a8;
diff --git a/src/b.h b/src/b.h
--- a/src/b.h
+++ b/src/b.h
@@ -1,2 +1,2 @@
 #pragma once
-int CAFFE2_API b;
\\ No newline at end of file
+int TORCH_API b;
diff --git a/old.txt b/new.txt
similarity index 60%
rename from old.txt
rename to new.txt
--- a/old.txt
+++ b/new.txt
@@ -1,2 +1,2 @@
 rename me
-please
+thanks
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-delete me
diff --git a/tools/new.sh b/tools/new.sh
new file mode 100755
--- /dev/null
+++ b/tools/new.sh
@@ -0,0 +1,2 @@
+#!/bin/sh
+echo new
--
2.39.5
"""

HOSTILE_NAMES = [
    "/dev/null", "/etc/passwd", "a/../../x", "b/../x", "../x", "a/.git/config", "b/sub/.git/HEAD", "",
    '"a/\\777"', '"a/\\u1234"', '"a/x\\"', '"', '"a/\\303\\251"', '"b/\\t"', "a/ x ", "a/x\tstamp", "a//b",
    "a/.", "a/./src/a.c", "C:\\x", "a\\..\\x", "b/src", "b/src/a.c/x", "a/\x00", "a/é.h",
]
header_mutation = st.one_of(
    st.tuples(st.just("name"), st.integers(0, 10**6), st.sampled_from(HOSTILE_NAMES)),
    st.tuples(st.just("hunk"), st.integers(0, 10**6), st.integers(-2, 10**12), st.integers(-2, 10**6),
              st.integers(-2, 10**12), st.integers(-2, 10**6)),
    st.tuples(st.just("prefix"), st.integers(0, 10**6), st.sampled_from([" ", "-", "+", "\\", "@", "#", ""])),
)
patch_mutations = st.lists(st.one_of(mutation, header_mutation), min_size=1, max_size=4)


def mutate_patch(ops: list[tuple]) -> bytes:
    lines = PATCH.split("\n")
    plain: list[tuple] = []
    for op in ops:
        at = op[1] % len(lines)
        if op[0] == "name":
            idx = [i for i, ln in enumerate(lines) if ln.startswith(("--- ", "+++ ", "rename from", "rename to"))]
            i = idx[op[1] % len(idx)]
            head = lines[i].split(" ", 2)[0] if lines[i].startswith(("--- ", "+++ ")) else " ".join(
                lines[i].split(" ")[:2])
            lines[i] = f"{head} {op[2]}"
        elif op[0] == "hunk":
            idx = [i for i, ln in enumerate(lines) if ln.startswith("@@")]
            i = idx[op[1] % len(idx)]
            lines[i] = f"@@ -{op[2]},{op[3]} +{op[4]},{op[5]} @@"
        elif op[0] == "prefix":
            lines[at] = op[2] + lines[at][1:]
        else:
            plain.append(op)
    return mutate("\n".join(lines), plain)


def tree_at(tmp: Path) -> Path:
    root = tmp / "tree"
    if not root.exists():
        write_files(root, TREE)
    return root


def test_the_base_patch_applies(tmp_path: Path) -> None:
    result = compute(tree_at(tmp_path), PATCH, Origin("ps", "st", "p.patch"))
    assert sorted(c.path for c in result.changes) == ["gone.txt", "new.txt", "old.txt", "src/a.c", "src/b.h",
                                                       "tools/new.sh"]


@FAST
@given(ops=patch_mutations)
def test_garbled_patch_gives_patch_or_unsafe_error(tmp_path: Path, ops: list[tuple]) -> None:
    text = mutate_patch(ops).decode("utf-8", errors="surrogateescape")
    try:
        compute(tree_at(tmp_path), text, Origin("ps", "st", "p.patch"))
    except (PatchError, UnsafePathError):
        pass


@FAST
@given(text=st.lists(st.sampled_from(["--- a/src/a.c\n", "+++ b/src/a.c\n", "--- /dev/null\n", "+++ /dev/null\n",
                                     "@@ -1 +1 @@\n", "@@ -1,2 +1,3 @@ x\n", "@@ -0,0 +1 @@\n", " int a0;\n",
                                     "-int a0;\n", "+x\n", "\\ No newline at end of file\n", "diff --git a/x b/y\n",
                                     "rename from x\n", "rename to y\n", "new file mode 100755\n",
                                      "GIT binary patch\n", "literal 0\n", "\n", "x", "\r\n", '"', "\\"]),
                     max_size=40).map("".join))
def test_random_diff_tokens(tmp_path: Path, text: str) -> None:
    try:
        compute(tree_at(tmp_path), text, Origin("ps", "st", "p.patch"))
    except (PatchError, UnsafePathError):
        pass


def garbled_patch_recipes(tmp_path: Path) -> Path:
    """A recipe folder whose one step applies recipes/garbled.patch (written by the test) to TREE."""
    up = make_upstream(tmp_path / "up", TREE)
    d = tmp_path / "recipes"
    write_recipe(d, git_recipe("fuzz", "garbled patch", up, "  - id: garbled\n    patch: garbled.patch\n"))
    return d


def test_garbled_patch_through_the_cli(lgpatch, tmp_path: Path) -> None:
    """lgpatch apply on a real work tree: a documented exit code, a clean tree afterwards, never a traceback."""
    d = garbled_patch_recipes(tmp_path)
    wt = tmp_path / "wt"
    seen: set[int] = set()

    @SLOW
    @given(ops=patch_mutations)
    def run(ops: list[tuple]) -> None:
        (d / "garbled.patch").write_bytes(mutate_patch(ops))
        r = lgpatch("--recipe-path", d, "apply", "fuzz", "--workdir", wt)
        seen.add(r.code)
        check_cli_result(r.code, r.err, {ExitCode.OK, ExitCode.CONFIG, ExitCode.PATCH, ExitCode.UNSAFE})
        # Whatever happened, the tree is at a step boundary with nothing half-written.
        assert git(wt, "status", "--porcelain", "--untracked-files=all") == ""

    run()
    assert ExitCode.PATCH in seen  # the fuzzer really produced failing patches


# ------------------------------------------------------------------------------------------- found by the fuzzer
# Each input below made lgpatch fail with something other than an LgpatchError (an internal error, exit 1, in the
# CLI). They stay as plain regression tests so that they run on every CI run, not only when hypothesis finds them.

CRASHING_YAML = {
    "tag-int": "name: !!int x\n",  # ValueError from PyYAML's int constructor
    "tag-int-empty": "!!int",  # IndexError
    "tag-float": "name: !!float x\n",  # ValueError (before floats were kept as text)
    "tag-bool": "name: !!bool x\n",  # KeyError
    "tag-timestamp": "name: !!timestamp x\n",  # AttributeError
    "tag-seq": "name: !!seq x\n",  # AttributeError
    "tag-map": "name: !!map x\n",  # ValueError
    "control-char": "name: demo\x07\n",  # ReaderError raised before loads()' try block
    "nul": "name: \x00\n",
    "deep-list": "name: " + "[" * 3000 + "]" * 3000 + "\n",  # RecursionError in PyYAML's composer
    "deep-map": "name: " + "{a: " * 3000 + "}" * 3000 + "\n",
}


@pytest.mark.parametrize("case", list(CRASHING_YAML))
def test_yaml_crashers_are_config_errors(case: str) -> None:
    try:
        loads(CRASHING_YAML[case], "recipes/x.yaml")  # loading is fine too (e.g. a float tag kept as text)
    except ConfigError as exc:
        assert exc.message.startswith("recipes/x.yaml"), exc.message


@pytest.mark.parametrize("case", ["tag-int", "control-char", "deep-list"])
def test_yaml_crashers_through_the_cli(lgpatch, recipes: Path, case: str) -> None:
    (recipes / "demo.yaml").write_text(CRASHING_YAML[case], encoding="utf-8")
    r = lgpatch("--recipe-path", recipes, "show", "demo")
    check_cli_result(r.code, r.err, {ExitCode.CONFIG})


@pytest.mark.parametrize(("old", "new", "where"), [
    # Wrong types that the schema accepts (Scalar) but apply converts with int(): a traceback at apply time.
    ("      count: 3", "      count: many", "steps[2].regex.count"),
    ("strip: 1}", "strip: x}", "steps[4].url-patch.strip"),
    ("strip: 1}", "strip: [1]}", "steps[4].url-patch.strip"),
])
def test_numeric_step_fields_are_checked_at_load(recipes: Path, old: str, new: str, where: str) -> None:
    assert old in RECIPE
    (recipes / "demo.yaml").write_text(RECIPE.replace(old, new), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_recipe(recipes / "demo.yaml", SearchPath.from_options([recipes]))
    assert f": {where}:" in info.value.message, info.value.message


CRASHING_PATCHES = {
    "both-dev-null": "--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+x\n",  # AssertionError in compute()
    "empty-names": "--- \n+++ \n@@ -1 +1 @@\n-x\n+y\n",  # AssertionError
    "octal-over-255": '--- "a/\\777"\n+++ "b/\\777"\n@@ -1 +1 @@\n-x\n+y\n',  # UnicodeEncodeError
    "unicode-escape": '--- "a/\\u1234"\n+++ "b/\\u1234"\n@@ -1 +1 @@\n-x\n+y\n',  # UnicodeEncodeError
    "trailing-backslash": '--- "a/x\\"\n+++ "b/x\\"\n@@ -1 +1 @@\n-x\n+y\n',  # UnicodeDecodeError
}


@pytest.mark.parametrize("case", list(CRASHING_PATCHES))
def test_patch_crashers_are_patch_errors(tmp_path: Path, case: str) -> None:
    with pytest.raises((PatchError, UnsafePathError)):
        compute(tree_at(tmp_path), CRASHING_PATCHES[case], Origin("ps", "st", "p.patch"))


def test_undecodable_bytes_in_messages_print_cleanly(lgpatch, tmp_path: Path) -> None:
    # Found by test_garbled_patch_through_the_cli: a file name with a byte that is not UTF-8 reaches the error
    # message as a surrogate escape; printing it on a strict stream raised UnicodeEncodeError out of cli.main.
    d = garbled_patch_recipes(tmp_path)
    (d / "garbled.patch").write_bytes(b"--- a/src/\x80.c\n+++ b/src/\x80.c\n@@ -1 +1 @@\n-x\n+y\n")
    r = lgpatch("--recipe-path", d, "apply", "fuzz", "--workdir", tmp_path / "wt")
    check_cli_result(r.code, r.err, {ExitCode.PATCH})
    assert "\\udc80" in r.err or "\ufffd" in r.err


# ------------------------------------------------------------------------------------------- regex step semantics

WORD_TOKENS = ["CAFFE2_API", "CAFFE2_API", "CAFFE2_APIS", "MY_", "_", "x", "9", " ", "\n", "(", ")", "é", "::",
               "CAFFE2_", "API", "\r\n", "\t"]


def test_word_regex_step_matches_python_word_boundaries(tmp_path: Path) -> None:
    """The regex step with `word: true` replaces exactly what re.sub(r'\\b(?:PATTERN)\\b') replaces, byte for byte,
    however it searches (a guard for any faster search strategy)."""
    from legacy_gpu_patch.gitutil import Git
    from legacy_gpu_patch.ledger import steps

    up = make_upstream(tmp_path / "up", {"a.h": "x\n"})
    d = tmp_path / "recipes"
    api = "  api: {default: TORCH_API}\n"
    write_recipe(d, git_recipe("words", "word-boundary regex", up, parameters=api, steps="""\
  - id: rename
    regex: {files: ["*.h"], pattern: CAFFE2_API, replace: "${api}", on_missing: ignore}
"""))
    recipe = load_recipe(d / "demo.yaml", SearchPath.from_options([d]))
    step = recipe.entries[0].step
    root = up.path
    ctx = steps.StepContext(root=root, git=Git(root), recipe=recipe, params={"api": "TORCH_API"}, strict=False,
                            source_dir=None)
    reference = re.compile(rb"\bCAFFE2_API\b")

    @FAST
    @given(tokens=st.lists(st.sampled_from(WORD_TOKENS), max_size=30))
    def run(tokens: list[str]) -> None:
        data = "".join(tokens).encode()
        (root / "a.h").write_bytes(data)
        expected, n = reference.subn(b"TORCH_API", data)
        outcome = steps.run_regex(ctx, step)
        assert (root / "a.h").read_bytes() == expected
        assert outcome.touched == (["a.h"] if n else [])
        assert f"{n} replacement(s)" in outcome.messages[0]

    run()
