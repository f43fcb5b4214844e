"""Findings of `lgpatch doctor`: what the machine facts mean (severity, topic, message and the fix to pass)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from legacy_gpu_patch.cuda import jit_cache, targets
from legacy_gpu_patch.cuda import knowledge as ck
from legacy_gpu_patch.cuda.machine import Gpu, GpuScan
from legacy_gpu_patch.cuda.nvcc_probe import NvccInfo
from legacy_gpu_patch.cuda.toolchain import Compiler

OK, INFO, WARN, ERROR = "ok", "info", "warn", "error"


@dataclass(frozen=True)
class DoctorFinding:
    """One line of the doctor's verdict (classify.findings.Finding is an error found in a build log)."""

    severity: str  # ok | info | warn | error
    topic: str
    message: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "topic": self.topic, "message": self.message, "fix": self.fix}


@dataclass
class DoctorReport:
    """Everything `lgpatch doctor` found: the facts, the plans, the findings, the recipes that fit."""

    gpus: GpuScan
    nvccs: list[NvccInfo]
    compilers: list[Compiler]
    cmake: dict[str, Any]
    cudnn: list[dict[str, Any]]
    python: dict[str, Any]
    numpy: str | None
    jit: jit_cache.CacheStatus
    host_limits: dict[str, dict[str, str]] = field(default_factory=dict)  # nvcc path → limits from host_config.h
    plans: list[tuple[NvccInfo, Gpu, targets.Plan]] = field(default_factory=list)
    findings: list[DoctorFinding] = field(default_factory=list)
    recipes: list[dict[str, Any]] = field(default_factory=list)
    recipes_note: str | None = None
    recipe_check: dict[str, Any] | None = None
    elapsed_s: float = 0.0

    @property
    def recipe_ok(self) -> bool:
        return self.recipe_check is None or bool(self.recipe_check.get("ok"))

    def to_json(self) -> dict[str, Any]:
        from legacy_gpu_patch import __version__

        return {
            "lgpatch": __version__,
            "gpus": self.gpus.to_json(),
            "nvcc": [dict(n.to_json(), host_compiler_limits=self.host_limits.get(n.path, {})) for n in self.nvccs],
            "cudnn": self.cudnn,
            "compilers": [c.to_json() for c in self.compilers],
            "cmake": self.cmake,
            "python": self.python,
            "numpy": self.numpy,
            "jit_cache": self.jit.to_json(),
            "plans": [dict(p.to_json(), nvcc=n.path, gpu_index=g.index, gpu_name=g.name) for n, g, p in self.plans],
            "findings": [f.to_json() for f in self.findings],
            "recipes": self.recipes,
            "recipes_note": self.recipes_note,
            "recipe_check": self.recipe_check,
            "ok": not any(f.severity == ERROR for f in self.findings) and self.recipe_ok,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def compiler_findings(info: NvccInfo, limits: Mapping[str, str], host: Compiler | None,
                      compilers: Sequence[Compiler]) -> list[DoctorFinding]:
    label = f"nvcc {info.version}"
    if host is None:
        return [DoctorFinding(ERROR, "compiler", f"{label}: no host C++ compiler (g++) found", "install g++")]
    if host.version is None:
        return [DoctorFinding(WARN, "compiler", f"{label}: cannot tell the version of {host.path}: {host.error}")]
    key = "clang_max" if host.kind == "clang" else "gcc_max"
    maximum = limits.get(key)
    if maximum is None:
        return [DoctorFinding(INFO, "compiler", f"{label}: host {host.name} {host.version}; limit unknown for this "
                                                 "toolkit")]
    if ck.version_at_most(host.version, maximum):
        return [DoctorFinding(OK, "compiler", f"{label} accepts host {host.name} {host.version} (<= {maximum}, "
                                               f"{limits.get('source', 'table')})")]
    fitting = [c for c in compilers if c.kind == host.kind and c.version and c.name.startswith(("g++-", "clang++-"))
               and ck.version_at_most(c.version, maximum)]
    fitting.sort(key=lambda c: ck.vtuple(c.version or "0"), reverse=True)
    fixes = []
    if fitting:
        best = fitting[0]
        fixes.append(f"-ccbin {best.path} (nvcc), -DCMAKE_CUDA_HOST_COMPILER={best.path} or CUDAHOSTCXX={best.path} "
                     "(CMake)")
    else:
        fixes.append(f"install {'g++' if host.kind == 'gcc' else 'clang++'}-{maximum.split('.')[0]} and pass it "
                     "with -ccbin")
    try:
        allows = ck.toolkit(info.version or "0").allows_unsupported_compiler
    except (ck.UnknownToolkit, ValueError):
        allows = False
    if allows:
        fixes.append("or -allow-unsupported-compiler (nvcc >= 11.0; at your own risk)")
    return [DoctorFinding(ERROR, "compiler",
                          f"{label} rejects host {host.name} {host.version}: its host_config.h allows {host.kind} <= "
                    f"{maximum} ('unsupported GNU version!')", "; ".join(fixes))]


def cmake_findings(cmake: Mapping[str, Any]) -> list[DoctorFinding]:
    if not cmake.get("version"):
        return [DoctorFinding(INFO, "cmake", "cmake not found (needed by CMake-based recipes such as PyTorch)")]
    v = cmake["version"]
    if ck.version_at_least(v, ck.CMAKE_POLICY_FLOOR["min_cmake"]):
        return [DoctorFinding(WARN, "cmake", f"cmake {v}: {ck.CMAKE_POLICY_FLOOR['rule']} — legacy trees (PyTorch "
                              "1.5 and its third_party) fail to configure", ck.CMAKE_POLICY_FLOOR["fix"])]
    return [DoctorFinding(OK, "cmake", f"cmake {v}")]


def cudnn_findings(cudnn: Sequence[Mapping[str, Any]]) -> list[DoctorFinding]:
    if not cudnn:
        return [DoctorFinding(INFO, "cudnn", "no cuDNN headers found (only recipes with cudnn=true need them)")]
    out = []
    for c in cudnn:
        msg = f"cuDNN {c['version']} ({c['header']})"
        if ck.vtuple(c["version"])[0] >= 8:
            out.append(DoctorFinding(INFO, "cudnn", msg + ": version macros live in cudnn_version.h; build scripts "
                                     "that read cudnn.h (PyTorch 1.5) need the cudnn8-version-header patchset"))
        else:
            out.append(DoctorFinding(OK, "cudnn", msg))
    return out


def plan_findings(plans: Sequence[tuple[NvccInfo, Gpu, targets.Plan]],
                  jit: jit_cache.CacheStatus) -> list[DoctorFinding]:
    out = []
    for _nvcc, gpu, p in plans:
        where = f"CUDA {p.toolkit} → GPU {gpu.index} {gpu.name} (sm_{p.gpu})"
        if p.status == targets.IMPOSSIBLE:
            out.append(DoctorFinding(ERROR, "plan", f"{where}: cannot run", " ".join(p.reasons[1:]) or None))
            continue
        flags = p.flags.torch_cuda_arch_list if p.flags else ""
        if p.driver is not None and p.driver.status == targets.DRIVER_REFUSE:
            out.append(DoctorFinding(ERROR, "driver", f"{where}: {p.driver.message}"))
        elif p.driver is not None and p.driver.status == targets.DRIVER_MINOR_COMPAT:
            out.append(DoctorFinding(WARN, "driver", f"{where}: {p.driver.message}"))
        if p.status == targets.NATIVE:
            out.append(DoctorFinding(OK, "plan", f"{where}: native cubin ({', '.join(p.targets)}; "
                                                  f"TORCH_CUDA_ARCH_LIST={flags})"))
        elif p.status == targets.SASS_COMPATIBLE:
            out.append(DoctorFinding(OK, "plan", f"{where}: {p.sass} cubin runs natively (binary compatibility; "
                                                  f"TORCH_CUDA_ARCH_LIST={flags})"))
        else:
            out.append(DoctorFinding(WARN, "plan", f"{where}: only through PTX JIT ({p.ptx}); the first start compiles",
                               "keep the driver's JIT cache persistent and large: eval \"$(lgpatch jit-cache env)\""))
    if any(p.needs_jit for _, _, p in plans):
        for problem in jit.problems:
            out.append(DoctorFinding(WARN, "jit-cache", problem, "eval \"$(lgpatch jit-cache env)\""))
    return out


def nvcc_findings(nvccs: Sequence[NvccInfo]) -> list[DoctorFinding]:
    if not nvccs:
        return [DoctorFinding(WARN, "nvcc", "no nvcc found (PATH, CUDA_HOME/CUDA_PATH, /usr/local/cuda*, pip "
                                             "nvidia-cuda-nvcc)", "install a CUDA toolkit or set CUDA_HOME")]
    out = []
    for n in nvccs:
        if n.error:
            out.append(DoctorFinding(WARN, "nvcc", f"{n.path}: {n.error}"))
            continue
        note = "" if n.lists_supported else " (no --list-gpu-arch: planning from lgpatch's tables)"
        if n.version and not ck.is_tabulated(n.version):
            note += f"; CUDA {n.version} is outside lgpatch's tables ({ck.OLDEST_TOOLKIT}–{ck.NEWEST_TOOLKIT})"
        out.append(DoctorFinding(OK, "nvcc", f"nvcc {n.full_version or n.version} at {n.path}{note}"))
    return out


def gpu_findings(scan: GpuScan, nvccs: Sequence[NvccInfo]) -> list[DoctorFinding]:
    if not scan.gpus:
        return [DoctorFinding(WARN, "gpu", f"no GPU visible ({scan.error or 'none found'}): checking the toolchain "
                              "only; nothing about running can be verified here")]
    out = []
    for g in scan.gpus:
        info = ck.arch_info(g.number) if g.number else None
        fam = f", {info.family}" if info else ""
        how = "" if g.cc_source == "reported" else f" ({g.cc_source})"
        out.append(DoctorFinding(OK, "gpu", f"GPU {g.index}: {g.name}, compute capability {g.cc or '?'}{how}{fam}; "
                                             f"driver {scan.driver or '?'} (CUDA {scan.driver_cuda or '?'}) via "
                                      f"{scan.source}"))
        if g.number and not nvccs:
            rng = targets.native_range(g.number)
            if rng:
                out.append(DoctorFinding(INFO, "plan",
                                         f"sm_{g.number} gets native cubins from CUDA {rng[0]} to {rng[1]}"))
    return out
