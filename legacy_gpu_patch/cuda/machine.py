"""Machine facts for `lgpatch doctor`: the GPUs and the driver, through NVML or nvidia-smi (each with a timeout; a
missing tool is an error text in the scan, never a crash).

NVML through nvidia-ml-py (`import pynvml`) when installed, else `nvidia-smi --query-gpu=... --format=csv`
(drivers older than ~510 know no `compute_cap` field: then the capability comes from the GPU's name, and says so).
Stdlib-only, like the rest of the doctor engine.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from legacy_gpu_patch.cuda import knowledge as ck

PROBE_TIMEOUT_S = 5.0
NVIDIA_SMI_QUERY = "index,name,compute_cap,driver_version,memory.total,uuid"
NVIDIA_SMI_QUERY_OLD = "index,name,driver_version,memory.total,uuid"  # drivers without the compute_cap field


def run_tool(argv: Sequence[str], timeout: float = PROBE_TIMEOUT_S, env: Mapping[str, str] | None = None
             ) -> tuple[int, str]:
    """(exit status, stdout + stderr) of a probe; -1 and the reason when it cannot run or runs too long."""
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                           env=None if env is None else dict(env))
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s"
    except OSError as exc:
        return -1, f"cannot run: {exc.strerror or exc}"
    return p.returncode, (p.stdout or "") + (p.stderr or "")


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
            cc: str | None
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
        cc: str | None
        if with_cc:
            idx, name, reported, drv, mem, uuid = cells[:6]
            cc, how = reported, "reported"
            if not re.fullmatch(r"\d+\.\d+", reported):
                cc, how = cc_from_name(name), "from name"
        else:
            idx, name, drv, mem, uuid = cells[:5]
            cc = cc_from_name(name)
            how = "from name" if cc else "unknown"
        driver = driver or drv
        gpus.append(Gpu(int(idx), name, cc, int(mem) if mem.isdigit() else None, uuid or None, how))
    return gpus, driver


def scan_nvidia_smi(env: Mapping[str, str] | None = None, timeout: float = PROBE_TIMEOUT_S) -> GpuScan:
    env = os.environ if env is None else env
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if not smi:
        return GpuScan("none", error="no NVIDIA driver tools: nvidia-smi not found and NVML (nvidia-ml-py) absent")
    rc, out = run_tool([smi, f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"], timeout, env)
    with_cc = True
    if rc != 0 and "compute_cap" in out:  # driver < ~510: ask again without the field
        with_cc = False
        rc, out = run_tool([smi, f"--query-gpu={NVIDIA_SMI_QUERY_OLD}", "--format=csv,noheader,nounits"], timeout, env)
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
