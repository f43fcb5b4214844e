"""`lgpatch doctor`: what is on this machine, what it can build and run, and what to pass to make it work.

Probes (each with a timeout; a missing tool is a finding, never a crash), run in parallel so doctor stays fast:
- GPUs and driver: NVML through nvidia-ml-py (`import pynvml`) when installed, else
  `nvidia-smi --query-gpu=... --format=csv` (drivers older than ~510 know no `compute_cap` field: then the
  capability comes from the GPU's name, and says so);
- every nvcc (nvcc_probe), its accepted targets and the host compiler limits in its own crt/host_config.h;
- cuDNN from cudnn_version.h, falling back to cudnn.h (the move PyTorch 1.5 trips over);
- host gcc/g++/clang++ (and versioned g++-N on PATH, the usual fix), cmake, python, numpy.

Then the verdict: for every nvcc × GPU a planner.Plan (native / sass-compatible / PTX JIT / impossible, the flags,
the driver check), findings with fixes, and which recipes fit. `--recipe R --param k=v` checks one recipe and
sets the exit code (ExitCode.DOCTOR when this machine cannot build or run it).

The engine is stdlib-only; `python -m legacy_gpu_patch.cuda.doctor --json` runs it where click/rich/PyYAML are not
installed (recipes are then skipped, and the JSON says so).
"""

from __future__ import annotations

import glob
import importlib
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legacy_gpu_patch.cuda import jit_cache, nvcc_probe
from legacy_gpu_patch.cuda import knowledge as ck
from legacy_gpu_patch.cuda import targets as planner
from legacy_gpu_patch.cuda.archflags import flags_for, parse_arch
from legacy_gpu_patch.cuda.nvcc_probe import NvccInfo

PROBE_TIMEOUT_S = 5.0
NVIDIA_SMI_QUERY = "index,name,compute_cap,driver_version,memory.total,uuid"
NVIDIA_SMI_QUERY_OLD = "index,name,driver_version,memory.total,uuid"  # drivers without the compute_cap field

OK, INFO, WARN, ERROR = "ok", "info", "warn", "error"


# --------------------------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    cc: str | None  # "8.6"
    memory_mib: int | None
    uuid: str | None
    cc_source: str = "reported"  # reported | from name | unknown

    @property
    def number(self) -> int | None:
        if not self.cc:
            return None
        major, _, minor = self.cc.partition(".")
        return int(major) * 10 + int(minor or 0)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "cc": self.cc, "sm": f"sm_{self.number}" if self.cc else None,
                "memory_mib": self.memory_mib, "uuid": self.uuid, "cc_source": self.cc_source}


@dataclass(frozen=True)
class GpuScan:
    source: str  # nvml | nvidia-smi | none
    gpus: tuple[Gpu, ...] = ()
    driver: str | None = None
    driver_cuda: str | None = None  # newest CUDA the driver supports ("13.0")
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "driver": self.driver, "driver_cuda": self.driver_cuda,
                "devices": [g.to_json() for g in self.gpus], "error": self.error}


# GPU name → compute capability, for nvidia-smi without compute_cap (drivers < ~510). Ordered: first match wins.
_NAME_CC: tuple[tuple[str, str], ...] = (
    (r"RTX PRO \d+ Blackwell|RTX 50\d\d", "12.0"), (r"\bGB10\b", "12.1"), (r"\bB300|GB300", "10.3"),
    (r"\bB200|GB200|\bB100", "10.0"), (r"\bH100|\bH200|\bH800|\bH20\b|GH200", "9.0"),
    (r"RTX \d+ Ada|RTX 40\d\d|\bL4\b|\bL40", "8.9"), (r"\bA100|\bA30\b|\bA800", "8.0"),
    (r"RTX 30\d\d|RTX A\d+|\bA40\b|\bA10G?\b|\bA16\b|\bA2\b", "8.6"),
    (r"TITAN RTX|RTX 20\d\d|GTX 16\d\d|Quadro RTX|Tesla T4|\bT4\b|\bT\d{3,4}\b", "7.5"),
    (r"TITAN V|V100", "7.0"), (r"P100", "6.0"), (r"GTX 10\d0|TITAN Xp|TITAN X \(Pascal\)|Quadro P\d|P40|P4\b", "6.1"),
    (r"GTX 9\d0|TITAN X\b|M40|M60|Quadro M\d", "5.2"), (r"GTX 750|K2200|Quadro K[12]", "5.0"), (r"K80", "3.7"),
    (r"K40|K20|GTX TITAN|GTX 780", "3.5"), (r"GTX 6\d0|GTX 7[67]0|K10\b", "3.0"),
)


def cc_from_name(name: str) -> str | None:
    for pattern, cc in _NAME_CC:
        if re.search(pattern, name, re.I):
            return cc
    return None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def scan_nvml(nvml: Any = None) -> GpuScan | None:
    """GPUs through NVML (`pynvml` from nvidia-ml-py, or any object with its functions). None: NVML unavailable
    (or `nvml=False`: do not try it)."""
    if nvml is False:
        return None
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return GpuScan("nvml", error=f"NVML: {exc}")
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        driver_cuda = None
        for fn in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            if hasattr(nvml, fn):
                try:
                    v = int(getattr(nvml, fn)())
                    driver_cuda = f"{v // 1000}.{v % 1000 // 10}"
                    break
                except Exception:
                    continue
        gpus = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = _text(nvml.nvmlDeviceGetName(h))
            try:
                major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
                cc, how = f"{major}.{minor}", "reported"
            except Exception:
                cc = cc_from_name(name)
                how = "from name" if cc else "unknown"
            try:
                mem = int(nvml.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024)
            except Exception:
                mem = None
            try:
                uuid = _text(nvml.nvmlDeviceGetUUID(h))
            except Exception:
                uuid = None
            gpus.append(Gpu(i, name, cc, mem, uuid, how))
        return GpuScan("nvml", tuple(gpus), driver, driver_cuda or ck.driver_cuda_version(driver))
    except Exception as exc:
        return GpuScan("nvml", error=f"NVML: {exc}")
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def parse_nvidia_smi_csv(text: str, with_cc: bool = True) -> tuple[list[Gpu], str | None]:
    """Rows of `nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY[_OLD]> --format=csv,noheader,nounits` → (gpus, driver)."""
    gpus: list[Gpu] = []
    driver = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < (6 if with_cc else 5) or not cells[0].isdigit():
            continue
        if with_cc:
            idx, name, cc, drv, mem, uuid = cells[:6]
            how = "reported"
            if not re.fullmatch(r"\d+\.\d+", cc):
                cc, how = cc_from_name(name), "from name"
        else:
            idx, name, drv, mem, uuid = cells[:5]
            cc = cc_from_name(name)
            how = "from name" if cc else "unknown"
        driver = driver or drv
        gpus.append(Gpu(int(idx), name, cc, int(mem) if mem.isdigit() else None, uuid or None, how))
    return gpus, driver


def _run(argv: Sequence[str], timeout: float = PROBE_TIMEOUT_S, env: Mapping[str, str] | None = None
         ) -> tuple[int, str]:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                           env=None if env is None else dict(env))
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s"
    except OSError as exc:
        return -1, f"cannot run: {exc.strerror or exc}"
    return p.returncode, (p.stdout or "") + (p.stderr or "")


def scan_nvidia_smi(env: Mapping[str, str] | None = None, timeout: float = PROBE_TIMEOUT_S) -> GpuScan:
    env = os.environ if env is None else env
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if not smi:
        return GpuScan("none", error="no NVIDIA driver tools: nvidia-smi not found and NVML (nvidia-ml-py) absent")
    rc, out = _run([smi, f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"], timeout, env)
    with_cc = True
    if rc != 0 and "compute_cap" in out:  # driver < ~510: ask again without the field
        with_cc = False
        rc, out = _run([smi, f"--query-gpu={NVIDIA_SMI_QUERY_OLD}", "--format=csv,noheader,nounits"], timeout, env)
    if rc != 0:
        msg = out.strip().splitlines()[0] if out.strip() else f"exit status {rc}"
        return GpuScan("nvidia-smi", error=f"nvidia-smi: {msg}")
    gpus, driver = parse_nvidia_smi_csv(out, with_cc)
    return GpuScan("nvidia-smi", tuple(gpus), driver, ck.driver_cuda_version(driver) if driver else None,
                   None if gpus else "nvidia-smi lists no GPU")


def scan_gpus(env: Mapping[str, str] | None = None, nvml: Any = None) -> GpuScan:
    scan = scan_nvml(nvml)
    if scan is not None and scan.gpus:
        return scan
    smi = scan_nvidia_smi(env)
    if smi.gpus or scan is None:
        return smi
    return scan if not smi.error else GpuScan(scan.source, (), scan.driver, scan.driver_cuda,
                                              f"{scan.error}; {smi.error}")


@dataclass(frozen=True)
class Compiler:
    name: str  # g++, gcc, clang++, g++-11
    path: str
    version: str | None
    kind: str  # gcc | clang
    error: str | None = None

    @property
    def major(self) -> int | None:
        return ck.vtuple(self.version)[0] if self.version else None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "version": self.version, "kind": self.kind, "error": self.error}


def probe_compiler(name: str, path: str) -> Compiler:
    kind = "clang" if "clang" in name else "gcc"
    if kind == "gcc":
        rc, out = _run([path, "-dumpfullversion", "-dumpversion"])
        m = re.match(r"\s*(\d+(?:\.\d+)*)", out) if rc == 0 else None
    else:
        rc, out = _run([path, "--version"])
        m = re.search(r"clang version (\d+(?:\.\d+)*)", out) if rc == 0 else None
    if not m:
        return Compiler(name, path, None, kind, error=out.strip()[:200] or f"exit status {rc}")
    return Compiler(name, path, m.group(1), kind)


def scan_compilers(env: Mapping[str, str] | None = None) -> list[Compiler]:
    """g++/gcc/clang++ as a build finds them, plus every versioned g++-N / clang++-N on PATH (the -ccbin fixes)."""
    env = os.environ if env is None else env
    path = env.get("PATH", "")
    names: dict[str, str] = {}
    for n in ("g++", "gcc", "clang++"):
        hit = shutil.which(n, path=path)
        if hit:
            names[n] = hit
    for d in path.split(os.pathsep):
        for p in sorted(glob.glob(os.path.join(d, "g++-[0-9]*")) + glob.glob(os.path.join(d, "clang++-[0-9]*"))):
            n = os.path.basename(p)
            if re.fullmatch(r"(g\+\+|clang\+\+)-\d+", n) and n not in names and os.access(p, os.X_OK):
                names[n] = p
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda kv: probe_compiler(*kv), names.items()))


def scan_cmake(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if env is None else env
    cmake = shutil.which("cmake", path=env.get("PATH"))
    if not cmake:
        return {"path": None, "version": None, "error": "cmake not found"}
    _rc, out = _run([cmake, "--version"])
    m = re.search(r"cmake version (\d+(?:\.\d+)*)", out)
    return {"path": cmake, "version": m.group(1) if m else None, "error": None if m else out.strip()[:200]}


_CUDNN_RE = {k: re.compile(rf"#define\s+CUDNN_{k}\s+(\d+)") for k in ("MAJOR", "MINOR", "PATCHLEVEL")}


def parse_cudnn_header(text: str) -> str | None:
    parts = [m.group(1) if (m := r.search(text)) else None for r in _CUDNN_RE.values()]
    if parts[0] is None:
        return None
    return ".".join(p if p is not None else "0" for p in parts)


def cudnn_search_dirs(nvccs: Sequence[NvccInfo], env: Mapping[str, str] | None = None) -> list[Path]:
    env = os.environ if env is None else env
    dirs: list[Path] = []
    for info in nvccs:
        dirs += info.include_dirs
    for var in ("CUDNN_INCLUDE_DIR", "CUDNN_INCLUDE_PATH"):
        if env.get(var):
            dirs.append(Path(env[var]))
    for var in ("CUDNN_HOME", "CUDNN_PATH", "CUDNN_ROOT", "CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            dirs.append(Path(env[var]) / "include")
    dirs += [Path("/usr/include"), Path("/usr/include/x86_64-linux-gnu"), Path("/usr/include/aarch64-linux-gnu"),
             Path("/usr/local/cuda/include")]
    dirs += [sp / "nvidia" / "cudnn" / "include" for sp in nvcc_probe.site_package_dirs()]
    out: list[Path] = []
    for d in dirs:
        if d.is_dir() and d not in out:
            out.append(d)
    return out


def scan_cudnn(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """Every cuDNN header set found: cudnn_version.h (cuDNN >= 8) first, cudnn.h (cuDNN <= 7) as the fallback."""
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for d in dirs:
        for pattern in ("cudnn_version.h", "cudnn_version_v*.h", "cudnn.h", "cudnn_v*.h"):
            for p in sorted(d.glob(pattern)):
                real = os.path.realpath(p)
                try:
                    text = p.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                version = parse_cudnn_header(text)
                if version is None:
                    continue
                key = f"{os.path.dirname(real)}:{version}"
                if key in seen:
                    continue
                seen.add(key)
                found.append({"version": version, "header": str(p), "from": os.path.basename(p).split("_v")[0]
                              .replace(".h", "") + ".h"})
    return found


def numpy_version() -> str | None:
    try:
        from importlib import metadata

        return metadata.version("numpy")
    except Exception:
        return None


# --------------------------------------------------------------------------------------------- verdict


@dataclass(frozen=True)
class Finding:
    severity: str  # ok | info | warn | error
    topic: str
    message: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "topic": self.topic, "message": self.message, "fix": self.fix}


@dataclass
class Report:
    gpus: GpuScan
    nvccs: list[NvccInfo]
    compilers: list[Compiler]
    cmake: dict[str, Any]
    cudnn: list[dict[str, Any]]
    python: dict[str, Any]
    numpy: str | None
    jit: jit_cache.CacheStatus
    host_limits: dict[str, dict[str, str]] = field(default_factory=dict)  # nvcc path → limits from host_config.h
    plans: list[tuple[NvccInfo, Gpu, planner.Plan]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
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


def host_limits_for(info: NvccInfo) -> dict[str, str]:
    """Host compiler limits for one nvcc: its own host_config.h first (what it enforces), else the table."""
    limits = nvcc_probe.host_config_limits(info.include_dirs)
    if limits:
        return dict(limits, source="host_config.h")
    if info.version:
        try:
            row = ck.toolkit(info.version)
        except ck.UnknownToolkit:
            return {}
        out = {"source": "table"}
        if row.gcc_max is not None:
            out["gcc_max"] = str(row.gcc_max)
        if row.clang_max is not None:
            out["clang_max"] = row.clang_max
        return out
    return {}


def default_host_compiler(compilers: Sequence[Compiler], env: Mapping[str, str]) -> Compiler | None:
    """The compiler nvcc will call: NVCC_CCBIN / CUDAHOSTCXX when set, else g++ from PATH."""
    for var in ("NVCC_CCBIN", "CUDAHOSTCXX"):
        if env.get(var):
            want = os.path.realpath(shutil.which(env[var], path=env.get("PATH")) or env[var])
            for c in compilers:
                if os.path.realpath(c.path) == want:
                    return c
            return probe_compiler(os.path.basename(env[var]), env[var])
    return next((c for c in compilers if c.name == "g++"), None) or next((c for c in compilers if c.name == "gcc"),
                                                                        None)


def compiler_findings(info: NvccInfo, limits: Mapping[str, str], host: Compiler | None,
                      compilers: Sequence[Compiler]) -> list[Finding]:
    label = f"nvcc {info.version}"
    if host is None:
        return [Finding(ERROR, "compiler", f"{label}: no host C++ compiler (g++) found", "install g++")]
    if host.version is None:
        return [Finding(WARN, "compiler", f"{label}: cannot tell the version of {host.path}: {host.error}")]
    key = "clang_max" if host.kind == "clang" else "gcc_max"
    maximum = limits.get(key)
    if maximum is None:
        return [Finding(INFO, "compiler", f"{label}: host {host.name} {host.version}; limit unknown for this "
                                          "toolkit")]
    if ck.version_at_most(host.version, maximum):
        return [Finding(OK, "compiler", f"{label} accepts host {host.name} {host.version} (<= {maximum}, "
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
    return [Finding(ERROR, "compiler",
                    f"{label} rejects host {host.name} {host.version}: its host_config.h allows {host.kind} <= "
                    f"{maximum} ('unsupported GNU version!')", "; ".join(fixes))]


def cmake_findings(cmake: Mapping[str, Any]) -> list[Finding]:
    if not cmake.get("version"):
        return [Finding(INFO, "cmake", "cmake not found (needed by CMake-based recipes such as PyTorch)")]
    v = cmake["version"]
    if ck.version_at_least(v, ck.CMAKE_POLICY_FLOOR["min_cmake"]):
        return [Finding(WARN, "cmake", f"cmake {v}: {ck.CMAKE_POLICY_FLOOR['rule']} — legacy trees (PyTorch 1.5 and "
                                       "its third_party) fail to configure", ck.CMAKE_POLICY_FLOOR["fix"])]
    return [Finding(OK, "cmake", f"cmake {v}")]


def cudnn_findings(cudnn: Sequence[Mapping[str, Any]]) -> list[Finding]:
    if not cudnn:
        return [Finding(INFO, "cudnn", "no cuDNN headers found (only recipes with cudnn=true need them)")]
    out = []
    for c in cudnn:
        msg = f"cuDNN {c['version']} ({c['header']})"
        if ck.vtuple(c["version"])[0] >= 8:
            out.append(Finding(INFO, "cudnn", msg + ": version macros live in cudnn_version.h; build scripts that "
                                                   "read cudnn.h (PyTorch 1.5) need the cudnn8-version-header "
                                                   "patchset"))
        else:
            out.append(Finding(OK, "cudnn", msg))
    return out


def plan_findings(plans: Sequence[tuple[NvccInfo, Gpu, planner.Plan]], jit: jit_cache.CacheStatus) -> list[Finding]:
    out = []
    for _nvcc, gpu, p in plans:
        where = f"CUDA {p.toolkit} → GPU {gpu.index} {gpu.name} (sm_{p.gpu})"
        if p.status == planner.IMPOSSIBLE:
            out.append(Finding(ERROR, "plan", f"{where}: cannot run", " ".join(p.reasons[1:]) or None))
            continue
        flags = p.flags.torch_cuda_arch_list if p.flags else ""
        if p.driver is not None and p.driver.status == planner.DRIVER_REFUSE:
            out.append(Finding(ERROR, "driver", f"{where}: {p.driver.message}"))
        elif p.driver is not None and p.driver.status == planner.DRIVER_MINOR_COMPAT:
            out.append(Finding(WARN, "driver", f"{where}: {p.driver.message}"))
        if p.status == planner.NATIVE:
            out.append(Finding(OK, "plan", f"{where}: native cubin ({', '.join(p.targets)}; "
                                           f"TORCH_CUDA_ARCH_LIST={flags})"))
        elif p.status == planner.SASS_COMPATIBLE:
            out.append(Finding(OK, "plan", f"{where}: {p.sass} cubin runs natively (binary compatibility; "
                                           f"TORCH_CUDA_ARCH_LIST={flags})"))
        else:
            out.append(Finding(WARN, "plan", f"{where}: only through PTX JIT ({p.ptx}); the first start compiles",
                               "keep the driver's JIT cache persistent and large: eval \"$(lgpatch jit-cache env)\""))
    if any(p.needs_jit for _, _, p in plans):
        for problem in jit.problems:
            out.append(Finding(WARN, "jit-cache", problem, "eval \"$(lgpatch jit-cache env)\""))
    return out


def nvcc_findings(nvccs: Sequence[NvccInfo]) -> list[Finding]:
    if not nvccs:
        return [Finding(WARN, "nvcc", "no nvcc found (PATH, CUDA_HOME/CUDA_PATH, /usr/local/cuda*, pip "
                                      "nvidia-cuda-nvcc)", "install a CUDA toolkit or set CUDA_HOME")]
    out = []
    for n in nvccs:
        if n.error:
            out.append(Finding(WARN, "nvcc", f"{n.path}: {n.error}"))
            continue
        note = "" if n.lists_supported else " (no --list-gpu-arch: planning from lgpatch's tables)"
        if n.version and not ck.is_tabulated(n.version):
            note += f"; CUDA {n.version} is outside lgpatch's tables ({ck.OLDEST_TOOLKIT}–{ck.NEWEST_TOOLKIT})"
        out.append(Finding(OK, "nvcc", f"nvcc {n.full_version or n.version} at {n.path}{note}"))
    return out


def gpu_findings(scan: GpuScan, nvccs: Sequence[NvccInfo]) -> list[Finding]:
    if not scan.gpus:
        return [Finding(WARN, "gpu", f"no GPU visible ({scan.error or 'none found'}): checking the toolchain only; "
                                     "nothing about running can be verified here")]
    out = []
    for g in scan.gpus:
        info = ck.arch_info(g.number) if g.number else None
        fam = f", {info.family}" if info else ""
        how = "" if g.cc_source == "reported" else f" ({g.cc_source})"
        out.append(Finding(OK, "gpu", f"GPU {g.index}: {g.name}, compute capability {g.cc or '?'}{how}{fam}; "
                                      f"driver {scan.driver or '?'} (CUDA {scan.driver_cuda or '?'}) via "
                                      f"{scan.source}"))
        if g.number and not nvccs:
            rng = planner.native_range(g.number)
            if rng:
                out.append(Finding(INFO, "plan", f"sm_{g.number} gets native cubins from CUDA {rng[0]} to {rng[1]}"))
    return out


def recipe_fit(recipe: Any, nvccs: Sequence[NvccInfo], gpus: Sequence[Gpu], driver: str | None = None,
               driver_cuda: str | None = None) -> dict[str, Any]:
    """Which of this machine's toolkits and GPUs a recipe's `cuda` / `arch` parameters accept (and the driver
    runs)."""
    from legacy_gpu_patch.config.recipe import param_problem

    reasons: list[str] = []
    cuda_p = recipe.params.get("cuda")
    arch_p = recipe.params.get("arch")
    versions = [n.version for n in nvccs if n.version]
    if cuda_p is None:
        usable = versions
    else:
        usable = [v for v in versions if param_problem(cuda_p, v) is None]
        want = cuda_p.allowed or (", ".join(map(str, cuda_p.choices)) if cuda_p.choices else cuda_p.default)
        if not usable:
            reasons.append(f"needs CUDA {want}; found {', '.join(versions) or 'no nvcc'}")
    runnable: list[str] = []
    for g in gpus:
        if not g.number:
            continue
        sm = f"sm_{g.number}"
        if arch_p is not None and param_problem(arch_p, sm) is not None:
            reasons.append(f"arch {sm} (GPU {g.index}) is not among its arch values "
                           f"({arch_p.allowed or ', '.join(map(str, arch_p.choices or [arch_p.default]))})")
            continue
        plans = {v: planner.plan(v, g.number, driver=driver, driver_cuda=driver_cuda,
                                 nvcc=next((n for n in nvccs if n.version == v), None)) for v in usable}
        ok = [v for v, p in plans.items() if p.runnable]
        if ok:
            runnable.append(f"GPU {g.index} {sm} with CUDA {', '.join(ok)}")
        for v, p in plans.items():
            if not p.buildable:
                reasons.append(f"CUDA {v} emits no code for {sm}")
            elif not p.runnable and p.driver is not None:
                reasons.append(f"CUDA {v} on GPU {g.index}: {p.driver.message.split('. ')[0]}")
    if gpus and not runnable and not reasons:
        reasons.append("no GPU it can run on")
    fits = bool(usable) and (not gpus or bool(runnable))
    return {"name": recipe.name, "fits": fits, "runs_on": runnable, "cuda_versions": usable, "reasons": reasons}


def check_recipe(recipe: Any, params: Mapping[str, Any], report: Report, env: Mapping[str, str]) -> dict[str, Any]:
    """Can this machine build and run `recipe` with `params` (resolved values)? Errors → ExitCode.DOCTOR."""
    problems: list[str] = []
    warnings: list[str] = []
    cuda = params.get("cuda")
    arch = params.get("arch")
    nvcc = None
    if cuda is not None:
        mm = ck.major_minor(str(cuda))
        nvcc = next((n for n in report.nvccs if n.version and ck.major_minor(n.version) == mm), None)
        if nvcc is None:
            found = ", ".join(n.version or "?" for n in report.nvccs) or "none"
            problems.append(f"recipe {recipe.name} wants CUDA {mm}; no nvcc {mm} on this machine (found: {found})")
        else:
            host = default_host_compiler(report.compilers, env)
            for f in compiler_findings(nvcc, report.host_limits.get(nvcc.path, {}), host, report.compilers):
                if f.severity == ERROR:
                    problems.append(f"{f.message}; fix: {f.fix}")
    toolkit = ck.major_minor(str(cuda)) if cuda is not None else (report.nvccs[0].version if report.nvccs else None)
    if arch is not None and toolkit is not None:
        sass_set, ptx_set, _src, _notes = planner.target_sets(toolkit, nvcc)
        try:
            flags = flags_for([str(arch)])
            unknown = [t for t in flags.sass_archs if t not in sass_set] + [t for t in flags.ptx_archs
                                                                             if t not in ptx_set]
            if unknown:
                problems.append(f"CUDA {toolkit} does not know {', '.join(unknown)} (arch={arch})")
        except ValueError as exc:
            problems.append(str(exc))
    if not report.gpus.gpus:
        warnings.append("no GPU here: the build can be checked, running it cannot")
    for g in report.gpus.gpus:
        if not g.number or toolkit is None:
            continue
        p = planner.plan(toolkit, g.number, driver=report.gpus.driver, driver_cuda=report.gpus.driver_cuda,
                         nvcc=nvcc)
        if not p.buildable:
            problems.append(f"GPU {g.index} {g.name}: {p.reasons[0]}")
            continue
        if p.driver is not None and p.driver.status == planner.DRIVER_REFUSE:
            problems.append(f"GPU {g.index} {g.name}: {p.driver.message}")
        if arch is not None:
            a = parse_arch(str(arch))
            by_sass = a.sass and ck.sass_runs_on(a.number, g.number, a.suffix)
            by_ptx = a.ptx and ck.ptx_runs_on(a.number, g.number, a.suffix)
            if not (by_sass or by_ptx):
                problems.append(f"arch={arch} builds code that does not run on GPU {g.index} {g.name} "
                                f"(sm_{g.number}); with CUDA {toolkit} pass --param arch={p.targets[0]}")
            elif not by_sass:
                warnings.append(f"arch={arch} runs on GPU {g.index} only through PTX JIT; set up the JIT cache "
                                "(lgpatch jit-cache env)")
    return {"recipe": recipe.name, "params": {k: str(v) for k, v in params.items()}, "ok": not problems,
            "problems": problems, "warnings": warnings}


def diagnose(env: Mapping[str, str] | None = None, nvml: Any = None, recipe: Any = None,
             recipe_params: Mapping[str, Any] | None = None, search: Any = None, with_recipes: bool = True
             ) -> Report:
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
        report = Report(
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
                p = planner.plan(n.version, g.number, driver=report.gpus.driver, driver_cuda=report.gpus.driver_cuda,
                                 nvcc=n)
            except ck.UnknownToolkit as exc:
                report.findings.append(Finding(WARN, "plan", str(exc)))
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
    if report.numpy is None:
        report.findings.append(Finding(INFO, "python", f"python {platform.python_version()}; numpy not installed"))
    else:
        report.findings.append(Finding(OK, "python", f"python {platform.python_version()}, numpy {report.numpy}"))
    if with_recipes:
        _recipes(report, search)
    if recipe is not None:
        report.recipe_check = check_recipe(recipe, recipe_params or {}, report, env)
    report.elapsed_s = time.perf_counter() - t0
    return report


def _recipes(report: Report, search: Any) -> None:
    try:
        from legacy_gpu_patch.config.recipe import SearchPath, load_recipe
        from legacy_gpu_patch.errors import LgpatchError
    except ImportError as exc:  # PyYAML etc. absent (the stdlib-only entry point)
        report.recipes_note = f"recipes skipped: {exc}"
        return
    search = search or SearchPath.from_options()
    try:
        files = search.recipe_files()
    except OSError as exc:
        report.recipes_note = f"recipes skipped: {exc}"
        return
    for f in files:
        try:
            r = load_recipe(f, search)
        except LgpatchError as exc:
            report.recipes.append({"name": f.stem, "fits": False, "runs_on": [], "cuda_versions": [],
                                   "reasons": [f"invalid recipe: {exc.message}"]})
            continue
        report.recipes.append(recipe_fit(r, report.nvccs, report.gpus.gpus, report.gpus.driver,
                                         report.gpus.driver_cuda))


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
