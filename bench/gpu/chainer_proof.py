#!/usr/bin/env python3
"""GPU proof for the chainer-1.24 recipe: the built wheel runs on the GPU, next to an unrelated modern `cupy`.

Given the wheel that `lgpatch build` made (cp312 for the H200 machine), this installs it with
`pip install --no-deps --target DIR` (plus any extra pure-Python wheels given, e.g. six and filelock), puts DIR
first on PYTHONPATH of child processes only, and checks in fresh processes:

  gpu_first / gpu_second   the workload with an empty CuPy kernel cache (nvcc compiles every kernel: the first
                           start) and again with the cache warm (the second start); wall time of each process
  workload                 an MNIST-style MLP trains on the GPU through CuPy's native path (cubin for the device;
                           the loss must fall); conv + max-pool forward/backward with cuDNN on equals the CPU
                           result; (cupy.ones(3,'f')*2.0).dtype == float32, bool(cupy.array(0)) is False,
                           2 * cupy.ones(3); cuRAND; cuSOLVER (cholesky, qr, svd; CuPy 1.24 has no linalg.solve);
                           a float16 elementwise op; a reduction over a tuple of axes; host <-> device copies
  libraries                which libcublas/libcudnn/libcusolver/... the process loaded (/proc/self/maps), i.e.
                           whether the relative run path or the sys.path preload found them; no LD_LIBRARY_PATH
  other_cupy               the modern `cupy` of the machine still imports and computes in a process without DIR

    python3 bench/gpu/chainer_proof.py --wheel .carry/chainer-1.24.0-cp312-cp312-linux_x86_64.whl \
        --extra-wheels .carry --out "$OUT"

Writes $OUT/chainer_proof.json (and the children's output in $OUT/chainer_proof.log). Exit status 0 when every
check passed. About 1-2 minutes on an H200 (the first start compiles ~40 kernels with nvcc); --budget-s bounds it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _chainer_mlp import MLP_CLASS, TRAINING  # from this script's folder (sys.path[0] when it runs)

# The workload runs in a child process whose PYTHONPATH starts with the --target folder.
CHILD = r'''
import json, os, re, sys, time
t0 = time.perf_counter()
result = {"checks": {}, "times": {}}


def check(name, function):
    start = time.perf_counter()
    try:
        detail = function()
        result["checks"][name] = {"ok": True, "detail": detail}
    except Exception as exc:  # one failing check must not hide the others
        import traceback
        result["checks"][name] = {"ok": False, "detail": "%s: %s" % (type(exc).__name__, exc),
                                  "traceback": traceback.format_exc()[-3000:]}
    result["times"][name] = round(time.perf_counter() - start, 3)


import numpy
import cupy
import chainer
import chainer.functions as F
import chainer.links as L
from chainer import cuda, optimizers
result["times"]["import"] = round(time.perf_counter() - t0, 3)
target = os.environ["PROOF_TARGET"]
result["cupy_file"] = cupy.__file__
result["ours"] = os.path.realpath(cupy.__file__).startswith(os.path.realpath(target))
result["numpy"] = numpy.__version__
result["cudnn_enabled"] = bool(cuda.cudnn_enabled)
compiler = cupy.cuda.compiler
if hasattr(compiler, "get_compile_target"):  # the cupy-ptx-fallback patchset: ('cubin', 'sm_90') is native
    try:
        result["compile_target"] = list(compiler.get_compile_target())
    except Exception as exc:
        result["compile_target"] = "error: %s" % exc
''' + MLP_CLASS + TRAINING + r'''

def mlp():
    rng = numpy.random.RandomState(0)
    data, labels = synthetic_digits(rng, 2048)
    model = L.Classifier(MLP(256))
    model.to_gpu()
    optimizer = optimizers.Adam()
    optimizer.setup(model)
    losses, loss = train_epochs(model, optimizer, cuda.to_gpu(data), cuda.to_gpu(labels), batch=128)
    assert isinstance(loss.data, cupy.ndarray) and loss.data.dtype == numpy.float32, loss.data.dtype
    assert losses[-1] < 0.5 * losses[0], losses
    return {"losses": [round(v, 4) for v in losses], "accuracy": float(model.accuracy.data)}


def conv_pool_cudnn():
    assert cuda.cudnn_enabled, "cuDNN is not enabled (cupy.cuda.cudnn did not import)"
    rng = numpy.random.RandomState(1)
    x = rng.randn(4, 3, 16, 16).astype(numpy.float32)
    W = rng.randn(8, 3, 3, 3).astype(numpy.float32) * 0.1
    b = rng.randn(8).astype(numpy.float32)

    def run(xp_x, xp_W, xp_b, use_cudnn):
        vx, vW, vb = chainer.Variable(xp_x), chainer.Variable(xp_W), chainer.Variable(xp_b)
        y = F.max_pooling_2d(F.convolution_2d(vx, vW, vb, pad=1, use_cudnn=use_cudnn), 2, use_cudnn=use_cudnn)
        F.sum(y * y).backward()
        return [cuda.to_cpu(a) for a in (y.data, vx.grad, vW.grad, vb.grad)]

    cpu = run(x, W, b, False)
    gpu = run(cuda.to_gpu(x), cuda.to_gpu(W), cuda.to_gpu(b), True)
    diffs = [float(abs(c - g).max()) for c, g in zip(cpu, gpu)]
    for c, g in zip(cpu, gpu):
        numpy.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-3)
    return {"cudnn_version": int(cupy.cuda.cudnn.getVersion()), "max_abs_diff": diffs}


def dtypes_and_bool():
    a = cupy.ones(3, "f") * 2.0
    assert a.dtype == numpy.float32, a.dtype            # NEP 50 shim: the scalar does not upcast
    assert bool(cupy.array(0)) is False and bool(cupy.array(1)) is True   # Cython 3: __bool__
    r = 2 * cupy.ones(3)                                 # reflected operator (c_api_binop_methods)
    assert r.tolist() == [2.0, 2.0, 2.0], r
    assert (1 - cupy.ones(3, "f")).dtype == numpy.float32
    assert (cupy.arange(3) + 1).dtype == cupy.arange(3).dtype
    return {"f32_times_2.0": str(a.dtype), "2*ones": r.tolist()}


def curand():
    cupy.random.seed(0)
    u = cupy.random.rand(100000)
    n = cupy.random.normal(0.0, 1.0, 100000)
    mean_u, mean_n, std_n = float(u.mean()), float(n.mean()), float(n.std())
    assert abs(mean_u - 0.5) < 0.01 and abs(mean_n) < 0.02 and abs(std_n - 1) < 0.02, (mean_u, mean_n, std_n)
    return {"uniform_mean": round(mean_u, 4), "normal_mean": round(mean_n, 4), "normal_std": round(std_n, 4)}


def cusolver():
    rng = numpy.random.RandomState(2)
    a = rng.randn(64, 64).astype(numpy.float32)
    spd = a @ a.T + 64 * numpy.eye(64, dtype=numpy.float32)
    L_ = cupy.linalg.cholesky(cupy.asarray(spd))
    numpy.testing.assert_allclose(cuda.to_cpu(L_) @ cuda.to_cpu(L_).T, spd, rtol=1e-3, atol=1e-2)
    q, r = cupy.linalg.qr(cupy.asarray(a))
    numpy.testing.assert_allclose(cuda.to_cpu(q) @ cuda.to_cpu(r), a, rtol=1e-3, atol=1e-3)
    s = cupy.linalg.svd(cupy.asarray(a), compute_uv=False)
    numpy.testing.assert_allclose(cuda.to_cpu(s), numpy.linalg.svd(a, compute_uv=False), rtol=1e-3, atol=1e-3)
    return {"solve": "CuPy 1.24 has no linalg.solve; cholesky, qr and svd are its cuSOLVER calls"}


def float16():
    x = numpy.linspace(-2, 2, 1000).astype(numpy.float16)
    y = cupy.asarray(x)
    z = y * y + y                                   # carray.cuh's float16 (cupy-fp16-header)
    assert z.dtype == numpy.float16
    numpy.testing.assert_allclose(cuda.to_cpu(z).astype("f"), (x * x + x).astype("f"), rtol=1e-2, atol=1e-2)
    return {"dtype": str(z.dtype)}


def reductions_and_copies():
    a = cupy.array([[1, 2, 3], [4, 5, 6]], dtype="f")        # host -> device from a list (NumPy 2 copy=)
    assert float(a.sum(axis=(0, 1))) == 21.0                 # tuple axis: collections.abc in reduction.pxi
    assert a.get().tolist() == [[1, 2, 3], [4, 5, 6]]        # device -> host (ctypes.data_as)
    b = cupy.empty((2, 3), dtype="f")
    b.set(numpy.arange(6, dtype="f").reshape(2, 3))
    assert b.get().tolist() == [[0, 1, 2], [3, 4, 5]]
    return {"sum": float(a.sum())}


check("mlp_gpu", mlp)
check("conv_pool_cudnn_vs_cpu", conv_pool_cudnn)
check("dtype_bool_rop", dtypes_and_bool)
check("curand", curand)
check("cusolver", cusolver)
check("float16_elementwise", float16)
check("reductions_and_copies", reductions_and_copies)
try:
    cupy.cuda.Device().synchronize()
except Exception as exc:
    result["synchronize_error"] = "%s: %s" % (type(exc).__name__, exc)
maps = open("/proc/self/maps").read()
pattern = r"/\S+/lib(?:cuda|cudart|cublas|cublasLt|curand|cusolver|cusparse|nvJitLink|cudnn)\.so[.\d]*"
result["libraries"] = sorted(set(re.findall(pattern, maps)))
cache = os.environ.get("CUPY_CACHE_DIR")
result["kernel_cache_files"] = len(os.listdir(cache)) if cache and os.path.isdir(cache) else None
result["times"]["total_in_process"] = round(time.perf_counter() - t0, 3)
print("PROOF-RESULT " + json.dumps(result))
'''

OTHER_CUPY = r'''
import json
try:
    import cupy
    out = {"version": getattr(cupy, "__version__", "?"), "file": cupy.__file__}
    out["ones_times_2"] = (cupy.ones(3) * 2).tolist()
    out["ok"] = out["ones_times_2"] == [2.0, 2.0, 2.0]
except Exception as exc:
    out = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
print("PROOF-RESULT " + json.dumps(out))
'''


def _run(argv: list[str], env: dict[str, str], log, timeout: float) -> tuple[dict[str, Any] | None, float, int]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out, err, code = str(exc.stdout or ""), f"timed out after {timeout:.0f}s", -1
    wall = time.perf_counter() - start
    log.write(f"$ {' '.join(argv[:3])} ... (exit {code}, {wall:.1f}s)\n{out[-20000:]}\n{err[-20000:]}\n")
    log.flush()
    for line in out.splitlines():
        if line.startswith("PROOF-RESULT "):
            return json.loads(line[len("PROOF-RESULT "):]), wall, code
    return None, wall, code


def _machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi, "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True)
        info["gpu"] = q.stdout.strip()
    nvcc = shutil.which("nvcc")
    info["nvcc"] = nvcc
    if nvcc:
        info["nvcc_version"] = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip()
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", required=True, help="the chainer-1.24 wheel built by lgpatch build")
    parser.add_argument("--extra-wheels", help="folder of pure-Python wheels to add to the target (six, filelock)")
    parser.add_argument("--out", required=True, help="folder for chainer_proof.json and chainer_proof.log")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the children")
    parser.add_argument("--budget-s", type=float, default=330.0, help="stop starting new runs after this")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="chainer-proof-"))
    target, cache = work / "site", work / "kernel_cache"
    report: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                              "wheel": os.path.basename(args.wheel), "machine": _machine(), "runs": {}}
    with open(out_dir / "chainer_proof.log", "w") as log:
        pip = [args.python, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target), args.wheel]
        if args.extra_wheels:
            # Only what the target lacks: the machine's own numpy etc. stay in charge.
            extras = [str(p) for p in sorted(Path(args.extra_wheels).glob("*.whl"))
                      if not p.name.startswith("chainer-")]
            pip += extras
        proc = subprocess.run(pip, capture_output=True, text=True)
        log.write(f"$ {' '.join(pip)}\n{proc.stdout}\n{proc.stderr}\n")
        report["install"] = {"ok": proc.returncode == 0, "target": str(target)}
        if proc.returncode != 0:
            report["install"]["error"] = proc.stderr[-2000:]
        else:
            env = dict(os.environ)
            env.pop("LD_LIBRARY_PATH", None)  # the wheel must find its libraries itself
            env["PYTHONPATH"] = os.pathsep.join([str(target), *filter(None, [os.environ.get("PYTHONPATH")])])
            env["PROOF_TARGET"] = str(target)
            env["CUPY_CACHE_DIR"] = str(cache)
            cuda_bin = "/usr/local/cuda/bin"
            if not shutil.which("nvcc") and os.path.isdir(cuda_bin):  # CuPy 1.x calls nvcc at run time
                env["PATH"] = cuda_bin + os.pathsep + env.get("PATH", "")
            for name in ("gpu_first", "gpu_second"):
                left = args.budget_s - (time.perf_counter() - started)
                if left < 30:
                    report["runs"][name] = {"skipped": "time budget"}
                    continue
                result, wall, code = _run([args.python, "-c", CHILD], env, log, timeout=left)
                report["runs"][name] = {"wall_s": round(wall, 2), "exit": code, "result": result}
            other_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            result, wall, code = _run([args.python, "-c", OTHER_CUPY], other_env, log, timeout=120)
            report["other_cupy"] = {"wall_s": round(wall, 2), **(result or {"ok": False, "exit": code})}
    shutil.rmtree(work, ignore_errors=True)
    runs = [r.get("result") for r in report["runs"].values()]
    checks_ok = bool(runs) and all(r and r.get("ours") and r["checks"] and all(c["ok"] for c in r["checks"].values())
                                   for r in runs)
    report["ok"] = bool(report["install"]["ok"] and checks_ok and report.get("other_cupy", {}).get("ok"))
    first, second = (report["runs"].get(k, {}).get("wall_s") for k in ("gpu_first", "gpu_second"))
    if first and second:
        report["start_ratio_first_over_second"] = round(first / second, 2)
    (out_dir / "chainer_proof.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"ok": report["ok"], "gpu_first_s": first, "gpu_second_s": second,
                      "failed": sorted({name for r in runs if r for name, c in r["checks"].items() if not c["ok"]}),
                      "runs_without_result": [k for k, v in report["runs"].items() if not v.get("result")],
                      "other_cupy_ok": report.get("other_cupy", {}).get("ok")}, indent=1))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
