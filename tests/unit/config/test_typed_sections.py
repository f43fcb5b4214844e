"""Typed recipe sections: the source, build, verify sections and every step body are frozen objects resolved at
load, and the step digests the ledger compares are the ones the untyped loader gave (trees applied before keep
their steps)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import write_recipe

from legacy_gpu_patch.config.build_schema import BuildCommand, BuildSection
from legacy_gpu_patch.config.patchset import (
    TEMPLATED,
    BackportBody,
    InsertBody,
    PatchBody,
    RegexBody,
    UrlPatchBody,
    body_data,
)
from legacy_gpu_patch.config.recipe import SearchPath, load_recipe
from legacy_gpu_patch.config.source_schema import GitSource
from legacy_gpu_patch.config.verify_schema import ConfigureSetup, Probe, RunSetup
from legacy_gpu_patch.ledger.plan import make_plan, resolve_params

RECIPE = """name: kinds
description: one step of every kind
source:
  git:
    url: "https://example.invalid/x.git"
    ref: v1
    commit: "0123456789abcdef0123456789abcdef01234567"
    submodules: [third_party/a]
parameters:
  cuda: {type: version, default: "12.4"}
  tag: {type: string, default: lgp, pattern: "[a-z]+"}
steps:
  - id: a-patch
    patch: fix.patch
  - id: a-url-patch
    url-patch:
      url: "https://example.invalid/p.patch"
      sha256: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
  - id: a-regex
    when: {cuda: ">=12.0"}
    regex: {files: ["src/*.c"], pattern: old_name, replace: "new_${tag}", count: 2}
  - id: an-insert
    insert: {file: src/a.h, text: "#define TAG ${tag}", after: "^#pragma once"}
  - id: a-backport
    backport: {ref: v2, commit: "89abcdef0123456789abcdef0123456789abcdef", files: [src/b.c]}
build:
  env: {A: "1"}
  commands:
    - {name: make, argv: [make, "-j${jobs}"], when: {cuda: ">=12"}}
verify:
  - {name: p, file: src/a.h, setup: [{configure: {in: a.h.in, out: a.h, define: {X: 1}}}, {run: ["true"]}]}
"""
PATCH = "--- a/src/a.c\n+++ b/src/a.c\n@@ -1 +1 @@\n-x\n+y\n"

# Computed with the loader before the sections were typed (commit 2f4f8b0, bodies as dicts): a changed digest
# would make every existing work tree re-apply its steps.
DIGESTS = {
    "recipe/a-patch": "0056861eeb1f169aa7830dd766efb44fc02004bcc03fb2f945429d8ba6055e1e",
    "recipe/a-url-patch": "eb9acdb3e87107505ff3c09ad5a79bec643ed7d49af1b6e8e89697c2de912ec6",
    "recipe/a-regex": "5a8eea99b673d82088d8ffa3c4392ef21971ce2a3fb7aac691b3283ded9f0f6f",
    "recipe/an-insert": "fbdb4fed935eb0ff61979209f7d9566160397e36bb735a7f76518df149ee4515",
    "recipe/a-backport": "18f97dfdcad140cbea39065590ac78e27c2242cf66a415db6753275af2fc8927",
}


@pytest.fixture
def recipe(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = write_recipe(tmp_path / "recipes", RECIPE, "kinds.yaml")
    (path.parent / "fix.patch").write_text(PATCH)
    return load_recipe(path, SearchPath((), ()))


def test_sections_are_frozen_typed_objects(recipe) -> None:  # type: ignore[no-untyped-def]
    assert recipe.source == GitSource("https://example.invalid/x.git", "v1", "0123456789abcdef0123456789abcdef01234567",
                                      ("third_party/a",))
    assert recipe.source_kind == recipe.source.kind == "git"
    assert recipe.build == BuildSection({"A": "1"}, (BuildCommand("make", "build", ("make", "-j${jobs}"), {}, ".",
                                                                  {"cuda": ">=12"}, False),), "dist")
    (probe,) = recipe.verify
    assert isinstance(probe, Probe) and probe.lang == "cuda" and probe.unpatched == "any"
    assert probe.setup == (ConfigureSetup("a.h.in", "a.h", {"X": 1}), RunSetup(("true",)))
    bodies = [e.step.body for e in recipe.entries]
    assert [type(b) for b in bodies] == [PatchBody, UrlPatchBody, RegexBody, InsertBody, BackportBody]
    assert bodies[1] == UrlPatchBody("https://example.invalid/p.patch", "a" * 64, 1)  # the default strip
    assert bodies[2].files == ("src/*.c",) and bodies[2].word and bodies[2].count == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        bodies[2].pattern = "x"  # type: ignore[misc]


def test_templated_fields_are_listed_once(recipe) -> None:  # type: ignore[no-untyped-def]
    steps = {e.step.kind: e.step for e in recipe.entries}
    assert {k: steps[k].templated_text() for k in TEMPLATED} == {"regex": "new_${tag}", "insert": "#define TAG ${tag}"}
    assert all(steps[k].templated_text() is None for k in steps if k not in TEMPLATED)


def test_step_digests_are_unchanged(recipe) -> None:  # type: ignore[no-untyped-def]
    plan = make_plan(recipe, resolve_params(recipe, {}))
    assert {p.step.key: p.digest for p in plan} == DIGESTS
    # the digest hashes the schema's plain data: lists, not tuples, and every default filled in
    assert body_data(plan[2].step.body) == {"files": ["src/*.c"], "exclude": [], "pattern": "old_name",
                                            "replace": "new_${tag}", "word": True, "on_missing": "error", "count": 2}
