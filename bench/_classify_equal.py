"""`--equal-against`: the `lgpatch classify --json` of two checkouts compared on the log fixtures and the bench's logs.

Used by classify_bench.py (`python bench/classify_bench.py --equal-against DIR`); no timing here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from classify_logs import generate, generate_cmake_tail, generate_dense, generate_dense_split, generate_dense_words

REPO = Path(__file__).resolve().parent.parent

__all__ = ["equal_against"]

_TIMING_FIELDS = frozenset({"started", "duration", "duration_s"})


def _untimed(value: object) -> object:
    """A --json document without the fields that say when and how long (at every level)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in _TIMING_FIELDS}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _json_of(path: Path, checkout: Path, cache: Path) -> bytes:
    """`lgpatch classify LOG --json` of `checkout`'s package (run from its root, PYTHONPATH pointing at it, a rule
    cache of its own), the timing fields removed, re-serialised canonically."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "LGPATCH_CACHE": str(cache)}
    out = subprocess.run([sys.executable, "-m", "legacy_gpu_patch", "classify", str(path), "--json"],
                         capture_output=True, cwd=checkout, env=env)
    try:
        doc = _untimed(json.loads(out.stdout))
    except ValueError:
        return b"not JSON (exit %d): %r" % (out.returncode, out.stderr[-400:])
    return json.dumps(doc, sort_keys=True, ensure_ascii=False).encode() + b" exit %d" % out.returncode


def equal_against(other: Path, work: Path, size_mb: int) -> int:
    """Compare the --json of this checkout and `other` on every log fixture and on generated quiet, error-dense,
    cmake-tail, error-dense-words, -names and -paths logs of `size_mb`; prints one line a log, returns the number that
    differ."""
    logs = sorted(p for p in (REPO / "tests" / "fixtures" / "logs").rglob("*")
                  if p.is_file() and p.suffix in (".log", ".corpus"))
    for name, make in (("quiet", generate), ("dense", generate_dense), ("cmake-tail", generate_cmake_tail),
                       ("dense-words", generate_dense_words),
                       ("dense-names", lambda path, size: generate_dense_split(path, size, "names")),
                       ("dense-paths", lambda path, size: generate_dense_split(path, size, "paths"))):
        logs.append(work / f"{name}-{size_mb}mb.log")
        make(logs[-1], size_mb << 20)
    differ = 0
    for log in logs:
        mine = _json_of(log, REPO, work / "cache-this")
        theirs = _json_of(log, other, work / "cache-other")
        same = mine == theirs and b"not JSON" not in mine
        differ += not same
        print(f"{'identical' if same else 'DIFFERENT'}  {log.relative_to(REPO) if log.is_relative_to(REPO) else log}"
              f"  ({len(mine)} bytes of JSON)")
    print(f"{len(logs) - differ} of {len(logs)} logs identical")
    return differ
