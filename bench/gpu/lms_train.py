"""LMS swapping on a real training run: a CNN whose working set is several times the LMS limit.

    PYTHONPATH=<PyTorch 1.5 + LMS wheel folder> python3 bench/gpu/lms_train.py [--modern-python python3]

In this process (the torch on sys.path must have LMS: torch.cuda.set_enabled_lms):
  1. pinned host<->device bandwidth (one 1 GiB pinned buffer, both directions)
  2. N training steps without LMS: per-step loss and time, peak allocated = the working set
  3. the same N steps from the same seeds with LMS on and torch.cuda.set_limit_lms(working set / RATIO):
     per-step loss (must equal run 2: relative difference < 1e-4), time, memory_stats()["reclaimed_bytes"]
     and ["reclaimed"] (what LMS swapped out), peak allocated
  4. the floor of an LMS step: bytes swapped out and back in / the measured pinned bandwidths
Then, side by side, in a second process (--modern-python, the machine's own modern torch, PYTHONPATH cleared):
  5. the same model, data and seeds under torch.autograd.graph.save_on_cpu(pin_memory=True) with the LMS limit
     as the memory budget (torch.cuda.set_per_process_memory_fraction).
Synthetic data, fixed seeds, deterministic cuDNN (benchmark off, no TF32; --cudnn off: no cuDNN). Prints a table and
a verdict; --json FILE writes every figure. Stand-alone: torch only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch

GIB = 1024**3


def make_model(width: int, depth: int) -> torch.nn.Module:
    layers = [torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU()]
    for _ in range(depth - 1):
        layers += [torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU()]
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(width, 10)]
    return torch.nn.Sequential(*layers)


def batches(args: argparse.Namespace):
    gen = torch.Generator().manual_seed(1234)
    for _ in range(args.steps):
        x = torch.randn(args.batch, 3, args.hw, args.hw, generator=gen)
        y = torch.randint(0, 10, (args.batch,), generator=gen)
        yield x, y


CUDNN = {"mode": "deterministic"}  # --cudnn: "deterministic" (the setting) or "off"


def deterministic() -> None:
    # "off": convolutions through ATen's own CUDA kernels, for a run that must not depend on cuDNN's algorithms
    torch.backends.cudnn.enabled = CUDNN["mode"] != "off"
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    if hasattr(torch.backends.cudnn, "allow_tf32"):  # modern torch: FP32 as 1.5 computed it
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False


def stat(name: str) -> int:
    return int(torch.cuda.memory_stats().get(name, 0))


def train(args: argparse.Namespace, context=None) -> dict:
    """args.steps SGD steps from fixed seeds; per-step loss, time and LMS's reclaimed bytes."""
    deterministic()
    torch.manual_seed(0)
    model = make_model(args.width, args.depth).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, times, reclaimed = [], [], []
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for x, y in batches(args):
        x, y = x.cuda(), y.cuda()
        before = stat("reclaimed_bytes")
        t = time.perf_counter()
        opt.zero_grad()
        if context is None:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
        else:
            with context():
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
        opt.step()
        losses.append(float(loss.item()))
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        reclaimed.append(stat("reclaimed_bytes") - before)
        del x, y, loss
    return {"losses": losses, "times": times, "reclaimed_bytes": reclaimed,
            "reclaimed_blocks": stat("reclaimed"), "peak_allocated": int(torch.cuda.max_memory_allocated()),
            "peak_reserved": int(torch.cuda.max_memory_reserved() if hasattr(torch.cuda, "max_memory_reserved")
                                 else torch.cuda.max_memory_cached())}


def bandwidth() -> dict:
    n = GIB // 4
    host = torch.empty(n, dtype=torch.float32).pin_memory()
    dev = torch.empty(n, dtype=torch.float32, device="cuda")
    out = {}
    for name, (dst, src) in {"h2d": (dev, host), "d2h": (host, dev)}.items():
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(5):
            dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        out[name] = 5 * n * 4 / (time.perf_counter() - t)
    del host, dev
    torch.cuda.empty_cache()
    return out


def saved_bytes(args: argparse.Namespace) -> int:
    """Bytes autograd saves for one step of the model (what save_on_cpu moves out and back)."""
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    deterministic()
    torch.manual_seed(0)
    model = make_model(args.width, args.depth).cuda()
    x, y = next(batches(args))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    loss.backward()
    del model, loss
    torch.cuda.empty_cache()
    return total[0]


def modern_worker(args: argparse.Namespace) -> dict:
    """torch >= 2: save_on_cpu(pin_memory=True) under the LMS limit as the memory budget."""
    bw = bandwidth()
    moved = saved_bytes(args)
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, args.budget / total))
    result = {"torch": torch.__version__, "bandwidth": bw, "saved_bytes_per_step": moved}
    try:
        result.update(train(args, lambda: torch.autograd.graph.save_on_cpu(pin_memory=True)))
    except RuntimeError as exc:  # torch.OutOfMemoryError is a RuntimeError
        result["error"] = str(exc).splitlines()[0][:300]
    return result


def lms_runs(args: argparse.Namespace) -> dict:
    bw = bandwidth()
    base = train(args)
    working_set = base["peak_allocated"]
    tried = []
    for ratio in (args.ratio, 4.0):  # a limit below what one layer's backward holds at once may not be reachable
        limit = int(working_set / ratio)
        torch.cuda.empty_cache()
        torch.cuda.set_enabled_lms(True)
        torch.cuda.set_limit_lms(limit)
        try:
            lms = train(args)
            break
        except RuntimeError as exc:
            tried.append(f"limit {limit} (working set / {ratio}): {str(exc).splitlines()[0][:200]}")
            lms = None
        finally:
            torch.cuda.set_enabled_lms(False)
    if lms is None:
        raise SystemExit("LMS run failed at every limit: " + "; ".join(tried))
    return {"torch": torch.__version__, "bandwidth": bw, "no_lms": base, "lms": lms, "limit": limit,
            "working_set": working_set, "failed_limits": tried}


def median(xs: list) -> float:
    s = sorted(xs)
    return s[len(s) // 2]


def verdict(r: dict, modern: dict | None) -> list:
    base, lms, bw = r["no_lms"], r["lms"], r["bandwidth"]
    diffs = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(lms["losses"], base["losses"])]
    steady = slice(1, None)  # step 0 includes cuDNN/cuBLAS start-up
    swapped = median(lms["reclaimed_bytes"][steady])
    floor = swapped / bw["d2h"] + swapped / bw["h2d"]
    t_base, t_lms = median(base["times"][steady]), median(lms["times"][steady])
    lines = [
        f"working set (peak allocated without LMS) {base['peak_allocated'] / GIB:.2f} GiB; LMS limit "
        f"{r['limit'] / GIB:.2f} GiB (working set / limit = {base['peak_allocated'] / r['limit']:.1f}x)",
        f"pinned bandwidth: H2D {bw['h2d'] / 1e9:.1f} GB/s, D2H {bw['d2h'] / 1e9:.1f} GB/s; cuDNN: {CUDNN['mode']}",
        "",
        "| run | step time (median, s) | peak allocated GiB | swapped out per step GiB | loss rel diff vs no-LMS |",
        "|---|---|---|---|---|",
        f"| torch {r['torch']} no LMS | {t_base:.3f} | {base['peak_allocated'] / GIB:.2f} | 0 | 0 |",
        f"| torch {r['torch']} LMS | {t_lms:.3f} | {lms['peak_allocated'] / GIB:.2f} | {swapped / GIB:.2f} | "
        f"{max(diffs):.2e} |",
        f"| floor: swapped bytes out + in / pinned bandwidth | {floor:.3f} | | | |",
    ]
    if modern is not None:
        if "error" in modern:
            lines.append(f"| torch {modern['torch']} save_on_cpu(pin_memory=True), same budget | {modern['error']} |")
        else:
            mdiff = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(modern["losses"], base["losses"]))
            mbw, moved = modern["bandwidth"], modern["saved_bytes_per_step"]
            mfloor = moved / mbw["d2h"] + moved / mbw["h2d"]
            lines.append(f"| torch {modern['torch']} save_on_cpu(pin_memory=True), same budget | "
                         f"{median(modern['times'][steady]):.3f} | {modern['peak_allocated'] / GIB:.2f} | "
                         f"{moved / GIB:.2f} (all saved) | {mdiff:.2e} (other torch) |")
            lines.append(f"| floor for save_on_cpu (saved bytes out + in) | {mfloor:.3f} | | | |")
    ok = max(diffs) < 1e-4 and sum(lms["reclaimed_bytes"]) > 0 and base["peak_allocated"] >= 4 * r["limit"]
    lines += ["", "per-step losses (no LMS): " + " ".join(f"{v:.7f}" for v in base["losses"]),
              "per-step losses (LMS):    " + " ".join(f"{v:.7f}" for v in lms["losses"]),
              "per-step reclaimed_bytes (LMS): " + " ".join(str(v) for v in lms["reclaimed_bytes"]),
              f"LMS step / floor = {t_lms / floor:.2f}x (goal <= 1.5x); LMS step / no-LMS step = "
              f"{t_lms / t_base:.2f}x" if floor > 0 else "LMS swapped nothing: no floor",
              f"verdict: {'ok' if ok else 'FAIL'} (completes; losses equal within 1e-4: {max(diffs) < 1e-4}; "
              f"swapped: {sum(lms['reclaimed_bytes']) > 0}; working set >= 4x limit: "
              f"{base['peak_allocated'] >= 4 * r['limit']})"]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--ratio", type=float, default=5.0, help="working set / LMS limit")
    ap.add_argument("--modern-python", default=None, help="interpreter with a modern torch for save_on_cpu")
    ap.add_argument("--worker", choices=["modern"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--budget", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--cudnn", choices=["deterministic", "off"], default="deterministic",
                    help="cuDNN with deterministic algorithms (default), or cuDNN off")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    CUDNN["mode"] = args.cudnn
    if args.worker == "modern":
        print(json.dumps(modern_worker(args)))
        return 0
    r = lms_runs(args)
    modern = None
    if args.modern_python:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        cmd = [args.modern_python, os.path.abspath(__file__), "--worker", "modern", "--budget", str(r["limit"]),
               "--steps", str(args.steps), "--batch", str(args.batch), "--hw", str(args.hw),
               "--width", str(args.width), "--depth", str(args.depth), "--cudnn", args.cudnn]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/")
        try:
            modern = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            modern = {"torch": "?", "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
        r["modern"] = modern
    lines = verdict(r, modern)
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(r, fh, indent=1)
    return 0 if lines[-1].startswith("verdict: ok") else 1


if __name__ == "__main__":
    sys.exit(main())
