"""The one place where GPU architecture flag syntax is derived.

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

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from legacy_gpu_patch.errors import ConfigError


class ArchSyntaxError(ConfigError, ValueError):
    """Not a GPU architecture spelling we understand (a ValueError too, for callers that validate values)."""


# sm_86, sm_86+ptx, compute_75, sm_90a, sm_100f, sm_90a+ptx
_NVCC_RE = re.compile(r"^(sm|compute)_(\d{2,3})([af]?)(\+ptx)?$", re.I)
# 8.6, 8.6+PTX, 9.0a, 10.0a+PTX (TORCH_CUDA_ARCH_LIST)
_DOTTED_RE = re.compile(r"^(\d{1,2})\.(\d)([af]?)(\+ptx)?$", re.I)
# 86, 86-real, 86-virtual, 90a-real (CMAKE_CUDA_ARCHITECTURES)
_CMAKE_RE = re.compile(r"^(\d{2,3})([af]?)(-real|-virtual)?$", re.I)


class CapabilityNumber:
    """Major/minor/"X.Y" of a compute capability held as a number (86 → 8, 6, "8.6"); shared with cuda_knowledge."""

    number: int

    @property
    def major(self) -> int:
        return self.number // 10

    @property
    def minor(self) -> int:
        return self.number % 10

    @property
    def cc(self) -> str:
        """Compute capability as NVIDIA writes it: "8.6", "10.0"."""
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True, order=True)
class Arch(CapabilityNumber):
    """One target: compute capability `number` (86 for 8.6, 100 for 10.0), what to embed for it."""

    number: int
    suffix: str = ""  # "" | "a" (arch-specific) | "f" (family-specific, CUDA 12.9+)
    sass: bool = True  # embed a cubin for sm_<number>
    ptx: bool = False  # embed PTX for compute_<number>

    @property
    def sm(self) -> str:
        return f"sm_{self.number}{self.suffix}"

    @property
    def compute(self) -> str:
        return f"compute_{self.number}{self.suffix}"

    @property
    def name(self) -> str:
        """Canonical nvcc-style spelling: sm_86, sm_86+ptx, compute_75."""
        if not self.sass:
            return self.compute
        return self.sm + ("+ptx" if self.ptx else "")

    def __str__(self) -> str:
        return self.name


def parse_arch(text: str) -> Arch:
    """Parse one target in nvcc ("sm_86+ptx"), TORCH_CUDA_ARCH_LIST ("8.6+PTX") or CMake ("86-virtual") spelling."""
    raw = str(text).strip()
    m = _NVCC_RE.match(raw)
    if m:
        kind, num, suffix, plus_ptx = m.groups()
        if kind.lower() == "compute":
            if plus_ptx:
                raise ArchSyntaxError(f"{raw!r}: compute_XX is already PTX; '+ptx' applies to sm_XX",
                                      hint=f"write compute_{num}{suffix} or sm_{num}{suffix}+ptx")
            return Arch(int(num), suffix.lower(), sass=False, ptx=True)
        return Arch(int(num), suffix.lower(), sass=True, ptx=bool(plus_ptx))
    m = _DOTTED_RE.match(raw)
    if m:
        major, minor, suffix, plus_ptx = m.groups()
        return Arch(int(major) * 10 + int(minor), suffix.lower(), sass=True, ptx=bool(plus_ptx))
    m = _CMAKE_RE.match(raw)
    if m:
        num, suffix, which = m.groups()
        which = (which or "").lower()
        return Arch(int(num), suffix.lower(), sass=which != "-virtual", ptx=which != "-real")
    raise ArchSyntaxError(
        f"{raw!r} is not a GPU architecture",
        hint="use sm_86, sm_86+ptx (adds PTX for newer GPUs), compute_75 (PTX only), or 8.6 / 8.6+PTX",
    )


def merge_archs(archs: Iterable[str | Arch]) -> tuple[Arch, ...]:
    """Parse and merge targets: sm_86 + compute_86 → sm_86+ptx; sorted by capability; duplicates collapse."""
    merged: dict[tuple[int, str], Arch] = {}
    for a in archs:
        arch = a if isinstance(a, Arch) else parse_arch(a)
        key = (arch.number, arch.suffix)
        old = merged.get(key)
        if old is not None:
            arch = Arch(arch.number, arch.suffix, sass=old.sass or arch.sass, ptx=old.ptx or arch.ptx)
        merged[key] = arch
    return tuple(merged[k] for k in sorted(merged))


def split_arch_list(text: str) -> list[str]:
    """Split a list written with any separator tools use: "sm_86,sm_90+ptx", "8.6;9.0+PTX", "8.6 9.0"."""
    return [t for t in re.split(r"[;,\s]+", text.strip()) if t]


@dataclass(frozen=True)
class ArchFlags:
    """The same targets in every build system's spelling."""

    archs: tuple[Arch, ...]
    torch_cuda_arch_list: str  # "8.6;9.0+PTX"
    cmake_cuda_architectures: str  # "86-real;90"
    nvcc_gencode: tuple[str, ...]  # ("-gencode=arch=compute_86,code=sm_86", ...)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.archs)

    @property
    def sass_archs(self) -> tuple[str, ...]:
        return tuple(a.sm for a in self.archs if a.sass)

    @property
    def ptx_archs(self) -> tuple[str, ...]:
        return tuple(a.compute for a in self.archs if a.ptx)


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

    `archs` is a sequence of targets, or one string holding a list ("sm_86,sm_90+ptx" or "8.6;9.0+PTX").
    """
    items = split_arch_list(archs) if isinstance(archs, str) else list(archs)
    if not items:
        raise ArchSyntaxError("no GPU architecture given", hint="name at least one target, e.g. sm_86")
    merged = merge_archs(items)
    return ArchFlags(
        archs=merged,
        torch_cuda_arch_list=";".join(_torch_item(a) for a in merged),
        cmake_cuda_architectures=";".join(_cmake_item(a) for a in merged),
        nvcc_gencode=tuple(g for a in merged for g in _gencode(a)),
    )
