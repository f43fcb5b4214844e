#!/usr/bin/env python3
"""GPU proof for the cupy-ptx-fallback patchset: Chainer 1.24 trains through CuPy's PTX path, and its start-up.

Runs on a GPU machine against a built Chainer 1.24 wheel of the chainer-1.24 recipe, unpacked into --site (it goes
first on PYTHONPATH, so it wins over any other `cupy` installed there). Every measurement is a fresh process:

  native_first / native_second   CuPy's native path (cubin for the device): first start (nvcc compiles every kernel)
                                 and starts with a warm kernel cache, the baseline
  ptx_first                      CUPY_FORCE_PTX=1: PTX for the device's own arch, JIT-compiled by the driver; an MLP
                                 trains on synthetic data and its loss must fall
  ptx_second                     the same again: kernel cache warm, the driver's JIT cache holds the result
                                 (configured by the patched CuPy at import: CUDA_CACHE_MAXSIZE=4294967296)
  ptx_disabled                   the same with CUDA_CACHE_DISABLE=1: the JIT is paid on every start
  ptx_small_raised               CUDA_CACHE_MAXSIZE=1000000 given: the patched CuPy raises it at import (recorded)
  ptx75_first / ptx75_second     CUPY_PTX_ARCH=compute_75: PTX for an older arch (what an old toolkit emits for a
                                 GPU it does not know), JIT to this GPU; trains too

Start-up is `first_step_s`: from the child's first line to the end of the first training step (imports, CUDA init,
kernel cache look-ups, module loads and JIT). Medians over --repeat runs; ratios against native_second.

    python3 bench/gpu/chainer_ptx_proof.py --site /path/to/unpacked-wheel --out "$OUT/chainer_ptx_proof.json"

Exit status 0 when both PTX runs trained with the PTX target and only PTX entries in their kernel cache, else 1.
Takes about 2 minutes (three first starts compile ~40 kernels with nvcc); --budget-s bounds it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _chainer_mlp import MLP_CLASS  # from this script's folder (sys.path[0] when it runs)

CHILD = r'''
import json, os, sys, time, warnings
t0 = time.perf_counter()
warnings.simplefilter("always")
import numpy
import chainer
import chainer.functions as F
import chainer.links as L
import cupy
from chainer import optimizers
from cupy.cuda import compiler
t_import = time.perf_counter()

site = os.environ["PROOF_SITE"]
out = {"cupy_file": cupy.__file__, "chainer_file": chainer.__file__,
       "ours": os.path.realpath(cupy.__file__).startswith(os.path.realpath(site)),
       "CUDA_CACHE_MAXSIZE_after_import": os.environ.get("CUDA_CACHE_MAXSIZE"),
       "jit_cache_state": dict(compiler._arch_select._jit_cache_state),
       "cudnn_enabled": bool(getattr(chainer.cuda, "cudnn_enabled", False))}
out["target"] = list(compiler.get_compile_target())  # the first CUDA call (cuInit) happens here
out["device_cc"] = cupy.cuda.Device().compute_capability
''' + MLP_CLASS + r'''

rng = numpy.random.RandomState(0)
x = rng.standard_normal((1024, 784)).astype(numpy.float32)
teacher = rng.standard_normal((784, 10)).astype(numpy.float32)
t = numpy.argmax(x.dot(teacher), axis=1).astype(numpy.int32)  # learnable labels
numpy.random.seed(0)
model = MLP(256)
model.to_gpu()
opt = optimizers.Adam()
opt.setup(model)
xg, tg = cupy.asarray(x), cupy.asarray(t)
t_ready = time.perf_counter()
losses = []
first_step = None
for it in range(int(os.environ["PROOF_ITERS"])):
    y = model(xg)
    loss = F.softmax_cross_entropy(y, tg)
    model.cleargrads()
    loss.backward()
    opt.update()
    losses.append(float(loss.data))
    if first_step is None:
        cupy.cuda.Device().synchronize()
        first_step = time.perf_counter()
acc = float(F.accuracy(model(xg), tg).data)
cupy.cuda.Device().synchronize()
t_end = time.perf_counter()
cache = os.environ["CUPY_CACHE_DIR"]
entries = [n for n in os.listdir(cache) if n != "lock_file.lock"]
out.update(import_s=t_import - t0, ready_s=t_ready - t0, first_step_s=first_step - t0,
           step1_s=first_step - t_ready, total_s=t_end - t0, loss_first=losses[0], loss_last=losses[-1],
           accuracy=acc, iters=len(losses),
           kernel_cache={"ptx": sum(n.endswith(".ptx") for n in entries),
                         "cubin": sum(n.endswith(".cubin") for n in entries), "other": sum(
                             not n.endswith((".ptx", ".cubin")) for n in entries)})
print("PROOF_JSON " + json.dumps(out))
'''


def nvidia_lib_dirs() -> list[str]:
    """site-packages/nvidia/*/lib of this Python (CUDA 13's math libraries as wheels), for the children."""
    import site

    dirs = []
    for base in site.getsitepackages():
        nv = Path(base) / "nvidia"
        if nv.is_dir():
            dirs += [str(p) for p in sorted(nv.glob("*/lib")) if p.is_dir()]
    return dirs


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


class Runner:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.deadline = time.monotonic() + args.budget_s
        self.child = work / "child.py"
        self.child.write_text(CHILD)
        self.base = {k: v for k, v in os.environ.items()
                     if not k.startswith(("CUPY_", "CUDA_CACHE", "CUDA_FORCE_PTX", "PROOF_"))}
        site = str(Path(args.site).resolve())
        rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        self.base["PYTHONPATH"] = os.pathsep.join([site, *rest])
        self.base["PROOF_SITE"] = site
        self.base["PROOF_ITERS"] = str(args.iters)
        if shutil.which("nvcc") is None and Path("/usr/local/cuda/bin/nvcc").exists():
            self.base["PATH"] = "/usr/local/cuda/bin" + os.pathsep + os.environ.get("PATH", "")
        self.lib_dirs = nvidia_lib_dirs() if args.nvidia_libs else []
        if self.lib_dirs:
            self.base["LD_LIBRARY_PATH"] = os.pathsep.join(
                [*self.lib_dirs, *filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep))])

    def run(self, name: str, kernel_cache: str, jit_cache: str, **env: str) -> dict[str, Any]:
        child_env = {**self.base, "CUPY_CACHE_DIR": str(self.work / kernel_cache),
                     "CUDA_CACHE_PATH": str(self.work / jit_cache), **env}
        left = self.deadline - time.monotonic()
        if left < 5:
            return {"name": name, "skipped": "budget spent"}
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, str(self.child)], env=child_env, capture_output=True, text=True,
                                  timeout=min(left, self.args.child_timeout_s))
        except subprocess.TimeoutExpired:
            return {"name": name, "error": "timed out", "env": env}
        wall = time.perf_counter() - start
        result: dict[str, Any] = {"name": name, "env": env, "wall_s": wall, "rc": proc.returncode}
        line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("PROOF_JSON ")), None)
        if proc.returncode != 0 or line is None:
            result["error"] = (proc.stderr or proc.stdout)[-3000:]
        else:
            result.update(json.loads(line[len("PROOF_JSON "):]))
        result["warnings"] = [ln.strip() for ln in proc.stderr.splitlines() if "RuntimeWarning" in ln][:10]
        result["jit_cache_bytes"] = dir_bytes(self.work / jit_cache)
        print(f"  {name:18s} " + (f"first step {result['first_step_s']:.2f}s  target {result['target']}  "
                                  f"loss {result['loss_first']:.3f} -> {result['loss_last']:.3f}"
                                  if "first_step_s" in result else f"ERROR {result.get('error', '')[-300:]}"),
              flush=True)
        return result


def median(runs: list[dict[str, Any]], key: str = "first_step_s") -> float | None:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def trained_ptx(run: dict[str, Any], arch: str | None = None) -> bool:
    if "loss_first" not in run:
        return False
    ok = (run["target"][0] == "ptx" and run["ours"] and run["loss_last"] < 0.5 * run["loss_first"]
          and run["kernel_cache"]["ptx"] > 0 and run["kernel_cache"]["cubin"] == 0)
    return ok and (arch is None or run["target"][1] == arch)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", required=True, help="the built chainer wheel, unpacked (goes first on PYTHONPATH)")
    ap.add_argument("--out", required=True, help="JSON file to write (or a folder: chainer_ptx_proof.json in it)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per warm-start measurement (median)")
    ap.add_argument("--iters", type=int, default=200, help="training steps per run")
    ap.add_argument("--budget-s", type=float, default=270, help="stop starting runs after this many seconds")
    ap.add_argument("--child-timeout-s", type=float, default=150)
    ap.add_argument("--no-nvidia-libs", dest="nvidia_libs", action="store_false",
                    help="do not add this Python's site-packages/nvidia/*/lib to the children's LD_LIBRARY_PATH")
    ap.add_argument("--work", help="folder for kernel and JIT caches (default: a fresh temporary folder)")
    args = ap.parse_args(argv)

    out = Path(args.out)
    if out.suffix != ".json":
        out = out / "chainer_ptx_proof.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(args.work or tempfile.mkdtemp(prefix="chainer-ptx-proof-"))
    work.mkdir(parents=True, exist_ok=True)
    r = Runner(args, work)
    started = time.monotonic()
    runs: dict[str, list[dict[str, Any]]] = {}

    def record(name: str, kernel_cache: str, jit_cache: str, times: int = 1, **env: str) -> None:
        for _ in range(times):
            runs.setdefault(name, []).append(r.run(name, kernel_cache, jit_cache, **env))

    print(f"chainer PTX proof: site {args.site}, work {work}", flush=True)
    force = {"CUPY_FORCE_PTX": "1"}
    arch75 = {"CUPY_PTX_ARCH": "compute_75"}
    # The first starts (nvcc compiles every kernel) and the pass/fail checks first, then the timed warm starts.
    record("ptx_first", "kc_ptx", "jit_ptx", **force)
    record("ptx75_first", "kc_75", "jit_75", **arch75)
    record("native_first", "kc_native", "jit_native")
    record("ptx_second", "kc_ptx", "jit_ptx", args.repeat, **force)
    record("ptx_disabled", "kc_ptx", "jit_off", args.repeat, CUDA_CACHE_DISABLE="1", **force)
    record("native_second", "kc_native", "jit_native", args.repeat)
    record("ptx75_second", "kc_75", "jit_75", args.repeat, **arch75)
    record("ptx_small_raised", "kc_ptx", "jit_ptx", CUDA_CACHE_MAXSIZE="1000000", **force)

    med = {name: median(rs) for name, rs in runs.items()}
    base = med.get("native_second")

    def ratio(name: str, against: float | None = base) -> float | None:
        return round(med[name] / against, 3) if med.get(name) and against else None

    raised = runs["ptx_small_raised"][0]
    done = [x for rs in runs.values() for x in rs if "ours" in x]
    checks = {
        "ptx_mlp_trains": trained_ptx(runs["ptx_first"][0]),
        "ptx75_mlp_trains": trained_ptx(runs["ptx75_first"][0], "compute_75"),
        "native_is_cubin": runs["native_first"][0].get("target", [None])[0] == "cubin",
        "jit_cache_set_at_import": runs["ptx_first"][0].get("CUDA_CACHE_MAXSIZE_after_import") == "4294967296",
        "small_cache_raised": raised.get("CUDA_CACHE_MAXSIZE_after_import") == "4294967296",
        "disabled_left_alone": "first_step_s" in runs["ptx_disabled"][0]
        and runs["ptx_disabled"][0].get("CUDA_CACHE_MAXSIZE_after_import") is None,
        "ours_not_the_installed_cupy": bool(done) and all(x["ours"] for x in done),
    }
    report = {
        "what": "cupy-ptx-fallback GPU proof (bench/gpu/chainer_ptx_proof.py)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"host": platform.node(), "python": sys.version.split()[0], "platform": platform.platform(),
                    "gpu": _nvidia_smi(), "nvcc": _nvcc_version()},
        "site": str(Path(args.site).resolve()), "iters": args.iters, "repeat": args.repeat,
        "nvidia_lib_dirs": r.lib_dirs,
        "medians_first_step_s": med,
        "ratios_vs_native_second": {name: ratio(name) for name in med},
        "jit_cache_disabled_vs_configured": ratio("ptx_disabled", med.get("ptx_second")),
        "checks": checks,
        "runs": runs,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    out.write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps({k: report[k] for k in ("medians_first_step_s", "ratios_vs_native_second",
                                             "jit_cache_disabled_vs_configured", "checks", "elapsed_s")}, indent=2))
    print(f"wrote {out}")
    return 0 if checks["ptx_mlp_trains"] and checks["ptx75_mlp_trains"] else 1


def _nvidia_smi() -> str | None:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _nvcc_version() -> str | None:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[-1] if out.strip() else None


if __name__ == "__main__":
    sys.exit(main())
