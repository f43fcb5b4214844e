"""What a failing hunk shows: where the file looks most like the hunk, and a bounded excerpt of both.

A 200k-line hunk would otherwise print 400k lines, and comparing every window of the file with all of it is
quadratic; both are capped here.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import unidiff

from legacy_gpu_patch.errors import PatchError


@dataclass(frozen=True)
class Origin:
    """Names for error messages: which patchset / step / patch file this diff came from."""

    patchset: str
    step: str
    patch_file: str


def header(hunk: unidiff.Hunk) -> str:
    text = f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
    return f"{text} {hunk.section_header}".rstrip()


_PROBE_LINES = 40


def closest_lines(lines: list[str], needle: list[str], near: int) -> tuple[int, list[str]]:
    """Where the file looks most like the hunk's old text (1-based line, lines), to show the user."""
    m = max(1, len(needle))
    if not lines:
        return 1, []
    best, best_score = 0, -1.0
    # Score on the hunk's first lines only: comparing every window with the whole of a 200k-line hunk is quadratic.
    probe = needle[:_PROBE_LINES]
    stripped = [ln.strip() for ln in probe]
    for i in range(0, max(1, len(lines) - m + 1)):
        window = [ln.strip() for ln in lines[i : i + len(probe)]]
        score = sum(1 for a, b in zip(window, stripped) if a == b) - abs(i - near) * 1e-6
        if score > best_score:
            best, best_score = i, score
    if best_score < 1:  # nothing equal: fall back to fuzzy similarity around the expected place
        lo = max(0, near - 50)
        best = max(
            range(lo, max(lo + 1, min(len(lines) - m + 1, near + 50))),
            key=lambda i: difflib.SequenceMatcher(None, "".join(lines[i : i + len(probe)]), "".join(probe)).ratio(),
        )
    return best + 1, lines[best : best + m]


SHOWN_LINES = 8  # of a failing hunk's old side and of the closest lines: this many from each end


def _capped(numbered: list[tuple[int | None, str]], where: str) -> str:
    """Lines as `    number: text`, the middle of a long list left out with a note that says where it is."""
    def fmt(items: list[tuple[int | None, str]]) -> str:
        return "".join(f"    {num:>6}: {text.rstrip()}\n" if num is not None else f"    {'':>6}  {text.rstrip()}\n"
                       for num, text in items)

    if len(numbered) <= 2 * SHOWN_LINES + 1:
        return fmt(numbered)
    omitted = len(numbered) - 2 * SHOWN_LINES
    return (fmt(numbered[:SHOWN_LINES]) + f"    {'':>6}  … {omitted} more line(s) not shown: {where}\n"
            + fmt(numbered[-SHOWN_LINES:]))


def hunk_failure(lines: list[str], old: list[str], near: int, hunk: unidiff.Hunk, number: int, path: str,
                  origin: Origin) -> PatchError:
    """The error for a hunk that matches nowhere: header, the ends of its old side, the closest lines of the file;
    never the whole of a long hunk (a 200k-line hunk would otherwise print 400k lines)."""
    at, closest = closest_lines(lines, old, near)
    first = hunk[0].diff_line_no if len(hunk) else None
    last = hunk[len(hunk) - 1].diff_line_no if len(hunk) else None
    in_patch = f"lines {first}-{last} of {origin.patch_file}" if first is not None else origin.patch_file
    expected = (_capped([(None, ln) for ln in old], f"the whole hunk ({len(old)} old line(s)) is {in_patch}")
                or "    (nothing)\n")
    shown = _capped([(at + i, ln) for i, ln in enumerate(closest)],
                    f"lines {at}-{at + len(closest) - 1} of {path} in the work tree") or "    (file is empty)\n"
    return PatchError(
        f"{origin.patchset}/{origin.step}: hunk #{number} of {origin.patch_file} does not apply to {path}\n"
        f"  hunk: {header(hunk)}\n  expected (old side of the hunk):\n"
        f"{expected}  closest lines found in {path}:\n{shown}"
        "  the tree was left as it was before this step",
        hint="the source differs from what the patch was written for: check the recipe's pin, "
        "or refresh the patch against this tree",
    )
