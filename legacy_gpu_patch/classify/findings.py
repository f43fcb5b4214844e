"""Findings: one distinct problem of a log, with how often and where it occurs; their ranking; their baseline key.

Findings are keyed by rule and a capture (`(?P<key>...)`, else the message without its location), so the same
error in 40 translation units is one finding with count 40. `rank_key` puts the first root cause first: errors
before warnings, root causes before consequences ("make: *** Error 1"), specific categories before the generic
`other`, then log position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from legacy_gpu_patch.classify.srecache import compile_re

__all__ = ["Finding", "Occurrence", "baseline_key", "rank_key"]


@dataclass
class Occurrence:
    log_line: int
    file: str | None
    line: int | None
    phase: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"log_line": self.log_line, "file": self.file, "line": self.line, "phase": self.phase}


@dataclass
class Finding:
    """One distinct problem; `count` occurrences of it (the same error in 40 files is one finding)."""

    rule: str
    category: str
    severity: str
    message: str
    file: str | None
    line: int | None
    log_line: int  # 1-based line of the first occurrence in the log
    phase: str | None
    explanation: str
    fix: str
    patchsets: tuple[str, ...]
    secondary: bool
    generic: bool
    key: str
    context_before: list[str] = field(default_factory=list)
    context_after: list[str] = field(default_factory=list)
    count: int = 1
    occurrences: list[Occurrence] = field(default_factory=list)
    _after_wanted: int = 0

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def where(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}"
        return self.file or f"log line {self.log_line}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "rule": self.rule,
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "log_line": self.log_line,
            "phase": self.phase,
            "message": self.message,
            "count": self.count,
            "explanation": self.explanation,
            "fix": self.fix,
            "patchset": list(self.patchsets),
            "secondary": self.secondary,
            "context": {"before": list(self.context_before), "after": list(self.context_after)},
            "occurrences": [o.to_dict() for o in self.occurrences],
        }


def rank_key(f: Finding) -> tuple[bool, bool, bool, int]:
    return (f.severity != "error", f.secondary, f.generic, f.log_line)


# What differs between two builds of the same tree and says nothing about the error: paths (their directories),
# line and column numbers, temporary names, addresses, timings, counters. Stripped before findings of a failed build
# are compared with those of a passing one (see baseline.py).
_BASELINE_SUBS = (
    (compile_re(r"(?:[A-Za-z]:)?(?:[\\/][\w.+@~-]+)+[\\/]"), ""),  # directories of a path: the file name stays
    (compile_re(r"/tmp/[\w.-]+|\btmp[\w-]*\b|\b(?:cc|tmpxft_)[\w]{6,}\b"), "<tmp>"),
    (compile_re(r"\b0x[0-9a-f]+\b"), "<addr>"),
    (compile_re(r"\b\d+(?:\.\d+)?\s*(?:ms|s|sec|seconds|min)\b"), "<time>"),
    (compile_re(r"(?<=[:(,])\d+\b|\bline \d+\b|\[\s*\d+%\]|\[\d+/\d+\]"), "<n>"),
    (compile_re(r"\s+"), " "),
)


def baseline_key(f: Finding) -> tuple[str, str]:
    """(rule, normalised message) of a finding: equal for the same error in two builds of one tree."""
    text = f.message.lower()
    for regex, repl in _BASELINE_SUBS:
        text = regex.sub(repl, text)
    return f.rule, text.strip()
