"""Glob patterns over tree-relative paths: `**` spans folders, `*` and `?` stay inside one path segment."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def select(paths: Iterable[str], include: Sequence[str], exclude: Sequence[str] = ()) -> list[str]:
    inc = [glob_regex(p) for p in include]
    exc = [glob_regex(p) for p in exclude]
    return [p for p in paths if any(r.match(p) for r in inc) and not any(r.match(p) for r in exc)]
