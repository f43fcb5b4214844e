"""The one place where GPU architecture flags are derived (the spelling is parsed by config/gpuarch.py).

Users (recipes, the command line, the planner) name targets the way nvcc does:

    sm_86        SASS (a cubin) for compute capability 8.6 only
    sm_86+ptx    SASS for 8.6 *and* PTX for virtual arch compute_86, so newer GPUs can JIT it
    compute_75   PTX only (the driver JIT-compiles it on any GPU of capability >= 7.5)
    sm_90a       arch-specific target (features only 9.0 has; its SASS/PTX run on 9.0 only)
    8.6, 8.6+PTX the TORCH_CUDA_ARCH_LIST spelling is accepted too (and "86" / "86-real" / "86-virtual", CMake's)

and every build system wants a different spelling. `flags_for` turns a list of targets into all three:

    TORCH_CUDA_ARCH_LIST      "8.6;9.0+PTX"   X.Y = SASS only, X.Y+PTX = SASS + PTX. PyTorch has no PTX-only
                              spelling, so `compute_75` becomes "7.5+PTX" (an extra sm_75 cubin; harmless).
    CMAKE_CUDA_ARCHITECTURES  CMake's documented meaning (CMake >= 3.18, `CUDA_ARCHITECTURES` property):
                              "86" = SASS *and* PTX, "86-real" = SASS only, "86-virtual" = PTX only.
                              So sm_86 → "86-real", sm_86+ptx → "86", compute_75 → "75-virtual". We do not
                              write plain "86" for sm_86: that would silently embed PTX the user did not ask for
                              (bigger binaries, and a JIT path that hides a missing cubin on the next GPU).
    nvcc -gencode             sm_86 → -gencode=arch=compute_86,code=sm_86; +ptx adds
                              -gencode=arch=compute_86,code=compute_86; compute_75 → code=compute_75 only.

Sources: nvcc manual §"GPU Compilation" / §"--generate-code" (docs.nvidia.com/cuda/cuda-compiler-driver-nvcc);
CMake manual, property CUDA_ARCHITECTURES (cmake.org/cmake/help/latest/prop_tgt/CUDA_ARCHITECTURES.html);
PyTorch torch/utils/cpp_extension.py `_get_cuda_arch_flags` (TORCH_CUDA_ARCH_LIST syntax).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from legacy_gpu_patch.config.gpuarch import (
    Arch,
    ArchSyntaxError,
    CapabilityNumber,
    merge_archs,
    parse_arch,
    split_arch_list,
)

# Re-exported: the spelling itself is config/gpuarch.py (recipe conditions read it too); this module derives flags.
__all__ = ["Arch", "ArchFlags", "ArchSyntaxError", "CapabilityNumber", "flags_for", "merge_archs", "parse_arch",
           "split_arch_list", "wheel_label"]


@dataclass(frozen=True)
class ArchFlags:
    """The same targets in every build system's spelling."""

    archs: tuple[Arch, ...]
    torch_cuda_arch_list: str  # "8.6;9.0+PTX"
    cmake_cuda_architectures: str  # "86-real;90"
    nvcc_gencode: tuple[str, ...]  # ("-gencode=arch=compute_86,code=sm_86", ...)
    wheel_label: str  # "sm90", "sm80.sm86.sm89.sm90ptx": the arch part of a wheel's local version label

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.archs)

    @property
    def sass_archs(self) -> tuple[str, ...]:
        return tuple(a.sm for a in self.archs if a.sass)

    @property
    def ptx_archs(self) -> tuple[str, ...]:
        return tuple(a.compute for a in self.archs if a.ptx)


def _label_item(a: Arch) -> str:
    return (a.sm + ("ptx" if a.ptx else "") if a.sass else a.compute).replace("_", "")


def wheel_label(archs: Sequence[Arch]) -> str:
    """The targets as a PEP 440 local version segment: sm_90 → "sm90" (what single-arch wheels always said),
    sm_90+ptx → "sm90ptx", compute_75 → "compute75", a list → its items joined by "." in capability order:
    sm_80,sm_86,sm_89,sm_90+ptx → "sm80.sm86.sm89.sm90ptx".

    Every target is named, not a range ("sm80-90"): the list need not be contiguous (no sm_87 here), and pip
    normalises "-" and "_" in a local label to ".", so "sm80-90ptx" would become "sm80.90ptx" in the wheel's name.
    Only [a-z0-9.] is used: the label survives that normalisation unchanged.
    """
    return ".".join(_label_item(a) for a in archs)


def _torch_item(a: Arch) -> str:
    # PyTorch has no PTX-only spelling: a PTX-only target gets "+PTX" (plus a cubin nobody asked for, harmless).
    return f"{a.cc}{a.suffix}" + ("+PTX" if a.ptx else "")


def _cmake_item(a: Arch) -> str:
    base = f"{a.number}{a.suffix}"
    if a.sass and a.ptx:
        return base  # CMake: no suffix = real + virtual
    return base + ("-real" if a.sass else "-virtual")


def _gencode(a: Arch) -> list[str]:
    out = []
    if a.sass:
        out.append(f"-gencode=arch={a.compute},code={a.sm}")
    if a.ptx:
        out.append(f"-gencode=arch={a.compute},code={a.compute}")
    return out


def flags_for(archs: Sequence[str | Arch] | str) -> ArchFlags:
    """Derive TORCH_CUDA_ARCH_LIST, CMAKE_CUDA_ARCHITECTURES and nvcc -gencode flags for targets.

    `archs` is a sequence of targets, or one string holding a list ("sm_86,sm_90+ptx" or "8.6;9.0+PTX"); a string
    item of the sequence may hold a list too (an `arch` parameter's value is one: "sm_80,sm_86,sm_90+ptx").
    """
    given = [archs] if isinstance(archs, str) else list(archs)
    items = [t for a in given for t in (split_arch_list(a) if isinstance(a, str) else [a])]
    if not items:
        raise ArchSyntaxError("no GPU architecture given", hint="name at least one target, e.g. sm_86")
    merged = merge_archs(items)
    return ArchFlags(
        archs=merged,
        torch_cuda_arch_list=";".join(_torch_item(a) for a in merged),
        cmake_cuda_architectures=";".join(_cmake_item(a) for a in merged),
        nvcc_gencode=tuple(g for a in merged for g in _gencode(a)),
        wheel_label=wheel_label(merged),
    )
