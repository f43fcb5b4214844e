"""GPU architectures: every compute capability from Fermi to Rubin (ARCHES: family, Tegra or not, examples) and the
toolkit range whose nvcc accepts each target (TARGETS), with the two compatibility rules that use them:

- SASS (a cubin) for X.Y runs on a GPU of capability X.Z with Z >= Y — same major, equal or higher minor — except
  arch-specific `sm_XYa` cubins, which run on X.Y only.
- PTX for compute_XY runs on any GPU of capability >= X.Y: the driver JIT-compiles it at load time.

Sources: CUDA C++ Programming Guide §"Binary Compatibility" / §"PTX Compatibility" (facts.BINARY_COMPAT), the nvcc
manual per release (facts.NVCC_ARCHS). Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass

from legacy_gpu_patch.config.gpuarch import CapabilityNumber
from legacy_gpu_patch.cuda.facts import LOCAL_NVCC_13, NVCC_ARCHS, RELNOTES_13_REMOVALS, vtuple

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
# Last driver branches per generation (not used by a rule yet; kept as the sources for when one is):
# R390 the last for Fermi (nvidia.custhelp.com answer 4656), R470 for Kepler (answer 5202), R580 for Maxwell,
# Pascal and Volta (CUDA 12.9 release notes; R590+ drivers print 'supported through the NVIDIA 580.xx Legacy
# drivers', NixOS/nixos-hardware#1880).

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


TARGETS: tuple[TargetRange, ...] = (
    TargetRange("20", None, "9.0", source=NVCC_ARCHS + "; CUDA 9.0 release notes: Fermi removed"),
    TargetRange("21", None, "9.0", virtual=False),
    TargetRange("30", None, "11.0", source=NVCC_ARCHS + "; CUDA 11.0 release notes: sm_30/sm_32 removed"),
    TargetRange("32", None, "11.0"),
    TargetRange("35", None, "12.0", source=NVCC_ARCHS + "; CUDA 12.0 release notes: Kepler sm_35/37 removed"),
    TargetRange("37", None, "12.0"),
    TargetRange("50", None, "13.0", source=NVCC_ARCHS + "; " + RELNOTES_13_REMOVALS),
    TargetRange("52", None, "13.0", source=RELNOTES_13_REMOVALS),
    TargetRange("53", None, "13.0", source=RELNOTES_13_REMOVALS),
    TargetRange("60", "8.0", "13.0", source=RELNOTES_13_REMOVALS),
    TargetRange("61", "8.0", "13.0", source=RELNOTES_13_REMOVALS),
    TargetRange("62", "8.0", "13.0", source=RELNOTES_13_REMOVALS),
    TargetRange("70", "9.0", "13.0", source=RELNOTES_13_REMOVALS),
    TargetRange("72", "9.1", "13.0", source=RELNOTES_13_REMOVALS),
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
