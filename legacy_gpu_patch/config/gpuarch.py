"""The spelling of GPU architectures: sm_86, sm_86+ptx, compute_75, sm_90a, sm_100f (nvcc), 8.6+PTX
(TORCH_CUDA_ARCH_LIST), 86-real / 86-virtual (CMake). One parser for recipe conditions (config/conditions.py) and
for build flags (cuda/archflags.py), so that both agree on case and on suffixes: nvcc knows the suffixes "a"
(arch-specific) and "f" (family-specific, CUDA 12.9+) and no other; "compute_XX+ptx" means nothing (compute_XX is
already PTX). Stdlib-only: the doctor's stdlib entry point imports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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


def parse_arch(text: str, *, recipe_value: bool = False) -> Arch:
    """Parse one target in nvcc ("sm_86+ptx"), TORCH_CUDA_ARCH_LIST ("8.6+PTX") or CMake ("86-virtual") spelling.

    `recipe_value`: the spelling recipes and their `when:` ranges use, nvcc's own and lower case only (sm_86,
    sm_90a, compute_75, sm_86+ptx). There "86" or "11.0" is much more likely a slip (a CMake number, a CUDA version
    in an arch range) than a target, so it is refused; the command line lower-cases what users type first.
    """
    raw = str(text).strip()
    m = _NVCC_RE.match(raw)
    if recipe_value and (m is None or raw != raw.lower()):
        raise ArchSyntaxError(f"{raw!r} is not a GPU architecture (like sm_86 or sm_90)",
                              hint="recipes name targets the way nvcc does: sm_86, sm_90a, compute_75, sm_86+ptx")
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




# --------------------------------------------------------------------------------------------- lists of targets


def split_arch_list(text: str) -> list[str]:
    """Split a list written with any separator tools use: "sm_86,sm_90+ptx", "8.6;9.0+PTX", "8.6 9.0"."""
    return [t for t in re.split(r"[;,\s]+", str(text).strip()) if t]


def merge_archs(archs: Iterable[str | Arch], *, recipe_value: bool = False) -> tuple[Arch, ...]:
    """Parse and merge targets: sm_86 + compute_86 → sm_86+ptx; sorted by capability; duplicates collapse."""
    merged: dict[tuple[int, str], Arch] = {}
    for a in archs:
        arch = a if isinstance(a, Arch) else parse_arch(a, recipe_value=recipe_value)
        key = (arch.number, arch.suffix)
        old = merged.get(key)
        if old is not None:
            arch = Arch(arch.number, arch.suffix, sass=old.sass or arch.sass, ptx=old.ptx or arch.ptx)
        merged[key] = arch
    return tuple(merged[k] for k in sorted(merged))


def parse_arch_list(text: str, *, recipe_value: bool = False) -> tuple[Arch, ...]:
    """One target or a list of them ("sm_80,sm_86,sm_89,sm_90+ptx"), merged and sorted; an empty list is refused."""
    items = split_arch_list(text)
    if not items:
        raise ArchSyntaxError("no GPU architecture given", hint="name at least one target, e.g. sm_86")
    return merge_archs(items, recipe_value=recipe_value)


def canonical_arch_list(text: str) -> str:
    """The value an `arch` parameter holds: recipe spelling, sorted, merged, comma-separated.

    "sm_90+ptx, sm_80,sm_86" → "sm_80,sm_86,sm_90+ptx"; a single target stays as it is ("sm_90"), so the ledgers
    and wheel names of single-architecture trees do not change. The same set of targets always gives the same
    string, so re-applying with the list in another order re-applies nothing.
    """
    return ",".join(a.name for a in parse_arch_list(text, recipe_value=True))
