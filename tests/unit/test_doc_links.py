"""Every relative link in the project's Markdown (README, DEVELOPERS, docs/, the patchsets' READMEs) points at a file
that exists and, with a `#fragment`, at a heading that file has (GitHub's anchor rule). A renamed heading or a moved
file otherwise leaves a reader at a dead link, as docs/hetero.md's status line did once its section was renamed."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from helpers import REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache  # a page is linked to many times: read and parse it once
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        base = anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def markdown_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "DEVELOPERS.md", *sorted((REPO / "docs").rglob("*.md")),
             *sorted((REPO / "patchsets").glob("*/README.md"))]
    return [f for f in files if f.is_file()]


def dead_links(path: Path) -> list[str]:
    dead = []
    for link in LINK.findall(FENCE.sub("", path.read_text())):
        if re.match(r"^[a-z]+:", link):  # http:, https:, mailto:
            continue
        target_name, _, fragment = link.partition("#")
        target = (path.parent / target_name).resolve() if target_name else path
        if not target.exists():
            dead.append(f"{link} (no such file)")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            dead.append(f"{link} (no such heading in {target.name})")
    return dead


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert dead_links(path) == []


def test_the_anchor_rule_on_headings_of_this_repository(tmp_path: Path) -> None:
    assert anchor("The GPU proof (docs/gpu-proofs.md: partial run in session 5)") == (
        "the-gpu-proof-docsgpu-proofsmd-partial-run-in-session-5")
    assert anchor("`lgpatch build --baseline`") == "lgpatch-build---baseline"
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Notes\n\n## Notes\n\n```sh\n# not a heading\n```\n[a](#notes-1) [b](#missing)\n")
    assert anchors(page) == {"title", "notes", "notes-1"}
    assert dead_links(page) == ["#missing (no such heading in page.md)"]
