"""Line-level edits of recipe and patchset YAML files: add a step or a patchset reference, replace a step.

The files are the user's: their comments, order and quoting must survive a refresh. So we never re-dump a file;
we find the lines of the `steps:` list with the same line-aware loader that validates recipes, and splice text in.
Every edit returns the new text; the caller writes it (transactionally) and then re-validates by loading it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from legacy_gpu_patch.config.yamlio import LineDict, LineList, loads
from legacy_gpu_patch.errors import ConfigError

_TOP_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:")


def _steps_block(path: Path, text: str) -> tuple[list[str], int, list[int], str]:
    """(lines, line index of `steps:`, 0-based start line of each item, the item indent) of a file's steps list."""
    data = loads(text, str(path))
    lines = text.splitlines(keepends=True)
    if not isinstance(data, LineDict) or "steps" not in data:
        raise ConfigError(f"{path}: no top-level 'steps:' list to add to")
    key_line = data.key_lines["steps"] - 1
    steps = data["steps"]
    if not isinstance(steps, LineList):
        raise ConfigError(f"{path}:{key_line + 1}: 'steps' is not a list")
    starts = [n - 1 for n in steps.item_lines]
    if starts and not all(lines[s].lstrip().startswith("- ") or lines[s].strip() == "-" for s in starts):
        raise ConfigError(f"{path}:{key_line + 1}: 'steps' is a flow list ([...]); write it as a block list "
                          "(one '- ' item per line) so lgpatch can add steps without rewriting the file")
    indent = re.match(r"\s*", lines[starts[0]]).group(0) if starts else "  "  # type: ignore[union-attr]
    return lines, key_line, starts, indent


def _block_end(lines: list[str], after: int) -> int:
    """The line index where the steps list ends: the next top-level key (or EOF), trailing blank lines excluded."""
    end = len(lines)
    for i in range(after + 1, len(lines)):
        if _TOP_KEY.match(lines[i]):
            end = i
            break
    while end > after + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def _indented(item: str, indent: str) -> str:
    return "".join(indent + ln if ln.strip() else ln for ln in item.splitlines(keepends=True))


def _ensure_newline(lines: list[str], at: int) -> None:
    if at > 0 and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"


def insert_item(path: Path, text: str, item: str, after_index: int | None) -> str:
    """`item` (a YAML list item starting with '- ', unindented) inserted after steps[after_index] (None: at the end).

    An empty `steps: []` becomes a block list holding the item.
    """
    lines, key_line, starts, indent = _steps_block(path, text)
    if not starts:
        head = re.match(r"(\s*steps\s*:)", lines[key_line])
        if head is None or "[]" not in lines[key_line]:
            raise ConfigError(f"{path}:{key_line + 1}: cannot add to this 'steps' list")
        lines[key_line] = head.group(1) + "\n" + _indented(item, "  ")
        return "".join(lines)
    if after_index is None or after_index >= len(starts) - 1:
        at = _block_end(lines, starts[-1])
    else:
        at = starts[after_index + 1]
        # Comments just above the next item belong to it: insert before them.
        while at - 1 > starts[after_index] and lines[at - 1].lstrip().startswith("#"):
            at -= 1
    _ensure_newline(lines, at)
    lines[at:at] = [_indented(item, indent)]
    return "".join(lines)


def replace_item(path: Path, text: str, index: int, item: str) -> str:
    """steps[index] replaced by `item` (used by `refresh --fold` on a declarative step)."""
    lines, _, starts, indent = _steps_block(path, text)
    end = starts[index + 1] if index + 1 < len(starts) else _block_end(lines, starts[index])
    while index + 1 < len(starts) and end - 1 > starts[index] and lines[end - 1].lstrip().startswith("#"):
        end -= 1
    lines[starts[index]:end] = [_indented(item, indent)]
    return "".join(lines)


def scalar(value: str) -> str:
    """A YAML scalar for any string: plain when that is unambiguous (starts with a letter, so never a number), else
    double-quoted (a JSON string is a valid YAML double-quoted scalar)."""
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9 ._/+-]*", value) and value.strip() == value and ": " not in value \
            and value.lower() not in ("yes", "no", "true", "false", "on", "off", "null", "y", "n"):
        return value
    return json.dumps(value, ensure_ascii=False)


def patch_step_item(step_id: str, description: str, patch_file: str, when: dict[str, Any] | None = None) -> str:
    lines = [f"- id: {step_id}\n"]
    if description:
        lines.append(f"  description: {scalar(description)}\n")
    if when:
        lines.append(f"  when: {json.dumps(when, ensure_ascii=False)}\n")
    lines.append(f"  patch: {scalar(patch_file)}\n")
    return "".join(lines)


def patchset_manifest(name: str, description: str) -> str:
    return (f"name: {name}\n"
            f"description: {scalar(description)}\n"
            "# Steps are added by `lgpatch refresh`; each is a git format-patch file in this folder.\n"
            "steps: []\n")
