"""What a build or a classified log produced, as data: the phases that ran, the wheels written, the findings.

Every output format (report/json in reports.py, junit.py, github.py, text.py) renders one `LogReport`; findings are
already ranked by the classifier (first root cause first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from legacy_gpu_patch import __version__
from legacy_gpu_patch.classify.classifier import Finding

REPORT_SCHEMA_VERSION = 1


class LogCounts(TypedDict):
    """The classifier's running counters over a log."""

    lines: int
    bytes: int
    errors: int  # error occurrences
    warnings: int
    dropped: int  # occurrences of findings beyond the classifier's cap


@dataclass
class PhaseResult:
    """One build command as it ran (or why it did not)."""

    name: str
    phase: str
    argv: list[str]
    cwd: str = "."
    returncode: int | None = None
    duration: float = 0.0
    status: str = "not-run"  # passed | failed | skipped | interrupted | not-run
    reason: str = ""  # why skipped (the `when:` verdict) or how it failed
    optional: bool = False
    log_lines: tuple[int, int] | None = None  # first/last line of its output in the log

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "phase": self.phase,
            "argv": self.argv,
            "cwd": self.cwd,
            "returncode": self.returncode,
            "duration_s": round(self.duration, 3),
            "status": self.status,
            "reason": self.reason,
            "optional": self.optional,
            "log_lines": list(self.log_lines) if self.log_lines else None,
        }


@dataclass
class Artifact:
    path: str
    size: int
    sha256: str
    new: bool = True  # written by this build (not left from an earlier one)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256, "new": self.new}


@dataclass
class LogReport:
    """What one build run or one `lgpatch classify` found in its log: findings, phases, wheels, counters."""

    kind: str  # "build" | "classify"
    source: str  # the log file (or "-" for stdin)
    findings: list[Finding]
    status: str  # ok | failed | interrupted | findings | clean
    exit_code: int
    lines: int = 0
    bytes: int = 0
    errors: int = 0  # error occurrences
    warnings: int = 0
    dropped: int = 0  # occurrences of findings beyond the classifier's cap
    phases: list[PhaseResult] = field(default_factory=list)
    wheels: list[Artifact] = field(default_factory=list)
    started: str = ""
    duration: float = 0.0
    recipe: str | None = None
    recipe_patchsets: tuple[str, ...] = ()  # patchsets of the recipe: hints are checked against them
    params: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    workdir: str | None = None

    @staticmethod
    def counts(classifier: Any) -> LogCounts:
        """The classifier's running counters, as LogReport fields (shared by build and classify)."""
        return LogCounts(lines=classifier.lines, bytes=classifier.bytes, errors=classifier.errors,
                         warnings=classifier.warnings, dropped=classifier.dropped)

    @property
    def error_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA_VERSION,
            "lgpatch": __version__,
            "kind": self.kind,
            "status": self.status,
            "exit_code": self.exit_code,
            "source": self.source,
            "started": self.started,
            "duration_s": round(self.duration, 3),
            "recipe": self.recipe,
            "params": self.params,
            "variables": self.variables,
            "workdir": self.workdir,
            "summary": {
                "lines": self.lines,
                "bytes": self.bytes,
                "errors": self.errors,
                "warnings": self.warnings,
                "findings": len(self.findings),
                "error_findings": len(self.error_findings),
                "dropped": self.dropped,
                "categories": category_counts(self.findings),
            },
            "phases": [p.to_dict() for p in self.phases],
            "wheels": [w.to_dict() for w in self.wheels],
            "findings": [self._finding_dict(f) for f in self.findings],
        }

    def _finding_dict(self, f: Finding) -> dict[str, Any]:
        d = f.to_dict()
        if self.recipe_patchsets:
            d["patchset_in_recipe"] = [p for p in f.patchsets if p in self.recipe_patchsets]
        return d


def category_counts(findings: Iterable[Finding]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in findings:
        if f.is_error:
            counts[f.category] = counts.get(f.category, 0) + f.count
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def patchset_hint(f: Finding, recipe_patchsets: Sequence[str] = ()) -> str:
    """Which patchset fixes it: the recipe's own ones first (those are what `lgpatch apply` can add)."""
    if not f.patchsets:
        return ""
    if recipe_patchsets:
        mine = [p for p in f.patchsets if p in recipe_patchsets]
        if mine:
            return ", ".join(mine)
    return ", ".join(f.patchsets)
