"""Baseline diff: the findings of a failed build's log that a passing build's log of the same tree does not have.

A green log carries its own innocent-looking errors (optional CMake checks that fail, warnings promoted by one
flag, a test that expects an exception); the step that lifts root-cause precision is to subtract them. Findings
are compared by rule and normalised message (findings.baseline_key: directories, line and column numbers,
temporary names, addresses and timings stripped), so the same error in a rebuilt tree, a moved checkout or another
run's temp dir counts as known.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable
from pathlib import Path

from legacy_gpu_patch.classify.classifier import Classifier, classify_stream
from legacy_gpu_patch.classify.findings import Finding, baseline_key
from legacy_gpu_patch.errors import ConfigError

__all__ = ["baseline_keys", "new_findings"]


def baseline_keys(log: Path, *, max_findings: int = 100_000) -> set[tuple[str, str]]:
    """The keys of every finding of a (passing) build's log; gzipped logs are read as CI hands them out."""
    if not log.is_file():
        raise ConfigError(f"{log}: no such baseline log", hint="--baseline takes the log of a passing build")
    # a high cap: a finding of the green log dropped for the cap would come back as "new"
    c = Classifier(max_findings=max_findings, context_before=0, context_after=0)
    try:
        with open(log, "rb") as probe:
            gzipped = probe.read(2) == b"\x1f\x8b"
        with (gzip.open(log, "rb") if gzipped else open(log, "rb")) as fh:
            classify_stream(fh, c)  # type: ignore[arg-type]
    except (OSError, EOFError, zlib.error) as exc:  # unreadable, or a broken .gz (BadGzipFile is an OSError)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise ConfigError(f"{log}: cannot read baseline log: {reason}",
                          hint="--baseline takes the log of a passing build (plain text or gzipped)") from None
    return {baseline_key(f) for f in c.findings()}


def new_findings(findings: Iterable[Finding], known: set[tuple[str, str]]) -> list[Finding]:
    """The findings whose key the baseline does not have, in their order."""
    return [f for f in findings if baseline_key(f) not in known]
