"""`lgpatch report merge DIR…`: one summary of many `lgpatch ci` jobs — per job its status, wheel (name, size,
sha256) and first root-cause finding with its patchset — and, given the previous run's summary, what changed.

The JSON summary is also the `--previous` input of the next run, so a nightly can say "newly failing" or "fixed".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from legacy_gpu_patch.errors import ConfigError, StateError

SUMMARY_SCHEMA = 1


def find_reports(dirs: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for d in dirs:
        if d.is_file() and d.name == "ci.json":
            found.append(d)
        elif d.is_dir():
            found += sorted(d.rglob("ci.json"))
        else:
            raise StateError(f"{d}: no such folder")
    if not found:
        raise StateError(f"no ci.json report under {', '.join(map(str, dirs))}",
                         hint="`lgpatch ci --out DIR` writes DIR/reports/ci.json")
    return found


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable JSON report: {exc}") from exc
    if not isinstance(data, dict) or data.get("kind") not in ("ci", "ci-summary"):
        kind = data.get("kind") if isinstance(data, dict) else "?"
        raise ConfigError(f"{path}: not an lgpatch ci report (kind {kind})")
    return data


def job_entry(report: dict[str, Any], path: Path) -> dict[str, Any]:
    wheel = report.get("wheel") or None
    cause = (report.get("build") or {}).get("first_finding")
    return {
        "job": report.get("job"), "recipe": report.get("recipe"), "params": report.get("params", {}),
        "status": report.get("status"), "exit_code": report.get("exit_code"),
        "failure_class": report.get("failure_class", ""), "failed_stage": report.get("failed_stage", ""),
        "message": report.get("message", ""), "report": str(path),
        "duration_s": report.get("duration_s"),
        "wheel": {k: wheel[k] for k in ("name", "size", "sha256")} if wheel else None,
        "root_cause": {k: cause.get(k) for k in ("category", "message", "where", "patchsets", "fix")}
        if cause else None,
    }


def _change(job: dict[str, Any], before: dict[str, Any] | None) -> str:
    if before is None:
        return "new job"
    was_ok, is_ok = before.get("status") == "ok", job["status"] == "ok"
    if was_ok and is_ok:
        old, new = (before.get("wheel") or {}).get("sha256"), (job.get("wheel") or {}).get("sha256")
        return "ok (same wheel)" if old == new else "ok (wheel changed)"
    if was_ok:
        return "newly failing"
    if is_ok:
        return "fixed"
    same = (before.get("failure_class"), (before.get("root_cause") or {}).get("category")) == (
        job["failure_class"], (job.get("root_cause") or {}).get("category"))
    return "still failing (same cause)" if same else "still failing (different cause)"


def merge(dirs: Sequence[Path], previous: Path | None = None) -> dict[str, Any]:
    jobs = [job_entry(_load(p), p) for p in find_reports(dirs)]
    jobs.sort(key=lambda j: (j["status"] == "ok", str(j["job"])))  # failures first
    before: dict[str, dict[str, Any]] = {}
    if previous is not None:
        prev = _load(previous)
        if prev.get("kind") != "ci-summary":
            raise ConfigError(f"{previous}: --previous wants a summary from `lgpatch report merge --format json`")
        before = {j["job"]: j for j in prev.get("jobs", [])}
    for j in jobs:
        j["change"] = _change(j, before.get(j["job"])) if previous is not None else ""
    names = {j["job"] for j in jobs}
    counts = {"jobs": len(jobs), "ok": sum(j["status"] == "ok" for j in jobs)}
    counts["failed"] = counts["jobs"] - counts["ok"]
    return {"schema": SUMMARY_SCHEMA, "kind": "ci-summary", "counts": counts, "jobs": jobs,
            "previous": str(previous) if previous else None,
            "gone": sorted(n for n in before if n not in names)}


def _cell(text: Any, limit: int = 120) -> str:
    text = " ".join(str(text if text is not None else "").split())
    return (text[: limit - 1] + "…" if len(text) > limit else text).replace("|", "\\|")


def to_markdown(summary: dict[str, Any]) -> str:
    c = summary["counts"]
    lines = [f"## lgpatch nightly: {c['ok']} of {c['jobs']} job(s) ok, {c['failed']} failed", ""]
    with_change = summary.get("previous") is not None
    head = "| job | status | wheel | size | sha256 | first root cause | patchset |" + (" vs last run |"
                                                                                     if with_change else "")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for j in summary["jobs"]:
        status = "✅ ok" if j["status"] == "ok" else (
            f"❌ {j['failure_class']} (exit {j['exit_code']}) in {j['failed_stage']}")
        w = j.get("wheel") or {}
        cause = j.get("root_cause") or {}
        what = f"`{cause['category']}` {cause.get('where') or ''}: {cause.get('message')}" if cause else (
            "" if j["status"] == "ok" else j["message"])
        row = (f"| {_cell(j['job'], 60)} | {status} | {_cell(w.get('name', ''), 80)} | {w.get('size', '')} | "
               f"{('`' + w['sha256'][:16] + '…`') if w.get('sha256') else ''} | {_cell(what)} | "
               f"{_cell(', '.join(cause.get('patchsets') or []), 60)} |")
        lines.append(row + (f" {j['change']} |" if with_change else ""))
    if summary.get("gone"):
        lines += ["", "Jobs of the last run not in this one: " + ", ".join(summary["gone"])]
    return "\n".join(lines) + "\n"
