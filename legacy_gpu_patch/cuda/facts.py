"""The base of lgpatch's CUDA tables: where each kind of fact comes from, and version arithmetic.

Everything under cuda/ that holds data (arches.py, knowledge.py, changes.py) cites these sources; stdlib only.
"""

from __future__ import annotations

import re

# --------------------------------------------------------------------------------------------- sources

RELNOTES = "https://docs.nvidia.com/cuda/archive/{v}/cuda-toolkit-release-notes/index.html"
DRIVER_TABLE = (
    "CUDA Toolkit Release Notes, table 'CUDA Toolkit and Corresponding Driver Versions' "
    "(https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html); mirrored in mesonbuild/meson "
    "mesonbuild/modules/cuda.py _DRIVER_TABLE_VERSION"
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
RELNOTES_13_REMOVALS = (
    "CUDA 13.0 release notes: offline compilation and library support for Maxwell, Pascal and Volta removed"
)
LOCAL_NVCC_13 = "nvcc 13.0.88 `--list-gpu-arch` on the project's build machine (tests/integration/test_nvcc_real.py)"


# --------------------------------------------------------------------------------------------- versions


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
