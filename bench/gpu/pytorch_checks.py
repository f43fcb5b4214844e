"""Checks of a PyTorch 1.5.0 + LMS wheel on a GPU: what it is, and its numbers against the CPU.

    PYTHONPATH=<wheel target folder> python3 bench/gpu/pytorch_checks.py [--only PART ...] [--json FILE]

Parts: import (version, device, cuDNN, which CUDA libraries were loaded and from where), conv (cuDNN conv2d
forward/backward vs float64 on the CPU), tf32 (the same error plus speed, for the math type this process runs with:
LGPATCH_CUDNN_TF32=0/1, default the wheel's), lstm (forward/backward vs the CPU; the cudnn9-rnn warning and
torch.backends.cudnn.rnn_available()), sparse (torch.sparse.mm and torch.addmm(sparse, dense, beta=0.5, alpha=2)
vs dense math), batchnorm, exit (a process that ran backward() exits 0), lms_conv (a wide convolution's backward
with deterministic cuDNN under an LMS limit, against the same without LMS). Each line ends in "ok" or "FAIL ...";
exit 1 when any part fails.
Stand-alone: needs only the torch under test (no lgpatch, no numpy beyond what torch imports).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import torch

FP32_TOL = 1e-4  # relative to the largest magnitude; FP32 FMA math gives ~1e-6, TF32 ~1e-3
RESULTS: dict = {}


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    return float((got - want).abs().max() / want.abs().max().clamp(min=1e-30))


def report(name: str, ok: bool, **info) -> None:
    RESULTS[name] = dict(info, ok=ok)
    detail = " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in info.items())
    print(f"{name}: {detail} {'ok' if ok else 'FAIL'}", flush=True)


def loaded_libraries() -> dict:
    found = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if "/" in line else ""
            name = os.path.basename(path)
            for key in ("libcudart", "libcudnn.so", "libcublas.so", "libcublasLt", "libcusparse", "libcufft",
                        "libcurand", "libnvrtc", "libtorch", "libc10", "libcuda.so"):
                if name.startswith(key):
                    found[name] = path
    return found


def check_import() -> None:
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    cap = torch.cuda.get_device_capability(0) if dev else None
    cudnn = torch.backends.cudnn.version()
    rnn = getattr(torch.backends.cudnn, "rnn_available", lambda: "n/a")()
    libs = loaded_libraries()
    ok = (torch.__version__.startswith("1.5.0") and dev is not None and tuple(cap) == (9, 0)
          and cudnn is not None and cudnn >= 9000)
    report("import", ok, version=torch.__version__, file=torch.__file__, cuda=torch.version.cuda, device=dev,
           capability=tuple(cap) if cap else None, cudnn=cudnn, cudnn_rnn_available=rnn,
           lms=hasattr(torch.cuda, "set_enabled_lms"), python=sys.version.split()[0])
    RESULTS["libraries"] = libs
    for name, path in sorted(libs.items()):
        print(f"  loaded {name}: {path}")


def conv_case(dtype_dev=torch.float32, n=8, c=64, hw=56, k=64):
    torch.manual_seed(0)
    x = torch.randn(n, c, hw, hw, dtype=torch.float64)
    w = torch.randn(k, c, 3, 3, dtype=torch.float64) / 24.0
    g = torch.randn(n, k, hw, hw, dtype=torch.float64)
    return x, w, g


def check_conv() -> None:
    torch.backends.cudnn.enabled = True
    x, w, g = conv_case()
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    yr = torch.nn.functional.conv2d(xr, wr, padding=1)
    yr.backward(g)
    xc = x.float().cuda().requires_grad_()
    wc = w.float().cuda().requires_grad_()
    yc = torch.nn.functional.conv2d(xc, wc, padding=1)
    yc.backward(g.float().cuda())
    errs = dict(fwd=rel_err(yc, yr), dgrad=rel_err(xc.grad, xr.grad), wgrad=rel_err(wc.grad, wr.grad))
    report("conv2d_cudnn_fp32", all(e < FP32_TOL for e in errs.values()) or tf32_env() == "1",
           tf32=tf32_env(), **errs)


def tf32_env() -> str:
    return os.environ.get("LGPATCH_CUDNN_TF32", "default")


def check_tf32() -> None:
    """Error vs float64 and the speed of a large FP32 convolution, with this process's math type."""
    torch.backends.cudnn.benchmark = True
    x, w, _ = conv_case(n=32, c=256, hw=56, k=256)
    want = torch.nn.functional.conv2d(x[:2], w, padding=1)
    xc, wc = x.float().cuda(), w.float().cuda()
    # The error of the configuration that is timed: benchmark mode picks an algorithm per shape, and a 2-sample
    # batch may get one without TF32 kernels while the 32-sample batch gets one with them.
    got = torch.nn.functional.conv2d(xc, wc, padding=1)[:2]
    for _ in range(3):
        torch.nn.functional.conv2d(xc, wc, padding=1)
    torch.cuda.synchronize()
    reps, t = 20, time.perf_counter()
    for _ in range(reps):
        torch.nn.functional.conv2d(xc, wc, padding=1)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) / reps * 1e3
    flops = 2 * 32 * 256 * 256 * 9 * 56 * 56
    err = rel_err(got, want)
    report("tf32", True, tf32=tf32_env(), rel_err=err, ms=ms, tflops=flops / ms / 1e9,
           fp32_level=err < FP32_TOL)
    torch.backends.cudnn.benchmark = False


def check_lstm() -> None:
    torch.manual_seed(1)
    ref = torch.nn.LSTM(32, 64, num_layers=2, batch_first=True).double()
    gpu = torch.nn.LSTM(32, 64, num_layers=2, batch_first=True)
    gpu.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    gpu = gpu.cuda()
    x = torch.randn(4, 20, 32, dtype=torch.float64)
    out_r, _ = ref(x.clone().requires_grad_())
    out_r.sum().backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out_g, _ = gpu(x.float().cuda())
        out_g.sum().backward()
    said = [str(w.message) for w in caught if "cudnn9-rnn" in str(w.message)]
    g_ref = ref.weight_ih_l0.grad
    g_gpu = gpu.weight_ih_l0.grad
    report("lstm", rel_err(out_g, out_r) < FP32_TOL and rel_err(g_gpu, g_ref) < FP32_TOL,
           fwd=rel_err(out_g, out_r), wgrad=rel_err(g_gpu, g_ref), warned=bool(said),
           rnn_available=getattr(torch.backends.cudnn, "rnn_available", lambda: "n/a")())
    if said:
        print(f"  warning: {said[0]}")


def sparse_case(dtype: torch.dtype, m=300, k=200, n=50, density=0.05):
    torch.manual_seed(2)
    dense_a = torch.randn(m, k, dtype=torch.float64) * (torch.rand(m, k) < density).double()
    s = dense_a.to_sparse().to(dtype)
    b = torch.randn(k, n, dtype=torch.float64)
    c = torch.randn(m, n, dtype=torch.float64)
    return dense_a, s, b, c


def check_sparse() -> None:
    for dtype in (torch.float32, torch.float64):
        tol = FP32_TOL if dtype == torch.float32 else 1e-10
        dense_a, s, b, c = sparse_case(dtype)
        sc, bc, cc = s.cuda(), b.to(dtype).cuda(), c.to(dtype).cuda()
        want_mm = dense_a @ b
        got_mm = torch.sparse.mm(sc, bc)
        want_addmm = 0.5 * c + 2 * (dense_a @ b)
        got_addmm = torch.addmm(cc, sc, bc, beta=0.5, alpha=2)
        bt = b.t().contiguous().t()  # the same values, column-major: the transposed-B path
        got_t = torch.sparse.mm(sc, bt.to(dtype).cuda())
        errs = dict(mm=rel_err(got_mm, want_mm), addmm=rel_err(got_addmm, want_addmm),
                    mm_colmajor=rel_err(got_t, want_mm))
        report(f"sparse_{str(dtype).split('.')[-1]}", all(e < tol for e in errs.values()), **errs)


def check_batchnorm() -> None:
    torch.manual_seed(3)
    x = torch.randn(16, 32, 14, 14, dtype=torch.float64)
    ref = torch.nn.BatchNorm2d(32).double()
    gpu = torch.nn.BatchNorm2d(32).cuda()
    xr = x.clone().requires_grad_()
    g = torch.randn(16, 32, 14, 14, dtype=torch.float64)  # not sum(): its gradients are 0 up to rounding
    yr = ref(xr)
    yr.backward(g)
    xg = x.float().cuda().requires_grad_()
    yg = gpu(xg)
    yg.backward(g.float().cuda())
    errs = dict(fwd=rel_err(yg, yr), dgrad=rel_err(xg.grad, xr.grad), wgrad=rel_err(gpu.weight.grad, ref.weight.grad),
                running_mean=rel_err(gpu.running_mean, ref.running_mean))
    report("batchnorm", all(e < FP32_TOL for e in errs.values()), **errs)


EXIT_AFTER_BACKWARD = """
import torch
x = torch.ones(3, requires_grad=True)
(x * 2).sum().backward()
if torch.cuda.is_available():
    y = torch.ones(3, device="cuda", requires_grad=True)
    (y * 2).sum().backward()
print("backward done")
"""


def check_exit() -> None:
    """A process that ran backward() exits 0 (engine-exit-finalized: it aborted with 134 on Python >= 3.9)."""
    done = subprocess.run([sys.executable, "-c", EXIT_AFTER_BACKWARD], capture_output=True, text=True, timeout=120)
    aborted = "terminate called" in done.stderr
    report("exit_after_backward", done.returncode == 0 and not aborted and "backward done" in done.stdout,
           rc=done.returncode, stderr=done.stderr.strip()[-200:])


# LMS manages (and can swap out) only what is allocated after set_enabled_lms(True): the first version of this
# check made its input, gradient and reference before (IBM's allocator attaches LMS to a storage when it is made),
# so those could not be swapped and 2.3 GiB stayed resident: out of memory at every limit tried below that
# (1200–2600 MB), with and without determinism (H200, session 6). So LMS is on from the start; the reference is the
# same layer at the default limit (the whole device: nothing is swapped), kept on the host. IBM's limit is checked
# only when the allocator asks cudaMalloc for more (reserved bytes + request > limit); blocks the reference step left
# cached are reused without that test, so the second version (session 7) swapped nothing (reclaimed_bytes 0, peak
# 2746 MB, the reference's peak). So the cache is emptied and the peak reset between the two steps, and the check
# wants the measured step's peak reserved memory within the limit as well as something reclaimed.
LMS_DETERMINISTIC_CONV = """
import json, sys
import torch
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.cuda.set_enabled_lms(True)
torch.manual_seed(0)
conv = torch.nn.Conv2d(128, 128, 3, padding=1).cuda()
x = torch.randn(16, 128, 224, 224, device="cuda")
g = torch.randn(16, 128, 224, 224, device="cuda")


def step():
    xi = x.clone().requires_grad_()
    conv.zero_grad()
    conv(xi).backward(g)
    torch.cuda.synchronize()
    return xi.grad.cpu(), conv.weight.grad.cpu()


want = step()
torch.cuda.empty_cache()
torch.cuda.reset_peak_memory_stats()
torch.cuda.set_limit_lms(int(sys.argv[1]) << 20)
before = int(torch.cuda.memory_stats().get("reclaimed_bytes", 0))
got = step()
err = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(got, want))
print(json.dumps({"rel_err": err, "reclaimed_bytes": int(torch.cuda.memory_stats().get("reclaimed_bytes", 0)) - before,
                  "peak_allocated_mb": torch.cuda.max_memory_allocated() >> 20,
                  "peak_reserved_mb": torch.cuda.max_memory_reserved() >> 20}))
"""


def check_lms_deterministic_conv(limit_mb: int = 1729) -> None:
    """One wide layer, deterministic cuDNN, backward under an LMS limit (cudnn-deterministic-fallback)."""
    done = subprocess.run([sys.executable, "-c", LMS_DETERMINISTIC_CONV, str(limit_mb)], capture_output=True,
                          text=True, timeout=150)  # the chain's spare minutes are few
    # The fallback's TORCH_WARN is raised on an autograd worker thread, which has no Python warning handler: it
    # reaches stderr, not the warnings module.
    fallback = "cudnn-deterministic-fallback" in done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 and not lines:
        report("lms_deterministic_conv", False, limit_mb=limit_mb, rc=done.returncode, fallback_warned=fallback,
               error=first_error_line(done.stderr))
        return
    res = json.loads(lines[-1])
    swapped_within_limit = res["reclaimed_bytes"] > 0 and res["peak_reserved_mb"] <= limit_mb
    report("lms_deterministic_conv", res["rel_err"] < FP32_TOL and swapped_within_limit, limit_mb=limit_mb,
           rc=done.returncode, fallback_warned=fallback, **res)


def first_error_line(stderr: str) -> str:
    """The exception's own line: c10 errors end in dozens of `frame #N:` lines that say nothing."""
    lines = [ln for ln in stderr.strip().splitlines() if not ln.startswith(("frame #", " "))]
    errors = [ln for ln in lines if "Error" in ln]
    return (errors or lines or [""])[-1][:300]


PARTS = {"import": check_import, "conv": check_conv, "tf32": check_tf32, "lstm": check_lstm,
         "sparse": check_sparse, "batchnorm": check_batchnorm, "exit": check_exit,
         "lms_conv": check_lms_deterministic_conv}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=sorted(PARTS), default=list(PARTS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    for name in args.only:
        try:
            PARTS[name]()
        except Exception as exc:  # one broken part must not hide the others
            report(name, False, error=f"{type(exc).__name__}: {exc}"[:400])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(RESULTS, fh, indent=1, default=str)
    return 1 if any(isinstance(v, dict) and v.get("ok") is False for v in RESULTS.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
