"""The before/after table of chainer_speed.py reports (and chainer_reduction_check.py summaries) in Markdown."""

from __future__ import annotations

from typing import Any


def _fmt(v: Any) -> str:
    return "—" if v is None else str(v)


def render(reports: list[dict[str, Any]]) -> str:
    benches = [r for r in reports if "cases" in r and r.get("mode") != "interleaved"]
    checks = [r for r in reports if "checks_passed" in r]
    out = []
    for r in reports:
        if r.get("mode") == "interleaved":
            from _speed_interleaved_table import render_interleaved
            from _speed_large import BYTES as LARGE
            from _speed_workloads import BYTES
            out += [*render_interleaved(r, {**BYTES, **LARGE}), ""]
    if benches:
        labels = [b["label"] for b in benches]
        head = ["case"]
        for lab in labels:
            head += [f"{lab} chainer ms", f"{lab} torch ms", f"{lab} ratio", f"{lab} % of copy bw"]
        if len(benches) == 2:
            head.append(f"speed-up {labels[0]}/{labels[1]}")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        names = list(dict.fromkeys(n for b in benches for n in b["cases"]))
        for name in names:
            cells = [name]
            for b in benches:
                row = b["cases"].get(name, {})
                cells += [_fmt(row.get("chainer_ms")), _fmt(row.get("torch_ms")), _fmt(row.get("ratio")),
                          _fmt(row.get("chainer_pct_copy"))]
            if len(benches) == 2:
                old, new = (b["cases"].get(name, {}).get("chainer_ms") for b in benches)
                cells.append(_fmt(round(old / new, 2) if old and new else None))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        for b in benches:
            s = b.get("startup_s", {})
            out.append("- {}: copy bandwidth {} GB/s; start-up to first inference chainer {} s, torch {} s; "
                       "split patch present: {}; errors: {}".format(
                           b["label"], b.get("copy_bandwidth_GBps"), _fmt(s.get("chainer")), _fmt(s.get("torch")),
                           b.get("split_patch"), b.get("errors") or "none"))
        out.append("")
        out.extend(goals(benches[-1]))
    for c in checks:
        first = f"; first failures: {c['failures'][:5]}" if c["failures"] else ""
        out.append(f"- reduction check {c['label']}: {c['checks_passed']} passed, {c['checks_failed']} failed{first}")
    return "\n".join(out)


def goals(bench: dict[str, Any]) -> list[str]:
    """Issue 17's goals, evaluated on one report."""
    cases, lines = bench["cases"], ["Goals ({}):".format(bench["label"])]
    for name in ("inspection_infer_b1", "inspection_infer_b32"):
        ratio = cases.get(name, {}).get("ratio")
        lines.append("- {} within 1.5x of torch: {} (ratio {})".format(
            name, "yes" if ratio is not None and ratio <= 1.5 else "no", _fmt(ratio)))
    low = [(n, r["chainer_pct_copy"]) for n, r in cases.items()
           if "chainer_pct_copy" in r and r["chainer_pct_copy"] < 50]
    lines.append("- memory-bound ops below 50%% of copy bandwidth: %s" % (low or "none"))
    s = bench.get("startup_s", {})
    if s.get("chainer") and s.get("torch"):
        ratio = round(s["chainer"] / s["torch"], 2)
        lines.append("- start-up <= 1.2x torch: {} (ratio {})".format("yes" if ratio <= 1.2 else "no", ratio))
    return lines
