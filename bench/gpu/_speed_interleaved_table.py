"""The tables of an interleaved report (chainer_speed.py --interleave): times with their range over the rounds,
the torch control, bandwidth on large inputs, launches and calls per iteration, and issue 17's goals."""

from __future__ import annotations

from typing import Any

LARGE_MIN_BYTES = 256 * 10**6  # "large input": several times the H200's 50 MB L2


def _fmt(v: Any) -> str:
    return "—" if v is None else str(v)


def _ranged(st: dict[str, Any] | None) -> str:
    if not st:
        return "—"
    return f"{st['median_ms']} [{st['min_ms']}–{st['max_ms']}]"


def _ratio(a: float | None, b: float | None, digits: int = 2) -> float | None:
    return round(a / b, digits) if a and b else None


def case_rows(report: dict[str, Any]) -> list[str]:
    labels = report["labels"]
    first, last = labels[0], labels[-1]
    head = ["case"] + [f"{lab} chainer ms [range]" for lab in labels]
    head += [f"torch ms in {lab}" for lab in labels]
    head += [f"{last}/torch", f"speed-up {first}/{last}", "ranges apart", f"torch control {last}/{first}",
             f"{last} GB/s", f"{last} % of copy"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in report["cases"].items():
        chainer = [row.get(lab, {}).get("chainer") for lab in labels]
        torch = [row.get(lab, {}).get("torch") for lab in labels]
        med = [c["median_ms"] if c else None for c in chainer]
        tmed = [t["median_ms"] if t else None for t in torch]
        apart = None
        if chainer[0] and chainer[-1]:
            apart = "yes" if (chainer[0]["min_ms"] > chainer[-1]["max_ms"]
                              or chainer[-1]["min_ms"] > chainer[0]["max_ms"]) else "no"
        cells = [name] + [_ranged(c) for c in chainer] + [_fmt(t) for t in tmed]
        cells += [_fmt(_ratio(med[-1], tmed[-1])), _fmt(_ratio(med[0], med[-1])), _fmt(apart),
                  _fmt(_ratio(tmed[-1], tmed[0]))]
        cells += [_fmt((chainer[-1] or {}).get("GBps")), _fmt((chainer[-1] or {}).get("pct_copy"))]
        out.append("| " + " | ".join(cells) + " |")
    return out


def count_rows(report: dict[str, Any]) -> list[str]:
    """Launches and calls per iteration, and wall time per launch / per Python call (the median of the cases)."""
    if not report.get("counts"):
        return []
    head = ["case", "build", "ms", "kernels", "memsets", "memcpys", "launch API calls", "Python calls", "C calls",
            "Chainer Functions", "µs per kernel", "µs per Python call"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, by_build in report["counts"].items():
        for build, c in by_build.items():
            side = "torch" if build == "torch" else "chainer"
            timed_in = report["labels"][0] if build == "torch" else build
            st = report["cases"].get(name, {}).get(timed_in, {}).get(side)
            ms = st["median_ms"] if st else None
            per_kernel = round(1000 * ms / c["kernels"], 1) if ms and c.get("kernels") else None
            per_call = round(1000 * ms / c["python_calls"], 2) if ms and c.get("python_calls") else None
            cells = [name, build, _fmt(ms)] + [_fmt(c.get(k)) for k in (
                "kernels", "memsets", "memcpys", "launch_api_calls", "python_calls", "c_calls", "chainer_functions")]
            cells += [_fmt(per_kernel), _fmt(per_call)]
            out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for name, by_build in report["counts"].items():
        for build, c in by_build.items():
            if c.get("top_kernels") or c.get("gpu_activity_error") or c.get("error"):
                out.append(f"- {name} / {build}: kernels {c.get('top_kernels')}"
                           f"{'; ' + c['gpu_activity_error'] if c.get('gpu_activity_error') else ''}"
                           f"{'; ' + c['error'] if c.get('error') else ''}")
    return out


def goals(report: dict[str, Any], nbytes: dict[str, float]) -> list[str]:
    last = report["labels"][-1]
    lines = [f"Goals ({last}, medians of {report['rounds']} interleaved rounds):"]

    def med(name: str, side: str) -> float | None:
        st = report["cases"].get(name, {}).get(last, {}).get(side)
        return st["median_ms"] if st else None
    for name in ("inspection_infer_b1", "inspection_infer_b32"):
        ratio = _ratio(med(name, "chainer"), med(name, "torch"))
        lines.append("- {} within 1.5x of torch: {} (ratio {})".format(
            name, "yes" if ratio is not None and ratio <= 1.5 else "no", _fmt(ratio)))
    low = []
    for name, row in report["cases"].items():
        st = row.get(last, {}).get("chainer") or {}
        if nbytes.get(name, 0) >= LARGE_MIN_BYTES and st.get("pct_copy") is not None and st["pct_copy"] < 50:
            low.append((name, st["pct_copy"]))
    lines.append(f"- memory-bound ops on large inputs (>= 256 MB moved) below 50% of copy bandwidth: {low or 'none'}")
    s = report.get("startup_s", {})
    ratio = _ratio(s.get(last), s.get("torch"))
    if ratio is not None:
        lines.append("- start-up <= 1.2x torch: {} (ratio {})".format("yes" if ratio <= 1.2 else "no", ratio))
    return lines


def render_interleaved(report: dict[str, Any], nbytes: dict[str, float]) -> list[str]:
    out = [*case_rows(report), ""]
    for label, b in report["builds"].items():
        out.append(f"- {label}: copy bandwidth {b.get('copy_bandwidth_GBps')} GB/s; split patch present: "
                   f"{b.get('split_patch')}; start-up to first inference "
                   f"{_fmt(report.get('startup_s', {}).get(label))} s; worker errors: {b.get('errors') or 'none'}")
    out.append(f"- torch start-up {_fmt(report.get('startup_s', {}).get('torch'))} s; "
               f"errors: {report.get('errors') or 'none'}")
    out.append("")
    counts = count_rows(report)
    if counts:
        out += ["Launches and calls per iteration (one iteration after a warm-up):", "", *counts, ""]
    return out + goals(report, nbytes)
