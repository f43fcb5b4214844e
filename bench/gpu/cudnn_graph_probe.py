#!/usr/bin/env python3
"""cuDNN's legacy convolution call against its graph (backend) API with a cached plan: the host cost of each.

    python bench/gpu/cudnn_graph_probe.py [--calls 400] [--rounds 5] [--json FILE]

Why: at batch 1 the inspection CNN's time is host time, and cuDNN 9's legacy `cudnnConvolutionForward` alone took
~44-49 us a call on the H200 (chainer_cudnn_probe.py --parts conv), about torch's whole convolution layer. cuDNN 9
runs the legacy call through its graph engine, building what torch's cuDNN frontend builds once and caches. This
script measures, with nothing of Chainer or CuPy in the way (ctypes on the libcudnn torch loads, memory from torch):

- legacy: `cudnnConvolutionForward` with the algorithm cuDNN's heuristics rank first (as Chainer's call does);
- graph, plan cached: an operation graph of one forward convolution, the first engine configuration of the
  heuristics (mode INSTANT) that finalizes as an execution plan, a variant pack made once; per call
  `cudnnBackendExecute` alone;
- graph, variant pack per call: the same plan, a variant pack made, finalized and destroyed on each call (what a
  caller pays when its pointers change between calls);
- torch: `torch.nn.functional.conv2d` on the same tensors (its dispatcher and cuDNN frontend plan cache).

Each is timed as enqueue throughput (no synchronisation in the loop: at batch 1 the kernels finish before the host
issues the next call, so the wall time per call is the host's), medians of --rounds, and checked: the graph path's
output against the legacy one's (max abs difference; both may use TF32 tensor cores, as cuDNN's default math
allows). Problems: the inspection CNN's three 3x3 convolutions at batch 1 (bench/gpu/_speed_workloads.py).
Stands alone: torch with CUDA and cuDNN (the GPU machine's image).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# cuDNN enums (cudnn_graph.h / cudnn_backend.h; the backend API's values are fixed since cuDNN 8.0)
TENSOR, CONVOLUTION, CONV_FWD_OP, OP_GRAPH, ENGINE_HEUR, ENGINE_CFG, PLAN, VARIANT_PACK = 17, 1, 10, 15, 4, 3, 5, 16
T_HANDLE, T_DATA_TYPE, T_INT64, T_FLOAT, T_VOID_PTR, T_CONV_MODE, T_HEUR_MODE, T_DESC = 0, 1, 3, 4, 6, 7, 8, 15
DATA_FLOAT, CROSS_CORRELATION, HEUR_INSTANT = 0, 1, 0
A_TENSOR = {"alignment": 900, "dtype": 901, "dims": 902, "strides": 903, "uid": 906}
A_CONV = {"comp_type": 100, "mode": 101, "dilations": 102, "strides": 103, "post_pad": 104, "pre_pad": 105,
          "spatial_dims": 106}
A_FWD = {"alpha": 700, "beta": 701, "conv": 702, "w": 703, "x": 704, "y": 705}
A_GRAPH_OPS, A_GRAPH_HANDLE = 801, 800
A_HEUR_MODE, A_HEUR_GRAPH, A_HEUR_RESULTS = 200, 201, 202
A_PLAN_HANDLE, A_PLAN_CFG, A_PLAN_WORKSPACE = 400, 401, 402
A_VP_UIDS, A_VP_PTRS, A_VP_WORKSPACE = 1000, 1001, 1003

PROBLEMS = [(1, 3, 32, 224), (1, 32, 64, 112), (1, 64, 128, 56)]  # (n, c_in, c_out, h = w), 3x3, pad 1


class CudnnError(RuntimeError):
    pass


def load_cudnn() -> Any:
    import torch  # noqa: F401 - loads the libcudnn this probe binds to

    for name in ("libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.cudnnGetErrorString.restype = ctypes.c_char_p
        lib.cudnnBackendSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                                 ctypes.c_void_p]
        lib.cudnnBackendGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                                 ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]
        lib.cudnnBackendExecute.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.cudnnBackendFinalize.argtypes = [ctypes.c_void_p]
        lib.cudnnBackendDestroyDescriptor.argtypes = [ctypes.c_void_p]
        return lib
    raise CudnnError("no libcudnn found after importing torch")


def check(lib: Any, status: int, what: str) -> None:
    if status != 0:
        raise CudnnError(f"{what}: {lib.cudnnGetErrorString(status).decode()} ({status})")


class Backend:
    """Backend descriptors through ctypes: create, set, finalize; every one made is destroyed by close()."""

    def __init__(self, lib: Any) -> None:
        self.lib, self.made = lib, []

    def make(self, kind: int, attrs: list[tuple[int, int, list[Any]]], finalize: bool = True) -> ctypes.c_void_p:
        desc = ctypes.c_void_p()
        check(self.lib, self.lib.cudnnBackendCreateDescriptor(kind, ctypes.byref(desc)), f"create {kind}")
        self.made.append(desc)
        for name, typ, values in attrs:
            self.set(desc, name, typ, values)
        if finalize:
            check(self.lib, self.lib.cudnnBackendFinalize(desc), f"finalize {kind}")
        return desc

    def set(self, desc: ctypes.c_void_p, name: int, typ: int, values: list[Any]) -> None:
        ctype = {T_INT64: ctypes.c_int64, T_FLOAT: ctypes.c_float, T_VOID_PTR: ctypes.c_void_p,
                 T_DESC: ctypes.c_void_p, T_HANDLE: ctypes.c_void_p}.get(typ, ctypes.c_int)
        array = (ctype * len(values))(*[v.value if isinstance(v, ctypes.c_void_p) else v for v in values])
        check(self.lib, self.lib.cudnnBackendSetAttribute(desc, name, typ, len(values), array), f"set {name}")

    def close(self) -> None:
        for desc in reversed(self.made):
            self.lib.cudnnBackendDestroyDescriptor(desc)
        self.made.clear()


def tensor(be: Backend, uid: int, shape: tuple[int, ...]) -> ctypes.c_void_p:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return be.make(TENSOR, [(A_TENSOR["dtype"], T_DATA_TYPE, [DATA_FLOAT]), (A_TENSOR["dims"], T_INT64, list(shape)),
                            (A_TENSOR["strides"], T_INT64, strides), (A_TENSOR["uid"], T_INT64, [uid]),
                            (A_TENSOR["alignment"], T_INT64, [16])])


def graph_plan(be: Backend, handle: ctypes.c_void_p, xs: tuple[int, ...], ws: tuple[int, ...],
               ys: tuple[int, ...]) -> tuple[ctypes.c_void_p, int, int]:
    """(plan, workspace bytes, index of the heuristics' engine configuration that finalized)."""
    x, w, y = tensor(be, 1, xs), tensor(be, 2, ws), tensor(be, 3, ys)
    conv = be.make(CONVOLUTION, [(A_CONV["comp_type"], T_DATA_TYPE, [DATA_FLOAT]),
                                 (A_CONV["mode"], T_CONV_MODE, [CROSS_CORRELATION]),
                                 (A_CONV["spatial_dims"], T_INT64, [2]), (A_CONV["dilations"], T_INT64, [1, 1]),
                                 (A_CONV["strides"], T_INT64, [1, 1]), (A_CONV["pre_pad"], T_INT64, [1, 1]),
                                 (A_CONV["post_pad"], T_INT64, [1, 1])])
    op = be.make(CONV_FWD_OP, [(A_FWD["x"], T_DESC, [x]), (A_FWD["w"], T_DESC, [w]), (A_FWD["y"], T_DESC, [y]),
                               (A_FWD["conv"], T_DESC, [conv]), (A_FWD["alpha"], T_FLOAT, [1.0]),
                               (A_FWD["beta"], T_FLOAT, [0.0])])
    graph = be.make(OP_GRAPH, [(A_GRAPH_OPS, T_DESC, [op]), (A_GRAPH_HANDLE, T_HANDLE, [handle])])
    heur = be.make(ENGINE_HEUR, [(A_HEUR_GRAPH, T_DESC, [graph]), (A_HEUR_MODE, T_HEUR_MODE, [HEUR_INSTANT])])
    count = ctypes.c_int64()
    check(be.lib, be.lib.cudnnBackendGetAttribute(heur, A_HEUR_RESULTS, T_DESC, 0, ctypes.byref(count), None),
          "heuristics count")
    cfgs = [be.make(ENGINE_CFG, [], finalize=False) for _ in range(count.value)]
    array = (ctypes.c_void_p * len(cfgs))(*[c.value for c in cfgs])
    got = ctypes.c_int64()
    check(be.lib, be.lib.cudnnBackendGetAttribute(heur, A_HEUR_RESULTS, T_DESC, len(cfgs), ctypes.byref(got),
                                                  array), "heuristics results")
    for i, cfg in enumerate(cfgs[: got.value]):
        plan = be.make(PLAN, [(A_PLAN_HANDLE, T_HANDLE, [handle]), (A_PLAN_CFG, T_DESC, [cfg])], finalize=False)
        if be.lib.cudnnBackendFinalize(plan) != 0:
            continue
        size = ctypes.c_int64()
        check(be.lib, be.lib.cudnnBackendGetAttribute(plan, A_PLAN_WORKSPACE, T_INT64, 1, ctypes.byref(got),
                                                      ctypes.byref(size)), "workspace size")
        return plan, size.value, i
    raise CudnnError(f"none of {got.value} engine configurations finalized")


def variant_pack(be: Backend, ptrs: list[int], workspace: int) -> ctypes.c_void_p:
    return be.make(VARIANT_PACK, [(A_VP_UIDS, T_INT64, [1, 2, 3]), (A_VP_PTRS, T_VOID_PTR, ptrs),
                                  (A_VP_WORKSPACE, T_VOID_PTR, [workspace or None])])


def per_call_us(fn: Any, calls: int, rounds: int) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def legacy_setup(lib: Any, handle: ctypes.c_void_p, n: int, c: int, k: int, hw: int) -> tuple[Any, ...]:
    """(x desc, w desc, conv desc, y desc, algo, workspace bytes) for cudnnConvolutionForward."""
    def desc(create: str) -> ctypes.c_void_p:
        d = ctypes.c_void_p()
        check(lib, getattr(lib, create)(ctypes.byref(d)), create)
        return d
    xd, yd, wd, cd = (desc("cudnnCreateTensorDescriptor"), desc("cudnnCreateTensorDescriptor"),
                      desc("cudnnCreateFilterDescriptor"), desc("cudnnCreateConvolutionDescriptor"))
    check(lib, lib.cudnnSetTensor4dDescriptor(xd, 0, DATA_FLOAT, n, c, hw, hw), "x desc")
    check(lib, lib.cudnnSetTensor4dDescriptor(yd, 0, DATA_FLOAT, n, k, hw, hw), "y desc")
    check(lib, lib.cudnnSetFilter4dDescriptor(wd, DATA_FLOAT, 0, k, c, 3, 3), "w desc")
    check(lib, lib.cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CROSS_CORRELATION, DATA_FLOAT), "conv")

    class Perf(ctypes.Structure):
        _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                    ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int), ("math", ctypes.c_int),
                    ("reserved", ctypes.c_int * 3)]
    perf, got = (Perf * 8)(), ctypes.c_int()
    check(lib, lib.cudnnGetConvolutionForwardAlgorithm_v7(handle, xd, wd, cd, yd, 8, ctypes.byref(got), perf),
          "heuristics")
    size = ctypes.c_size_t()
    check(lib, lib.cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, cd, yd, perf[0].algo,
                                                           ctypes.byref(size)), "workspace")
    return xd, wd, cd, yd, perf[0].algo, size.value


def probe(lib: Any, handle: ctypes.c_void_p, problem: tuple[int, int, int, int], calls: int,
          rounds: int) -> dict[str, Any]:
    import torch

    n, c, k, hw = problem
    x = torch.randn(n, c, hw, hw, device="cuda")
    w = torch.randn(k, c, 3, 3, device="cuda") * 0.1
    y_legacy = torch.empty(n, k, hw, hw, device="cuda")
    y_graph = torch.empty_like(y_legacy)
    xd, wd, cd, yd, algo, ws_legacy = legacy_setup(lib, handle, n, c, k, hw)
    ws1 = torch.empty(max(ws_legacy, 1), dtype=torch.uint8, device="cuda")
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)

    def legacy() -> None:
        lib.cudnnConvolutionForward(handle, ctypes.byref(one), xd, ctypes.c_void_p(x.data_ptr()), wd,
                                    ctypes.c_void_p(w.data_ptr()), cd, algo, ctypes.c_void_p(ws1.data_ptr()),
                                    ctypes.c_size_t(ws_legacy), ctypes.byref(zero), yd,
                                    ctypes.c_void_p(y_legacy.data_ptr()))

    be = Backend(lib)
    try:
        plan, ws_graph, cfg_index = graph_plan(be, handle, (n, c, hw, hw), (k, c, 3, 3), (n, k, hw, hw))
        ws2 = torch.empty(max(ws_graph, 1), dtype=torch.uint8, device="cuda")
        ptrs = [x.data_ptr(), w.data_ptr(), y_graph.data_ptr()]
        pack = variant_pack(be, ptrs, ws2.data_ptr() if ws_graph else 0)
        execute = lib.cudnnBackendExecute

        def graph_cached() -> None:
            execute(handle, plan, pack)

        def graph_fresh_pack() -> None:
            fresh = Backend(lib)
            vp = variant_pack(fresh, ptrs, ws2.data_ptr() if ws_graph else 0)
            execute(handle, plan, vp)
            fresh.close()

        check(lib, execute(handle, plan, pack), "execute")
        legacy()
        torch.cuda.synchronize()
        diff = float((y_graph - y_legacy).abs().max())
        scale = float(y_legacy.abs().max())
        out = {
            "problem": f"b{n} {c}->{k} {hw}x{hw} 3x3",
            "legacy_algo": algo, "legacy_workspace": ws_legacy,
            "graph_engine_cfg_index": cfg_index, "graph_workspace": ws_graph,
            "max_abs_diff": diff, "max_abs_output": scale,
            "legacy_us": per_call_us(legacy, calls, rounds),
            "graph_cached_us": per_call_us(graph_cached, calls, rounds),
            "graph_fresh_pack_us": per_call_us(graph_fresh_pack, calls, rounds),
        }
    finally:
        be.close()
    with torch.no_grad():
        out["torch_conv2d_us"] = per_call_us(lambda: torch.nn.functional.conv2d(x, w, padding=1), calls, rounds)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import torch

    lib = load_cudnn()
    handle = ctypes.c_void_p()
    check(lib, lib.cudnnCreate(ctypes.byref(handle)), "cudnnCreate")
    print(f"cuDNN {lib.cudnnGetVersion()}, torch {torch.__version__}, {torch.cuda.get_device_name()}; "
          f"host us per call, medians of {args.rounds} rounds of {args.calls} calls")
    rows = []
    for problem in PROBLEMS:
        row = probe(lib, handle, problem, args.calls, args.rounds)
        rows.append(row)
        print(f"{row['problem']}: legacy (algo {row['legacy_algo']}) {row['legacy_us']:.1f}, graph cached plan "
              f"{row['graph_cached_us']:.1f}, graph + variant pack per call {row['graph_fresh_pack_us']:.1f}, "
              f"torch conv2d {row['torch_conv2d_us']:.1f}; max |graph - legacy| {row['max_abs_diff']:.3g} "
              f"(outputs up to {row['max_abs_output']:.3g})", flush=True)
    lib.cudnnDestroy(handle)
    if args.json:
        args.json.write_text(json.dumps({"cudnn": lib.cudnnGetVersion(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
