"""Line-level YAML edits keep the user's comments and order, and what they write loads back as intended."""

from __future__ import annotations

from pathlib import Path

import pytest

from legacy_gpu_patch.authoring import yamledit
from legacy_gpu_patch.authoring.placement import slug
from legacy_gpu_patch.config.yamlio import loads
from legacy_gpu_patch.errors import ConfigError

MANIFEST = """\
name: fixes
description: Fixes.
steps:
  - id: one   # first
    patch: one.patch

  # about two
  - id: two
    insert: {file: README, at: end, text: "x"}

mirrors: upstream#1
"""
P = Path("patchset.yaml")


def _ids(text: str) -> list[str]:
    return [s["id"] for s in loads(text)["steps"]]


def test_append_goes_after_the_last_item_before_the_next_key() -> None:
    out = yamledit.insert_item(P, MANIFEST, yamledit.patch_step_item("three", "Third", "three.patch"), None)
    assert _ids(out) == ["one", "two", "three"]
    assert loads(out)["mirrors"] == "upstream#1" and "# first" in out and "# about two" in out
    assert loads(out)["steps"][2] == {"id": "three", "description": "Third", "patch": "three.patch"}


def test_insert_after_an_item_goes_before_the_comment_of_the_next() -> None:
    out = yamledit.insert_item(P, MANIFEST, "- id: middle\n  patch: m.patch\n", 0)
    assert _ids(out) == ["one", "middle", "two"]
    assert out.index("id: middle") < out.index("# about two") < out.index("id: two")


def test_replace_item_keeps_the_others() -> None:
    out = yamledit.replace_item(P, MANIFEST, 1, yamledit.patch_step_item("two", "", "two.patch", {"cuda": ">=11"}))
    data = loads(out)
    assert _ids(out) == ["one", "two"] and data["steps"][1] == {"id": "two", "when": {"cuda": ">=11"},
                                                                 "patch": "two.patch"}
    assert data["mirrors"] == "upstream#1"


def test_empty_flow_list_becomes_a_block_list() -> None:
    text = yamledit.patchset_manifest("demo", "Hand edits")
    out = yamledit.insert_item(P, text, "- id: a\n  patch: a.patch\n", None)
    assert _ids(out) == ["a"] and loads(out)["name"] == "demo"


def test_a_flow_list_with_items_is_refused_not_rewritten() -> None:
    with pytest.raises(ConfigError, match="flow list"):
        yamledit.insert_item(P, "name: x\nsteps: [a, b]\n", "- c\n", None)


@pytest.mark.parametrize("value", ["plain words", "yes", "a: b", "  lead", "Fix #1: 'quoted' \"x\"", "10", "ü"])
def test_scalar_round_trips(value: str) -> None:
    assert loads(f"k: {yamledit.scalar(value)}\n")["k"] == value


def test_slug() -> None:
    assert slug("Fix other: src/cpuinfo.c:2:10: fatal error") == "fix-other-src-cpuinfo-c-2-10-fatal-error"
    assert slug("!!!") == "edit"
