"""Notable removals and breaking changes per CUDA toolkit: the error a legacy tree shows, and the fix (stdlib only)."""

from __future__ import annotations

from dataclasses import dataclass

from legacy_gpu_patch.cuda.facts import RELNOTES, RELNOTES_13_REMOVALS, major_minor, vtuple


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
           "build those GPUs with CUDA <= 12.9; CUDA 13 targets start at sm_75", RELNOTES_13_REMOVALS),
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
