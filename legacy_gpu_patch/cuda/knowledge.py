"""What we know about CUDA toolkits and GPU architectures: data with a source for every entry.

Three tables and the rules that use them:

- ARCHES: every compute capability from Fermi to Rubin — family, Tegra (integrated Jetson/DRIVE part) or not,
  and the toolkit range whose nvcc accepts it as a target (`sm_XX` real / `compute_XX` virtual).
- TOOLKITS: every toolkit 8.0 … 13.5 — the Linux x86_64 driver it ships with, the newest host GCC / Clang its
  `crt/host_config.h` accepts, and (derived from ARCHES) the targets its nvcc accepts.
- CHANGES: notable removals and breaking changes per toolkit, with the error a legacy tree shows and the fix.

Rules (CUDA C++ Programming Guide §"Binary Compatibility" / §"PTX Compatibility"; the Turing, Ampere and
Hopper compatibility guides restate them per generation):
- SASS (a cubin) for X.Y runs on a GPU of capability X.Z with Z >= Y — same major, equal or higher minor — except
  arch-specific `sm_XYa` cubins, which run on X.Y only.
- PTX for compute_XY runs on any GPU of capability >= X.Y: the driver JIT-compiles it at load time (and caches
  the result, see jit_cache.py).

The tables answer when no nvcc is at hand (planning for another machine, a toolkit that is not installed). Where
a real nvcc is found, planner.py prefers what `nvcc --list-gpu-arch` / `--list-gpu-code` say.

Facts that are less certain than the rest carry `certain=False` and say why in `note`; doctor prints them as
such. Everything here is plain data and the stdlib: the GPU proof script and `python -m legacy_gpu_patch.cuda.doctor`
import it on machines without lgpatch's dependencies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from legacy_gpu_patch.cuda.archflags import CapabilityNumber

# --------------------------------------------------------------------------------------------- sources

RELNOTES = "https://docs.nvidia.com/cuda/archive/{v}/cuda-toolkit-release-notes/index.html"
DRIVER_TABLE = (
    "CUDA Toolkit Release Notes, table 'CUDA Toolkit and Corresponding Driver Versions' "
    "(https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html); mirrored in mesonbuild/meson "
    "mesonbuild/modules/cuda.py _DRIVER_TABLE_VERSION"
)
MINOR_COMPAT = (
    "CUDA Compatibility guide, 'Minor Version Compatibility' table "
    "(https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html)"
)
HOST_CONFIG = (
    "crt/host_config.h of each toolkit ('#error -- unsupported GNU version! gcc versions later than N'), "
    "collected in spack/spack#25054 and spack-packages build_systems/cuda.py conflicts; CUDA installation guide "
    "§Host Compiler Support Policy"
)
NVCC_ARCHS = (
    "nvcc manual §'GPU Feature List' per release; clang/lib/Basic/Cuda.cpp MinVersionForCudaArch/"
    "MaxVersionForCudaArch (llvm/llvm-project); spack-packages build_systems/cuda.py depends_on ranges"
)
BINARY_COMPAT = (
    "CUDA C++ Programming Guide §'Binary Compatibility' and §'PTX Compatibility'; Ampere GPU Architecture "
    "Compatibility Guide §1.3 ('a cubin generated for compute capability 8.0 is supported to run on a GPU with "
    "compute capability 8.6')"
)
LOCAL_NVCC_13 = "nvcc 13.0.88 `--list-gpu-arch` on the project's build machine (tests/integration/test_nvcc_real.py)"


def vtuple(text: str | int | float) -> tuple[int, ...]:
    """'11.4.1' → (11, 4, 1); '580' → (580,); the leading numeric part only ('12.8.61-1' → (12, 8, 61))."""
    m = re.match(r"\s*(\d+(?:\.\d+)*)", str(text))
    if not m:
        raise ValueError(f"{text!r} is not a version number")
    return tuple(int(p) for p in m.group(1).split("."))


def major_minor(text: str) -> str:
    """'11.4.1' → '11.4'; '12' → '12.0'."""
    parts = vtuple(text)
    return f"{parts[0]}.{parts[1] if len(parts) > 1 else 0}"


def version_at_most(actual: str, maximum: str) -> bool:
    """True when `actual` is within `maximum`, compared on as many parts as `maximum` has ('3.9.1' ≤ '3.9')."""
    a, m = vtuple(actual), vtuple(maximum)
    return a[: len(m)] <= m


def version_at_least(actual: str, minimum: str) -> bool:
    a, m = vtuple(actual), vtuple(minimum)
    width = max(len(a), len(m))
    return a + (0,) * (width - len(a)) >= m + (0,) * (width - len(m))


# --------------------------------------------------------------------------------------------- architectures


@dataclass(frozen=True)
class GpuArch(CapabilityNumber):
    """A compute capability: 86 means 8.6."""

    number: int
    family: str
    tegra: bool  # an integrated Jetson/DRIVE part: never a PTX fallback target for a discrete GPU
    examples: str
    source: str
    documented: bool = True  # False: nvcc knows the target but NVIDIA publishes no product (8.8)
    last_driver_branch: int | None = None  # the newest driver branch that still drives this family

    @property
    def sm(self) -> str:
        return f"sm_{self.number}"

    @property
    def compute(self) -> str:
        return f"compute_{self.number}"


_CUDA_GPUS = "https://developer.nvidia.com/cuda-gpus; nvcc manual §GPU Feature List"
_FERMI_390 = "NVIDIA: R390 is the last driver branch supporting Fermi (nvidia.custhelp.com answer 4656)"
_KEPLER_470 = "NVIDIA: R470 is the last driver branch supporting Kepler (nvidia.custhelp.com answer 5202)"
_MPV_580 = (
    "NVIDIA: the R580 branch is the last to support Maxwell, Pascal and Volta (CUDA 12.9 release notes; R590+ "
    "drivers print 'supported through the NVIDIA 580.xx Legacy drivers', NixOS/nixos-hardware#1880)"
)

ARCHES: tuple[GpuArch, ...] = (
    GpuArch(20, "Fermi", False, "GTX 480/580, Tesla C2050", _CUDA_GPUS, last_driver_branch=390),
    GpuArch(21, "Fermi", False, "GTX 460/560", _CUDA_GPUS, last_driver_branch=390),
    GpuArch(30, "Kepler", False, "GTX 680/770, Tesla K10", _CUDA_GPUS, last_driver_branch=470),
    GpuArch(32, "Kepler", True, "Jetson TK1", _CUDA_GPUS, last_driver_branch=470),
    GpuArch(35, "Kepler", False, "GTX Titan, Tesla K20/K40", _CUDA_GPUS, last_driver_branch=470),
    GpuArch(37, "Kepler", False, "Tesla K80", _CUDA_GPUS, last_driver_branch=470),
    GpuArch(50, "Maxwell", False, "GTX 750, Quadro K2200", _CUDA_GPUS, last_driver_branch=580),
    GpuArch(52, "Maxwell", False, "GTX 970/980, Titan X, Tesla M40", _CUDA_GPUS, last_driver_branch=580),
    GpuArch(53, "Maxwell", True, "Jetson TX1, Jetson Nano", _CUDA_GPUS, last_driver_branch=580),
    GpuArch(60, "Pascal", False, "Tesla P100", _CUDA_GPUS, last_driver_branch=580),
    GpuArch(61, "Pascal", False, "GTX 1080, Titan Xp, Quadro P6000, Tesla P4/P40", _CUDA_GPUS,
            last_driver_branch=580),
    GpuArch(62, "Pascal", True, "Jetson TX2", _CUDA_GPUS, last_driver_branch=580),
    GpuArch(70, "Volta", False, "Tesla V100, Titan V", _CUDA_GPUS, last_driver_branch=580),
    GpuArch(72, "Volta", True, "Jetson AGX Xavier, DRIVE AGX", _CUDA_GPUS, last_driver_branch=580),
    GpuArch(75, "Turing", False, "RTX 20xx, GTX 16xx, Quadro RTX 6000, Tesla T4", _CUDA_GPUS),
    GpuArch(80, "Ampere", False, "A100, A30", _CUDA_GPUS),
    GpuArch(86, "Ampere", False, "RTX 30xx, RTX A6000, A40, A10", _CUDA_GPUS),
    GpuArch(87, "Ampere", True, "Jetson AGX Orin", _CUDA_GPUS),
    GpuArch(88, "Ampere", False, "(no published product)",
            "llvm/llvm-project#170258 ('SM_88: Ampere architecture variant', new in CUDA 13.0); " + LOCAL_NVCC_13,
            documented=False),
    GpuArch(89, "Ada Lovelace", False, "RTX 40xx, RTX 6000 Ada, L4, L40", _CUDA_GPUS),
    GpuArch(90, "Hopper", False, "H100, H200, GH200", _CUDA_GPUS),
    GpuArch(100, "Blackwell", False, "B200, GB200", _CUDA_GPUS),
    GpuArch(101, "Blackwell", True, "Jetson Thor (CUDA 12.8–12.9 name; 11.0 from CUDA 13.0)",
            "spack-packages build_systems/cuda.py ('Compute Capability 101 was renamed to 110 in CUDA 13')"),
    GpuArch(103, "Blackwell", False, "B300, GB300", _CUDA_GPUS),
    GpuArch(107, "Rubin", False, "Vera Rubin", "pytorch/pytorch#190654 (CUDA 13.4 adds compute capability 10.7)"),
    GpuArch(110, "Blackwell", True, "Jetson Thor", "llvm/llvm-project#170258; " + LOCAL_NVCC_13),
    GpuArch(120, "Blackwell", False, "RTX 50xx, RTX PRO 6000 Blackwell", _CUDA_GPUS),
    GpuArch(121, "Blackwell", False, "GB10 (DGX Spark)", _CUDA_GPUS),
)
ARCH_BY_NUMBER: dict[int, GpuArch] = {a.number: a for a in ARCHES}
# Tegra parts the planner must never pick as a PTX/SASS fallback for a discrete GPU (the 5.3/6.2/7.2/8.7,
# plus 3.2 and Thor's 10.1/11.0); their cubins assume an integrated memory system.
TEGRA_ONLY: frozenset[int] = frozenset(a.number for a in ARCHES if a.tegra)


def arch_info(number: int) -> GpuArch | None:
    return ARCH_BY_NUMBER.get(number)


def family_of(number: int) -> str:
    info = ARCH_BY_NUMBER.get(number)
    if info:
        return info.family
    return {2: "Fermi", 3: "Kepler", 5: "Maxwell", 6: "Pascal", 8: "Ampere", 9: "Hopper", 10: "Blackwell",
            12: "Blackwell"}.get(number // 10, "unknown")


def sass_runs_on(sass: int, gpu: int, suffix: str = "") -> bool:
    """Does a cubin for sm_<sass><suffix> run on a GPU of capability <gpu>? (Binary compatibility rule.)"""
    if suffix == "a":
        return sass == gpu  # arch-specific code has no compatibility at all
    return sass // 10 == gpu // 10 and sass % 10 <= gpu % 10


def ptx_runs_on(ptx: int, gpu: int, suffix: str = "") -> bool:
    """Can the driver JIT PTX for compute_<ptx><suffix> on a GPU of capability <gpu>? (PTX compatibility rule.)"""
    if suffix == "a":
        return ptx == gpu
    if suffix == "f":
        return ptx // 10 == gpu // 10 and ptx % 10 <= gpu % 10  # family-specific PTX stays in its family
    return ptx <= gpu


# --------------------------------------------------------------------------------------------- nvcc targets

# Which toolkits' nvcc accept a target: [first, last_exclusive). None = before 8.0 / still accepted.
# sm_21 has no compute_21 (its virtual arch is compute_20), hence the separate `virtual` flag.


@dataclass(frozen=True)
class TargetRange:
    target: str  # "90", "90a", "100f"
    first: str | None
    until: str | None  # first toolkit that no longer accepts it
    virtual: bool = True  # compute_<target> exists too
    source: str = NVCC_ARCHS
    certain: bool = True
    note: str = ""

    def accepted_by(self, toolkit: str) -> bool:
        t = vtuple(toolkit)[:2]
        if self.first is not None and t < vtuple(self.first)[:2]:
            return False
        return not (self.until is not None and t >= vtuple(self.until)[:2])


_R13 = "CUDA 13.0 release notes: offline compilation and library support for Maxwell, Pascal and Volta removed"
TARGETS: tuple[TargetRange, ...] = (
    TargetRange("20", None, "9.0", source=NVCC_ARCHS + "; CUDA 9.0 release notes: Fermi removed"),
    TargetRange("21", None, "9.0", virtual=False),
    TargetRange("30", None, "11.0", source=NVCC_ARCHS + "; CUDA 11.0 release notes: sm_30/sm_32 removed"),
    TargetRange("32", None, "11.0"),
    TargetRange("35", None, "12.0", source=NVCC_ARCHS + "; CUDA 12.0 release notes: Kepler sm_35/37 removed"),
    TargetRange("37", None, "12.0"),
    TargetRange("50", None, "13.0", source=NVCC_ARCHS + "; " + _R13),
    TargetRange("52", None, "13.0", source=_R13),
    TargetRange("53", None, "13.0", source=_R13),
    TargetRange("60", "8.0", "13.0", source=_R13),
    TargetRange("61", "8.0", "13.0", source=_R13),
    TargetRange("62", "8.0", "13.0", source=_R13),
    TargetRange("70", "9.0", "13.0", source=_R13),
    TargetRange("72", "9.1", "13.0", source=_R13),
    TargetRange("75", "10.0", None),
    TargetRange("80", "11.0", None),
    TargetRange("86", "11.1", None, source=NVCC_ARCHS + "; cupy/cupy#5434 (nvcc accepts sm_86 from 11.1)"),
    TargetRange("87", "11.4", None, source=NVCC_ARCHS + "; PTX ISA 7.4 (CUDA 11.4) adds sm_87"),
    TargetRange("88", "13.0", None, source="llvm/llvm-project#170258; " + LOCAL_NVCC_13),
    TargetRange("89", "11.8", None),
    TargetRange("90", "11.8", None),
    TargetRange("90a", "12.0", None),
    TargetRange("100", "12.8", None),
    TargetRange("100a", "12.8", None),
    TargetRange("100f", "12.9", None, source=NVCC_ARCHS + "; CUDA 12.9 adds family-specific 'f' targets"),
    TargetRange("101", "12.8", "13.0", source="spack-packages cuda.py; llvm/llvm-project#170258 (101 → 110)"),
    TargetRange("101a", "12.8", "13.0"),
    TargetRange("101f", "12.9", "13.0"),
    TargetRange("103", "12.9", None, source=NVCC_ARCHS + "; eyalroz/cuda-api-wrappers#732 (new in 12.9)"),
    TargetRange("103a", "12.9", None),
    TargetRange("103f", "12.9", None),
    TargetRange("107", "13.4", None, source="pytorch/pytorch#190654; NVIDIA-BioNeMo/nvMolKit#301", certain=False,
                note="CUDA 13.4 release notes announce Rubin (10.7); flashinfer-ai/flashinfer#4217 reports ptxas "
                     "accepting sm_107a from 13.3"),
    TargetRange("107a", "13.4", None, certain=False),
    TargetRange("107f", "13.4", None, certain=False),
    TargetRange("110", "13.0", None, source="llvm/llvm-project#170258; " + LOCAL_NVCC_13),
    TargetRange("110a", "13.0", None),
    TargetRange("110f", "13.0", None),
    TargetRange("120", "12.8", None),
    TargetRange("120a", "12.8", None),
    TargetRange("120f", "12.9", None),
    TargetRange("121", "12.9", None),
    TargetRange("121a", "12.9", None),
    TargetRange("121f", "12.9", None),
)


# --------------------------------------------------------------------------------------------- toolkits


@dataclass(frozen=True)
class Toolkit:
    version: str  # "11.1"
    driver: str | None  # Linux x86_64 driver shipped with the GA release ("Toolkit Driver Version")
    gcc_max: int | None  # newest GCC major its host_config.h accepts
    clang_max: str | None  # newest Clang it accepts ("3.9", "10")
    sources: tuple[str, ...]
    note: str = ""
    certain: bool = True
    sass: frozenset[str] = field(default=frozenset())  # sm_XX it accepts (filled from TARGETS)
    ptx: frozenset[str] = field(default=frozenset())  # compute_XX it accepts

    @property
    def key(self) -> tuple[int, ...]:
        return vtuple(self.version)

    @property
    def major(self) -> int:
        return self.key[0]

    @property
    def allows_unsupported_compiler(self) -> bool:
        """nvcc's -allow-unsupported-compiler exists from 11.0 (its host_config.h message names it from then on)."""
        return self.key >= (11, 0)

    @property
    def min_driver(self) -> str | None:
        """The oldest driver that runs this toolkit's SASS: minor-version compatibility from 11.0, exact before."""
        return MINOR_COMPAT_MIN_DRIVER.get(self.major, self.driver)


# Minimum driver per major family under minor-version compatibility (SASS only; PTX from a newer toolkit than the
# driver cannot be JIT-compiled: CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
MINOR_COMPAT_MIN_DRIVER: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580"}

# (version, toolkit driver, gcc max, clang max, extra note, certain)
_TK_ROWS: tuple[tuple[str, str | None, int | None, str | None, str, bool], ...] = (
    ("8.0", "375.26", 5, "3.9", "8.0 GA1 (8.0.44) shipped driver 367.48; GA2 (8.0.61) 375.26", True),
    ("9.0", "384.81", 6, "3.9", "", True),
    ("9.1", "390.46", 6, "4.0", "", True),
    ("9.2", "396.26", 7, "5.0", "9.2.148 (update 1) needs 396.37", True),
    ("10.0", "410.48", 7, "6.0", "", True),
    ("10.1", "418.39", 8, "8", "10.1.105 accepted Clang <= 7; 10.1.243 (update 2) Clang 8", True),
    ("10.2", "440.33", 8, "8", "", True),
    ("11.0", "450.51.05", 9, "9", "11.0.1 RC shipped 450.36.06", True),
    ("11.1", "455.23", 10, "10", "", True),
    ("11.2", "460.27.03", 10, "11", "", True),
    ("11.3", "465.19.01", 10, "11", "", True),
    ("11.4", "470.42.01", 11, "12", "GCC 11 and Clang 12 from 11.4.1 (11.4.0 images disagree: spack/spack#29076)",
     True),
    ("11.5", "495.29.05", 11, "12", "", True),
    ("11.6", "510.39.01", 11, "13", "", True),
    ("11.7", "515.43.04", 11, "13", "", True),
    ("11.8", "520.61.05", 11, "14", "", True),
    ("12.0", "525.60.13", 12, "14", "", True),
    ("12.1", "530.30.02", 12, "15", "", True),
    ("12.2", "535.54.03", 12, "16", "Clang 16 from 12.2.2", True),
    ("12.3", "545.23.06", 12, "16", "", True),
    ("12.4", "550.54.14", 13, "17", "", True),
    ("12.5", "555.42.02", 13, "17", "", True),
    ("12.6", "560.28.03", 13, "18", "", True),
    ("12.8", "570.26", 14, "19", "there is no 12.7", True),
    ("12.9", "575.51.03", 14, "19", "", True),
    ("13.0", "580.65.06", 15, "20", "", True),
    ("13.1", "590.44.01", 15, "21", "", True),
    ("13.2", "595.45.04", 15, "21", "", True),
    ("13.3", "610.43.02", None, None, "host compiler limits not yet tabulated: doctor reads host_config.h", False),
    ("13.4", None, None, None, "driver and host compiler limits not yet tabulated (driver >= 580 by minor-version "
                               "compatibility); doctor reads host_config.h", False),
    ("13.5", None, None, None, "driver and host compiler limits not yet tabulated (driver >= 580 by minor-version "
                               "compatibility); doctor reads host_config.h", False),
)


def _build_toolkits() -> tuple[Toolkit, ...]:
    out = []
    for version, driver, gcc, clang, note, certain in _TK_ROWS:
        sass = frozenset(f"sm_{t.target}" for t in TARGETS if t.accepted_by(version))
        ptx = frozenset(f"compute_{t.target}" for t in TARGETS if t.virtual and t.accepted_by(version))
        sources = (RELNOTES.format(v=version), DRIVER_TABLE, HOST_CONFIG, NVCC_ARCHS)
        out.append(Toolkit(version, driver, gcc, clang, sources, note, certain, sass, ptx))
    return tuple(out)


TOOLKITS: tuple[Toolkit, ...] = _build_toolkits()
TOOLKIT_BY_VERSION: dict[str, Toolkit] = {t.version: t for t in TOOLKITS}
OLDEST_TOOLKIT = TOOLKITS[0].version
NEWEST_TOOLKIT = TOOLKITS[-1].version


class UnknownToolkit(ValueError):
    pass


def toolkit(version: str) -> Toolkit:
    """The table row for a toolkit ('11.4.1' → 11.4). Versions newer than the table use the newest row (noted by
    the caller); older than 8.0 is unknown."""
    mm = major_minor(version)
    row = TOOLKIT_BY_VERSION.get(mm)
    if row is not None:
        return row
    key = vtuple(mm)
    if key < vtuple(OLDEST_TOOLKIT):
        raise UnknownToolkit(f"CUDA {version} is older than lgpatch's tables ({OLDEST_TOOLKIT} … {NEWEST_TOOLKIT})")
    older = [t for t in TOOLKITS if t.key <= key]
    return older[-1]


def is_tabulated(version: str) -> bool:
    return major_minor(version) in TOOLKIT_BY_VERSION


def driver_cuda_version(driver: str) -> str | None:
    """The newest CUDA version a driver fully supports: the newest toolkit whose shipped driver it reaches."""
    best = None
    for tk in TOOLKITS:
        if tk.driver and version_at_least(driver, tk.driver):
            best = tk.version
    return best


def newest_toolkit_with(target: str) -> Toolkit | None:
    """The newest toolkit whose nvcc still accepts `target` (sm_XX or compute_XX)."""
    found = [t for t in TOOLKITS if target in t.sass or target in t.ptx]
    return found[-1] if found else None


def oldest_toolkit_with(target: str) -> Toolkit | None:
    found = [t for t in TOOLKITS if target in t.sass or target in t.ptx]
    return found[0] if found else None


# --------------------------------------------------------------------------------------------- changes


@dataclass(frozen=True)
class Change:
    """A removal or breaking change a legacy tree meets when it moves to toolkit `version` or later."""

    version: str
    what: str
    symptom: str  # what the build log says
    fix: str
    source: str
    patchset: str | None = None  # the lgpatch patchset that addresses it, when one exists


CHANGES: tuple[Change, ...] = (
    Change("9.0", "Fermi targets sm_20/sm_21 removed",
           "nvcc fatal : Unsupported gpu architecture 'compute_20'", "target sm_30 or newer",
           RELNOTES.format(v="9.0")),
    Change("9.0", "warp intrinsics without _sync (__shfl, __shfl_down, __any, __all, __ballot) deprecated; "
           "unavailable when compiling for compute_70 and newer",
           "error: identifier \"__shfl_down\" is undefined", "use __shfl_down_sync(0xffffffff, ...) etc.",
           "CUDA C++ Programming Guide §Warp Shuffle Functions (deprecated in 9.0, absent for cc >= 7.0)"),
    Change("11.0", "Kepler targets sm_30/sm_32 removed",
           "nvcc fatal : Unsupported gpu architecture 'compute_30'", "target sm_35 or newer",
           RELNOTES.format(v="11.0.3")),
    Change("11.0", "cuSPARSE legacy API removed (cusparseScsrmm2, cusparseScsrmv, …)",
           "error: identifier \"cusparseScsrmm2\" is undefined", "port to the generic SpMM API (cusparseSpMM)",
           "pytorch/pytorch#40593; " + RELNOTES.format(v="11.0.3") + " §cuSPARSE", patchset="cusparse-spmm"),
    Change("11.0", "CUB ships inside the toolkit (include/cub); a vendored CUB copy now conflicts with it",
           "error: namespace \"cub\" has already been declared / CUB version mismatch",
           "drop the vendored CUB and use the toolkit's", RELNOTES.format(v="11.0.3") + " §CUDA Libraries (CUB)",
           patchset="cub-bundled"),
    Change("12.0", "Kepler targets sm_35/sm_37 removed",
           "nvcc fatal : Unsupported gpu architecture 'compute_35'", "target sm_50 or newer",
           RELNOTES.format(v="12.0.0")),
    Change("12.0", "texture and surface references removed (texture<…>, cudaBindTexture, tex1Dfetch on references)",
           "error: texture is not a template / identifier \"cudaBindTexture\" is undefined",
           "use texture objects (cudaTextureObject_t)", RELNOTES.format(v="12.0.0") + " §Deprecated or Dropped",
           patchset="cuda12-removals"),
    Change("12.0", "cudaProfilerInitialize removed", "error: identifier \"cudaProfilerInitialize\" is undefined",
           "drop the call (profilers attach without it)", RELNOTES.format(v="12.0.0") + " §Deprecated or Dropped",
           patchset="cuda12-removals"),
    Change("12.9", "NVTX v2 (nvToolsExt library and <nvToolsExt.h>) removed; NVTX v3 is header-only",
           "fatal error: nvToolsExt.h: No such file or directory / cannot find -lnvToolsExt",
           "#include <nvtx3/nvToolsExt.h> and link nothing (CMake target CUDA::nvtx3)",
           "CUDA 12.9 release notes §Deprecated or Dropped Features (quoted in llnl/Caliper#668, "
           "UO-OACISS/tau2#21); the brief's '13.0' is one release late"),
    Change("13.0", "offline compilation for Maxwell, Pascal and Volta removed (sm_50 … sm_72)",
           "nvcc fatal : Unsupported gpu architecture 'compute_61'",
           "build those GPUs with CUDA <= 12.9; CUDA 13 targets start at sm_75", _R13),
    Change("13.0", "sm_101 (Jetson Thor) renamed sm_110", "nvcc fatal : Unsupported gpu architecture 'compute_101'",
           "use sm_110", "llvm/llvm-project#170258; " + RELNOTES.format(v="13.0.1")),
    Change("13.0", "deprecated cudaDeviceProp fields removed (clockRate, memoryClockRate, computeMode, …)",
           "error: class \"cudaDeviceProp\" has no member \"clockRate\"",
           "cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, dev)",
           RELNOTES.format(v="13.0.0") + " §Deprecated or Dropped (facebookincubator/AITemplate#1045)"),
    Change("13.0", "cuCtxCreate takes CUctxCreateParams (cuCtxCreate_v4)", "too few arguments in function call",
           "pass NULL params or use the primary context", "eunomia-bpf/bpftime#647; CUDA 13.0 driver API reference"),
    Change("13.0", "CCCL (Thrust, CUB, libcu++) needs C++17 and moved under include/cccl",
           "error: Thrust requires at least C++17", "-std=c++17; add include/cccl to include paths",
           "inikep/lzbench#300; sgl-project/sglang#28125"),
)


def changes_between(old: str, new: str) -> list[Change]:
    """Changes a tree written for toolkit `old` meets on toolkit `new` (old < change.version <= new)."""
    lo, hi = vtuple(major_minor(old)), vtuple(major_minor(new))
    return [c for c in CHANGES if lo < vtuple(c.version) <= hi]


# --------------------------------------------------------------------------------------------- other tools

CMAKE_POLICY_FLOOR = {
    "min_cmake": "4.0",
    "rule": "CMake 4.0 removed compatibility with CMake < 3.5: cmake_minimum_required(VERSION x) with x < 3.5 is "
            "an error",
    "fix": "-DCMAKE_POLICY_VERSION_MINIMUM=3.5 (or the environment variable CMAKE_POLICY_VERSION_MINIMUM=3.5)",
    "source": "CMake 4.0 release notes §Deprecated and Removed Features "
              "(https://cmake.org/cmake/help/latest/release/4.0.html)",
    "patchset": "cmake4-min-version",
}

CUDNN_HEADER = {
    "rule": "cuDNN 8 moved CUDNN_MAJOR/MINOR/PATCHLEVEL from cudnn.h to cudnn_version.h",
    "source": "cuDNN 8.0 release notes; seeds.md §1 (PyTorch 1.5 cmake/public/cuda.cmake reads cudnn.h)",
    "patchset": "cudnn8-version-header",
}
