"""The interleaved before/after bench: one worker process per build (_speed_worker.py), both alive at once,
asked in turn for one batch of one case, so that a slow patch of the host (another job's compile, a frequency
drop) lands on both builds instead of on whichever ran at that moment.

Per case, `rounds` rounds; in each round every build times one batch of Chainer and one batch of torch, and the
order of the builds flips every round (A B, B A, ...), so a drift within the case cancels too. Torch runs in both
processes: its two medians are the control, a torch ratio far from 1.00 says the host moved between the builds'
samples and by how much. Reported per build and side: the median and the range (min-max) over the rounds.
"""

from __future__ import annotations

import json
import os
import select
import statistics
import subprocess
import sys
import time
from typing import Any

from _speed_worker import MARK

# Cases whose launches and calls per iteration are counted (in every build; torch once).
COUNT_CASES = ("inspection_infer_b1", "inspection_infer_b1_no_type_check", "inspection_infer_b32", "vgg_infer_b1",
               "seed_conv7x7_fwd_sum_bwd", "softmax_cross_entropy_fwd_bwd_4096x1000", "broadcast_add_fwd_bwd_NCHW",
               "conv3x3_cudnn_fwd_32x64x56x56", "F.sum_fwd_bwd_6.4M")


class Client:
    """A worker process and its answers, read from the raw pipe so that a timeout can be kept."""

    def __init__(self, label: str, build_dir: str, python: str, here: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([build_dir, here])
        self.label, self.buffer, self.dead = label, b"", ""
        self.proc = subprocess.Popen([python, os.path.join(here, "chainer_speed.py"), "--serve", "--label", label],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self.dead:
            return {"error": self.dead}
        try:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            return self._answer(self.proc.stdout.fileno(), time.monotonic() + timeout)
        except (OSError, TimeoutError, EOFError) as exc:
            self.dead = f"worker {self.label}: {type(exc).__name__}: {exc}"
            self.proc.kill()
            return {"error": self.dead}

    def _answer(self, fd: int, deadline: float) -> dict[str, Any]:
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if line.startswith(MARK.encode()):
                    return json.loads(line[len(MARK):])
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no answer in time")
            if select.select([fd], [], [], remaining)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError(f"exited with {self.proc.wait()}")
                self.buffer += chunk

    def close(self) -> None:
        if not self.dead:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b'{"op": "quit"}\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


def stats(samples: list[float]) -> dict[str, Any]:
    ms = [1000 * s for s in samples]
    median = statistics.median(ms)
    return {"median_ms": round(median, 4), "min_ms": round(min(ms), 4), "max_ms": round(max(ms), 4),
            "spread_pct": round(100 * (max(ms) - min(ms)) / median, 1), "samples": len(ms)}


def time_case(clients: dict[str, Client], name: str, sides: dict[str, tuple[str, ...]], rounds: int,
              min_batch_ms: float, errors: dict[str, str]) -> dict[str, Any]:
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in clients}
    labels = list(clients)
    for r in range(rounds):
        for label in labels if r % 2 == 0 else labels[::-1]:
            for side in sides[label]:
                if f"{name}/{label}/{side}" in errors:
                    continue
                answer = clients[label].ask({"op": "time", "case": name, "side": side,
                                             "min_batch_ms": min_batch_ms}, timeout=120)
                if "error" in answer:
                    errors[f"{name}/{label}/{side}"] = answer["error"]
                else:
                    samples[label].setdefault(side, []).append(answer["s"])
    return {label: {side: stats(s) for side, s in by_side.items()} for label, by_side in samples.items()}


def add_bandwidth(row: dict[str, Any], nbytes: float, builds: dict[str, dict[str, Any]]) -> None:
    for label, by_side in row.items():
        for _side, st in by_side.items():
            gbps = nbytes / (st["median_ms"] / 1000) / 1e9
            st["GBps"] = round(gbps, 1)
            copy = builds[label].get("copy_bandwidth_GBps")
            if copy:
                st["pct_copy"] = round(100 * gbps / copy, 1)


def startups(clients: dict[str, Client], build_dirs: dict[str, str], here: str, starts: int) -> dict[str, Any]:
    import chainer_speed
    out: dict[str, Any] = {}
    times: dict[str, list[float]] = {label: [] for label in build_dirs}
    for _ in range(starts):  # alternating, like the cases
        for label, build_dir in build_dirs.items():
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([here, build_dir])
            t = chainer_speed.startup(chainer_speed.STARTUP_CHAINER, env, 1)
            if t is not None:
                times[label].append(t)
    for label, ts in times.items():
        out[label] = round(statistics.median(ts), 3) if ts else None
    torch_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out["torch"] = chainer_speed.startup(chainer_speed.STARTUP_TORCH, torch_env, starts)
    return out


def run(build_dirs: dict[str, str], args: Any) -> dict[str, Any]:
    import _speed_large
    import _speed_workloads
    import chainer_speed
    here = os.path.dirname(os.path.abspath(__file__))
    clients = {label: Client(label, d, sys.executable, here) for label, d in build_dirs.items()}
    report: dict[str, Any] = {"mode": "interleaved", "labels": list(build_dirs), "rounds": args.rounds,
                              "builds": {}, "cases": {}, "counts": {}, "errors": {}}
    try:
        for label, client in clients.items():
            report["builds"][label] = client.ask({"op": "info"}, timeout=600)
        names = list(dict.fromkeys(n for b in report["builds"].values() for n in b.get("cases", [])))
        torch_names = {label: set(b.get("torch_cases", [])) for label, b in report["builds"].items()}
        nbytes: dict[str, float] = {**_speed_workloads.BYTES, **_speed_large.BYTES}
        deadline = time.perf_counter() + args.budget_s
        for name in names:
            if args.only and not any(o in name for o in args.only):
                continue
            if time.perf_counter() > deadline:
                report["errors"][name] = "skipped: time budget"
                continue
            sides: dict[str, tuple[str, ...]] = {
                label: ("chainer", "torch") if name in torch_names[label] else ("chainer",) for label in clients}
            row = time_case(clients, name, sides, args.rounds, args.min_batch_ms, report["errors"])
            if name in nbytes:
                add_bandwidth(row, nbytes[name], report["builds"])
            report["cases"][name] = row
            chainer_speed.save(args.json, report)  # a run cut short by its timeout still leaves the cases
            print(f"{name:44s} {json.dumps(row)}", file=sys.stderr, flush=True)
        for name in COUNT_CASES:
            if name in names and (not args.only or any(o in name for o in args.only)):
                with_torch = name in torch_names[report["labels"][0]]
                report["counts"][name] = count_case(clients, name, with_torch)
        if args.starts:
            report["startup_s"] = startups(clients, build_dirs, here, args.starts)
    finally:
        for client in clients.values():
            client.close()
    return report


def count_case(clients: dict[str, Client], name: str, with_torch: bool) -> dict[str, Any]:
    counts = {label: client.ask({"op": "count", "case": name, "side": "chainer"}, timeout=120)
              for label, client in clients.items()}
    if with_torch:
        counts["torch"] = next(iter(clients.values())).ask({"op": "count", "case": name, "side": "torch"}, 120)
    return counts

