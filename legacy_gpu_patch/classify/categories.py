"""The finding categories, in a module of their own: the classifier reads them at every start, and the rule-file
schema (rules_schema.py, which needs the config validators) only when rule files are read."""

from __future__ import annotations

__all__ = ["CATEGORIES"]

# The category ids are an interface (reports, CI dashboards, docs/errors.md): add one only with a docs entry.
CATEGORIES: dict[str, str] = {
    "unsupported-gpu-arch": "the toolkit or build does not know the requested GPU architecture",
    "cuda-arch-guard": "source code refuses the architecture it is compiled for (#error on __CUDA_ARCH__)",
    "removed-cusparse-api": "cuSPARSE functions or types removed in CUDA 11/12",
    "removed-cuda-api": "CUDA runtime/driver/toolkit API or header removed or changed",
    "cudnn-version-header": "the build cannot read or does not accept the cuDNN version",
    "removed-cudnn-api": "cuDNN functions, types or enums removed in cuDNN 7/8/9",
    "removed-torch-api": "PyTorch C++/Python API removed (THC, THCudaCheck, torch.utils.ffi, ...)",
    "missing-macro": "a macro the code relies on is not defined (export macros, check macros)",
    "template-mismatch": "no template/overload matches the call (often a changed signature behind it)",
    "host-compiler-unsupported": "nvcc or its headers reject the host compiler version",
    "host-libc-incompat": "glibc/libstdc++ declarations or symbol versions clash with the toolkit or binary",
    "missing-std-include": "a standard header is no longer included transitively (GCC 11-15)",
    "cxx-standard": "the code needs a different C++ standard than the one used",
    "cmake-min-version": "cmake_minimum_required / policy version not accepted by this CMake",
    "cmake-find-cuda": "the build system cannot find the CUDA toolkit or its libraries",
    "python-removed-api": "Python, NumPy, setuptools or other Python-level API removed",
    "cython-incompat": "Cython 3 rejects the source, or old generated C uses removed CPython internals",
    "linker-undefined": "link or load failure: undefined symbols, missing libraries",
    "oom-killed": "a compiler or the run was killed for lack of memory",
    "runtime-no-kernel-image": "the binary has no kernel for this GPU",
    "ptx-jit": "PTX could not be JIT-compiled by the driver (toolchain newer than driver)",
    "other": "an error no specific rule knows",
}
