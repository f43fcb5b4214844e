"""What we know about CUDA toolkits and GPU architectures: data with a source for every entry.

Three tables and the rules that use them:

- ARCHES: every compute capability from Fermi to Rubin — family, Tegra (integrated Jetson/DRIVE part) or not,
  and the toolkit range whose nvcc accepts it as a target (`sm_XX` real / `compute_XX` virtual).
- TOOLKITS: every toolkit 8.0 … 13.5 — the Linux x86_64 driver it ships with, the newest host GCC / Clang its
  `crt/host_config.h` accepts, and (derived from ARCHES) the targets its nvcc accepts.
- CHANGES (changes.py): notable removals and breaking changes per toolkit, with the error a legacy tree shows and
  the fix.

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

from dataclasses import dataclass, field

from legacy_gpu_patch.cuda.arches import (
    ARCH_BY_NUMBER,
    ARCHES,
    TARGETS,
    TEGRA_ONLY,
    GpuArch,
    TargetRange,
    arch_info,
    family_of,
    ptx_runs_on,
    sass_runs_on,
)
from legacy_gpu_patch.cuda.facts import (
    DRIVER_TABLE,
    HOST_CONFIG,
    NVCC_ARCHS,
    RELNOTES,
    major_minor,
    version_at_least,
    version_at_most,
    vtuple,
)

# Re-exported: callers read every table and rule through `knowledge as ck`.
__all__ = ["ARCHES", "ARCH_BY_NUMBER", "CMAKE_POLICY_FLOOR", "CUDNN_HEADER", "NEWEST_TOOLKIT", "OLDEST_TOOLKIT",
           "TARGETS", "TEGRA_ONLY", "TOOLKITS", "GpuArch", "TargetRange", "Toolkit", "UnknownToolkit", "arch_info",
           "driver_cuda_version", "family_of", "is_tabulated", "major_minor", "newest_toolkit_with",
           "oldest_toolkit_with", "ptx_runs_on", "sass_runs_on", "toolkit", "version_at_least", "version_at_most",
           "vtuple"]

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
# Source: CUDA Compatibility guide, 'Minor Version Compatibility' table
# (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html).
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


# --------------------------------------------------------------------------------------------- docs/cuda.md


def _target_key(sm: str) -> tuple[int, str]:
    digits = sm[len("sm_"):].rstrip("af")
    return int(digits), sm[len("sm_") + len(digits):]


def toolkit_table() -> str:
    """The "Toolkits" table of docs/cuda.md, from TOOLKITS (a test keeps the page equal to this)."""
    lines = ["| CUDA | nvcc targets (`sm_XX`; `a`/`f` = arch-/family-specific) | toolkit driver (Linux x86_64) | "
             "oldest driver for its cubins | newest GCC | newest Clang |", "|---|---|---|---|---|---|"]
    for tk in TOOLKITS:
        targets = " ".join(sm[len("sm_"):] for sm in sorted(tk.sass, key=_target_key))
        cells = [tk.version, targets, tk.driver, tk.min_driver, tk.gcc_max, tk.clang_max]
        lines.append("| " + " | ".join("—" if c is None else str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(toolkit_table(), end="")
