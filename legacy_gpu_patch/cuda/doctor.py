"""`lgpatch doctor`: what is on this machine, what it can build and run, and what to pass to make it work.

The probes run in parallel so doctor stays fast, each with a timeout (a missing tool is a finding, never a crash):
GPUs and the driver (machine.py), every nvcc (nvcc_probe), host compilers, cmake, cuDNN and numpy (toolchain.py).
Then the verdict: for every nvcc x GPU a targets.Plan (native / sass-compatible / PTX JIT / impossible, the flags,
the driver check), findings with fixes (findings.py), and which recipes fit (fit.py). `--recipe R --param k=v`
checks one recipe and sets the exit code (ExitCode.DOCTOR when this machine cannot build or run it).

The engine is stdlib-only; `python -m legacy_gpu_patch.cuda.doctor --json` runs it where click/rich/PyYAML are not
installed (recipes are then skipped, and the JSON says so).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from legacy_gpu_patch.cuda import jit_cache, nvcc_probe, targets
from legacy_gpu_patch.cuda import knowledge as ck
from legacy_gpu_patch.cuda.findings import (
    ERROR,
    INFO,
    OK,
    WARN,
    DoctorFinding,
    DoctorReport,
    cmake_findings,
    compiler_findings,
    cudnn_findings,
    gpu_findings,
    nvcc_findings,
    plan_findings,
)
from legacy_gpu_patch.cuda.fit import add_recipes, check_recipe, recipe_fit
from legacy_gpu_patch.cuda.machine import cc_from_name, scan_gpus, scan_nvidia_smi, scan_nvml
from legacy_gpu_patch.cuda.toolchain import (
    Compiler,
    cudnn_search_dirs,
    default_host_compiler,
    host_limits_for,
    numpy_version,
    scan_cmake,
    scan_compilers,
    scan_cudnn,
)

if TYPE_CHECKING:
    from legacy_gpu_patch.config.recipe import Recipe
    from legacy_gpu_patch.config.search import SearchPath

# Re-exported: the doctor's one import for callers and tests.
__all__ = ["ERROR", "INFO", "OK", "WARN", "Compiler", "DoctorFinding", "DoctorReport", "cc_from_name", "check_recipe",
           "cmake_findings", "compiler_findings", "cudnn_findings", "diagnose", "main", "recipe_fit", "scan_cudnn",
           "scan_gpus", "scan_nvidia_smi", "scan_nvml"]


def diagnose(env: Mapping[str, str] | None = None, nvml: Any = None, recipe: Recipe | None = None,
             recipe_params: Mapping[str, Any] | None = None, search: SearchPath | None = None,
             with_recipes: bool = True
             ) -> DoctorReport:
    """Run every probe (in parallel) and build the report."""
    t0 = time.perf_counter()
    env = dict(os.environ if env is None else env)
    with ThreadPoolExecutor(max_workers=6) as pool:
        f_gpus = pool.submit(scan_gpus, env, nvml)
        f_nvcc = pool.submit(nvcc_probe.find_all, env)
        f_comp = pool.submit(scan_compilers, env)
        f_cmake = pool.submit(scan_cmake, env)
        f_numpy = pool.submit(numpy_version)
        nvccs = f_nvcc.result()
        f_cudnn = pool.submit(lambda: scan_cudnn(cudnn_search_dirs(nvccs, env)))
        report = DoctorReport(
            gpus=f_gpus.result(), nvccs=nvccs, compilers=f_comp.result(), cmake=f_cmake.result(),
            cudnn=f_cudnn.result(),
            python={"version": platform.python_version(), "executable": sys.executable},
            numpy=f_numpy.result(), jit=jit_cache.status(env),
        )
    report.host_limits = {n.path: host_limits_for(n) for n in nvccs if n.version}
    for n in nvccs:
        if not n.version:
            continue
        for g in report.gpus.gpus:
            if g.number is None:
                continue
            try:
                p = targets.plan(n.version, g.number, driver=report.gpus.driver, driver_cuda=report.gpus.driver_cuda,
                                 nvcc=n)
            except ck.UnknownToolkit as exc:
                report.findings.append(DoctorFinding(WARN, "plan", str(exc)))
                continue
            report.plans.append((n, g, p))
    host = default_host_compiler(report.compilers, env)
    report.findings += gpu_findings(report.gpus, nvccs)
    report.findings += nvcc_findings(nvccs)
    for n in nvccs:
        if n.version:
            report.findings += compiler_findings(n, report.host_limits.get(n.path, {}), host, report.compilers)
    report.findings += plan_findings(report.plans, report.jit)
    report.findings += cudnn_findings(report.cudnn)
    report.findings += cmake_findings(report.cmake)
    python = f"python {platform.python_version()}"
    if report.numpy is None:
        report.findings.append(DoctorFinding(INFO, "python", f"{python}; numpy not installed"))
    else:
        report.findings.append(DoctorFinding(OK, "python", f"{python}, numpy {report.numpy}"))
    if with_recipes:
        add_recipes(report, search)
    if recipe is not None:
        report.recipe_check = check_recipe(recipe, recipe_params or {}, report, env)
    report.elapsed_s = time.perf_counter() - t0
    return report


def main(argv: list[str] | None = None) -> int:
    """`python -m legacy_gpu_patch.cuda.doctor [--json]`: the same report without click/rich (plain text or JSON)."""
    import json

    args = sys.argv[1:] if argv is None else argv
    report = diagnose(with_recipes="--no-recipes" not in args)
    if "--json" in args:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for f in report.findings:
            print(f"[{f.severity:5}] {f.topic:9} {f.message}" + (f"\n{'':17}fix: {f.fix}" if f.fix else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
