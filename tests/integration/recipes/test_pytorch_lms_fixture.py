"""The real pytorch-lms patchsets, applied with --strict to a fixture tree the test builds, then proven with the
real nvcc by `lgpatch verify` for sm_86 and sm_90.

CI has no PyTorch tree, so the test writes one with the same shapes: for every file a patchset touches, the lines
each hunk expects (taken from our own patch files) stand at the hunk's line numbers, and the gaps between them are
filled with code written here, so that the probed files compile (a `GpuDefs.cuh` with the `__CUDA_ARCH__ <= 750`
guard, a `SparseCUDABlas.cu` that calls `cusparseScsrmm2`, a mini ATen header, CMake templates, a stand-in for
ATen's code generator). IBM's LMS patch is replaced by a small fake one served from the download cache.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import unidiff
import yaml
from helpers import Upstream, git, make_upstream, requires_nvcc

from legacy_gpu_patch.config.patchset import PatchBody
from legacy_gpu_patch.config.recipe import SearchPath, find_recipe
from legacy_gpu_patch.errors import ExitCode

pytestmark = pytest.mark.integration

REAL = find_recipe("pytorch-lms", SearchPath.from_options())
FIXTURE_PROBES = ("gpudefs-warp-size", "sparse-cuda-blas", "kernel-launch-check", "export-aliases",
                  "lms-caching-allocator", "cudnn-version-cmake", "cmake4-arch-list", "nvcc-cxx17", "cudart-profiler")

# ------------------------------------------------------------------------------------------ fixture files

MINI_ATEN = """\
#pragma once
// Fixture stand-in for ATen's CUDA context: just what SparseCUDABlas.cu uses.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <ATen/Functions.h>
#include <ATen/cuda/CUDAConfig.h>
#define TORCH_CHECK(cond, ...) do { if (!(cond)) throw std::runtime_error("TORCH_CHECK failed"); } while (0)
#define TORCH_CUDASPARSE_CHECK(EXPR) do { cusparseStatus_t s_ = (EXPR); \\
    if (s_ != CUSPARSE_STATUS_SUCCESS) throw std::runtime_error("cusparse"); } while (0)
namespace at { namespace cuda {
struct DataPtr { void* ptr; void* get() const { return ptr; } };
struct Allocator {
  DataPtr allocate(size_t n) { void* p = nullptr; if (n) cudaMalloc(&p, n); return DataPtr{p}; }
};
inline Allocator* getCUDADeviceAllocator() { static Allocator a; return &a; }
inline cusparseHandle_t getCurrentCUDASparseHandle() {
  static cusparseHandle_t h = nullptr;
  if (!h) cusparseCreate(&h);
  return h;
}
}}  // namespace at::cuda
"""

# What the fixture's "code generator" writes, so that the probes' `run:` setup is exercised for real.
FAKE_GEN = """\
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--source-path")
parser.add_argument("--install_dir", required=True)
args, _ = parser.parse_known_args()
os.makedirs(args.install_dir, exist_ok=True)
with open(os.path.join(args.install_dir, "Functions.h"), "w") as f:
    f.write("#pragma once\\n#define LGPATCH_FIXTURE_GENERATED 1\\n")
"""

EXPORT_H = """\
#ifndef C10_MACROS_MACROS_H_
#define C10_MACROS_MACROS_H_
#include <c10/macros/cmake_macros.h>
#define C10_EXPORT __attribute__((__visibility__("default")))
#define C10_IMPORT C10_EXPORT
#ifdef CAFFE2_BUILD_MAIN_LIB
#define CAFFE2_API C10_EXPORT
#else
#define CAFFE2_API C10_IMPORT
#endif
#if defined(TORCH_CUDA_BUILD_MAIN_LIB)
#define TORCH_CUDA_API C10_EXPORT
#else
#define TORCH_CUDA_API C10_IMPORT
#endif

#endif // C10_MACROS_MACROS_H_
"""

# c10/macros/Macros.h in the shape gcc13-includes patches: the Export.h include it anchors on, then uint32_t used
# without <cstdint> (written here, not copied).
MACROS_H = """\
#ifndef C10_MACROS_MACROS_H_GUARD
#define C10_MACROS_MACROS_H_GUARD
#include "c10/macros/cmake_macros.h"
#include "c10/macros/Export.h"
constexpr uint32_t CUDA_MAX_THREADS_PER_BLOCK = 1024;
#endif
"""

CUDA_EXCEPTION_H = """\
#pragma once
#include <c10/macros/cmake_macros.h>
#include <c10/cuda/impl/cuda_cmake_macros.h>
#include <stdexcept>
#include <cuda_runtime.h>

#define C10_CUDA_CHECK(EXPR) do { cudaError_t __err = EXPR; \\
    if (__err != cudaSuccess) throw std::runtime_error(cudaGetErrorString(__err)); } while (0)

#define C10_CUDA_CHECK_WARN(EXPR) do { (void)(EXPR); } while (0)
"""

ALLOCATOR_CPP = """\
#include <c10/cuda/CUDAException.h>

namespace c10 { namespace cuda { namespace CUDACachingAllocator {
void* raw_alloc(size_t n) { void* p = nullptr; C10_CUDA_CHECK(cudaMalloc(&p, n)); return p; }
}}}  // namespace c10::cuda::CUDACachingAllocator
"""

# Stand-in for IBM's patch: it must survive every later step (the seed's lesson).
FAKE_LMS = """\
diff --git a/c10/core/LargeModelSupport.h b/c10/core/LargeModelSupport.h
new file mode 100644
--- /dev/null
+++ b/c10/core/LargeModelSupport.h
@@ -0,0 +1,3 @@
+#pragma once
+// fixture stand-in for IBM's Large Model Support
+#define C10_LMS_ENABLED 1
diff --git a/c10/cuda/CUDACachingAllocator.cpp b/c10/cuda/CUDACachingAllocator.cpp
--- a/c10/cuda/CUDACachingAllocator.cpp
+++ b/c10/cuda/CUDACachingAllocator.cpp
@@ -1,3 +1,4 @@
 #include <c10/cuda/CUDAException.h>
+#include <c10/core/LargeModelSupport.h>
""" + " \n" + """ namespace c10 { namespace cuda { namespace CUDACachingAllocator {
"""

TEMPLATES = {
    "c10/macros/cmake_macros.h.in": "#pragma once\n#cmakedefine C10_BUILD_SHARED_LIBS\n#cmakedefine C10_USE_GLOG\n",
    "c10/cuda/impl/cuda_cmake_macros.h.in": "#pragma once\n#cmakedefine C10_CUDA_BUILD_SHARED_LIBS\n",
    "aten/src/TH/THGeneral.h.in": "#pragma once\n#cmakedefine USE_BLAS\n",
    "aten/src/THC/THCGeneral.h.in": "#pragma once\n#cmakedefine USE_MAGMA\n",
    "aten/src/ATen/Config.h.in": "#pragma once\n#define AT_MKL_ENABLED() @AT_MKL_ENABLED@\n",
    "aten/src/ATen/cuda/CUDAConfig.h.in": "#pragma once\n#define AT_CUDNN_ENABLED() @AT_CUDNN_ENABLED@\n"
                                         '#define NVCC_FLAGS_EXTRA "@NVCC_FLAGS_EXTRA@"\n',
}

# Code for the gaps between hunks (one block per gap: before hunk 1, between hunks, after the last hunk). Each
# block is padded with blank lines to the gap's exact length. Files not listed get blank-line gaps (CMake, and
# C++ files that no probe compiles here).
# Files only regex/insert steps touch (patch steps get theirs from the hunks): the lines those steps look for.
NVTX_FIND = "find_library(LIBNVTOOLSEXT libnvToolsExt.so PATHS ${CUDA_TOOLKIT_ROOT_DIR}/lib64/)\n"
STEP_SHAPES = {
    "torch/csrc/autograd/profiler_cuda.cpp": "#include <c10/cuda/CUDAGuard.h>\n#include <nvToolsExt.h>\n",
    "torch/csrc/cuda/shared/nvtx.cpp": "#include <torch/csrc/utils/pybind.h>\n#include <nvToolsExt.h>\n",
    "torch/CMakeLists.txt": "else()\n  " + NVTX_FIND + "endif()\n",
    "cmake/TorchConfig.cmake.in": "else()\n  " + NVTX_FIND,
    "torch/csrc/jit/runtime/logging.cpp": "#include <atomic>\n#include <mutex>\n",
    "aten/src/THC/THCTensorMath.cu": (
        "  struct stride_functor : public thrust::unary_function<difference_type,\n"
        "                                                        difference_type>\n  {\n  };\n"),
    "aten/src/ATen/native/cuda/SpectralOps.cu": (
        "struct cnt_to_dst_idx_functor : public thrust::unary_function<int64_t, int64_t>\n{};\n"
        "struct dst_idx_to_src_functor : public thrust::unary_function<int64_t, scalar_t>\n{};\n"),
    "aten/src/THC/THCTensorMathReduce.cuh": ("#include <thrust/functional.h>\n#include <thrust/device_ptr.h>\n"
                                             + "  acc = binary_op(acc, thrust::make_pair<K, Index>(*src, col));\n" * 4),
    "aten/src/THC/generic/THCTensorMathReduce.cu": ("  thrust::identity<accreal>{},\n" * 5
                                                    + "  thrust::make_pair<scalar_t, int64_t>(0, 0),\n" * 2),
}

GAPS = {
    "caffe2/CMakeLists.txt": ["  " + NVTX_FIND],  # before the py312-distutils hunk
    "caffe2/utils/GpuDefs.cuh": [
        "#ifndef CAFFE2_UTILS_GPU_DEFS_H_\n#define CAFFE2_UTILS_GPU_DEFS_H_\n#include <cuda_runtime.h>\n"
        "namespace caffe2 {\n",
        "constexpr int kWarpSize = 32;\n#endif // __CUDA_ARCH__\n} // namespace caffe2\n#endif\n",
    ],
    "aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cu": [
        "#include <ATen/cuda/CUDAContext.h>\n#include <TH/THGeneral.h>\n#include <cusparse.h>\n\n"
        "namespace at { namespace native { namespace sparse { namespace cuda {\n\n"
        "cusparseOperation_t convertTransToCusparseOperation(char trans) {\n"
        "  if (trans == 't') return CUSPARSE_OPERATION_TRANSPOSE;\n"
        "  if (trans == 'c') return CUSPARSE_OPERATION_CONJUGATE_TRANSPOSE;\n"
        "  return CUSPARSE_OPERATION_NON_TRANSPOSE;\n}\n\n"
        "void adjustLd(char transb, int64_t m, int64_t n, int64_t k, int64_t *ldb, int64_t *ldc)\n{\n"
        "  if (n == 1) *ldc = m;\n"
        "  if (transb == 't' || transb == 'T') { if (k == 1) *ldb = n; } else if (n == 1) { *ldb = k; }\n",
        # the rest of Scsrmm2, then Dcsrmm2 up to its last comment line (the second hunk)
        "  cusparseOperation_t opa = convertTransToCusparseOperation(transa);\n"
        "  cusparseOperation_t opb = convertTransToCusparseOperation(transb);\n"
        "  TORCH_CHECK((m <= INT_MAX) && (n <= INT_MAX) && (k <= INT_MAX) && (nnz <= INT_MAX), \"32-bit\");\n"
        "  auto handle = at::cuda::getCurrentCUDASparseHandle();\n"
        "  cusparseMatDescr_t desc;\n  cusparseCreateMatDescr(&desc);\n"
        "  TORCH_CUDASPARSE_CHECK(cusparseScsrmm2(handle, opa, opb, (int)m, (int)n, (int)k, (int)nnz, &alpha, desc,\n"
        "      csrvala, csrrowptra, csrcolinda, b, (int)ldb, &beta, c, (int)ldc));\n"
        "  TORCH_CUDASPARSE_CHECK(cusparseDestroyMatDescr(desc));\n}\n\n"
        "void Dcsrmm2(char transa, char transb, int64_t m, int64_t n, int64_t k, int64_t nnz, double alpha, "
        "double *csrvala, int *csrrowptra, int *csrcolinda, double *b, int64_t ldb, double beta, double *c, "
        "int64_t ldc)\n{\n"
        "  adjustLd(transb, m, n, k, &ldb, &ldc);\n"
        "  cusparseOperation_t opa = convertTransToCusparseOperation(transa);\n"
        "  cusparseOperation_t opb = convertTransToCusparseOperation(transb);\n"
        "  auto handle = at::cuda::getCurrentCUDASparseHandle();\n"
        "  cusparseMatDescr_t desc;\n  cusparseCreateMatDescr(&desc);\n"
        "  TORCH_CUDASPARSE_CHECK(cusparseDcsrmm2(handle, opa, opb, (int)m, (int)n, (int)k, (int)nnz, &alpha, desc,\n"
        "      csrvala, csrrowptra, csrcolinda, b, (int)ldb, &beta, c, (int)ldc));\n"
        "  TORCH_CUDASPARSE_CHECK(cusparseDestroyMatDescr(desc));\n",
        "    \"CreateIdentityPermutation only supports nnz <= \", INT_MAX);\n  (void)P;\n}\n\n}}}}\n",
    ],
}


def _patch_files() -> list[Path]:
    files = []
    for entry in REAL.entries[1:]:
        for step in entry.patchset.steps:
            if isinstance(step.body, PatchBody):
                files.append(step.base_dir / step.body.path)
    return files


def _hunk_preimages() -> dict[str, list[tuple[int, list[str]]]]:
    """file -> [(first line in the pristine file, the lines the hunk expects there)], over every patch of the recipe.

    A later patch's line numbers count the lines earlier patches added above its hunk (cuda.cmake gets two
    patchsets), so they are shifted back into pristine coordinates."""
    found: dict[str, list[tuple[int, list[str]]]] = {}
    earlier: dict[str, list[tuple[int, int]]] = {}  # file -> [(start after applying, lines added)] of earlier patches
    for path in _patch_files():
        this_patch: dict[str, list[tuple[int, int]]] = {}
        for pf in unidiff.PatchSet(path.read_text(encoding="utf-8")):
            if pf.is_added_file:
                continue  # the patch creates it: the pristine fixture must not have it
            for h in pf:
                shift = sum(d for start, d in earlier.get(pf.path, []) if start < h.source_start)
                found.setdefault(pf.path, []).append(
                    (h.source_start - shift, [ln.value for ln in h if not ln.is_added]))
                this_patch.setdefault(pf.path, []).append((h.target_start, h.target_length - h.source_length))
        for rel, deltas in this_patch.items():
            earlier.setdefault(rel, []).extend(deltas)
    return {f: sorted(hs) for f, hs in found.items()}


def _compose(rel: str, hunks: list[tuple[int, list[str]]]) -> str:
    blocks = GAPS.get(rel, [])
    lines: list[str] = []
    for i, (start, pre) in enumerate(hunks):
        filler = blocks[i].splitlines(keepends=True) if i < len(blocks) else []
        gap = start - 1 - len(lines)
        assert len(filler) <= gap, f"{rel}: gap {i} has {gap} lines, filler needs {len(filler)}"
        lines += filler + ["\n"] * (gap - len(filler))
        lines += pre
    tail = blocks[len(hunks)] if len(blocks) > len(hunks) else ""
    return "".join(lines) + tail


def fixture_files() -> dict[str, str]:
    files = {rel: _compose(rel, hunks) for rel, hunks in _hunk_preimages().items()}
    files.update(TEMPLATES)
    files.update(STEP_SHAPES)
    files.update({
        "aten/src/ATen/cuda/CUDAContext.h": MINI_ATEN,
        "aten/src/ATen/gen.py": FAKE_GEN,
        "c10/macros/Export.h": EXPORT_H,
        "c10/macros/Macros.h": MACROS_H,
        "c10/cuda/CUDAException.h": CUDA_EXCEPTION_H,
        "c10/cuda/CUDACachingAllocator.cpp": ALLOCATOR_CPP,
        "caffe2/core/common.h": "#pragma once\n#define CAFFE2_USED __attribute__((__used__))\n",
        "README.md": "fixture with the shapes of PyTorch v1.5.0 (written by the test)\n",
    })
    return files


def fixture_recipe(folder: Path, up: Upstream, lms_sha: str) -> Path:
    """The real recipe with the fixture as source and the fake LMS patch; patchsets are the real ones, by name."""
    data = yaml.safe_load(REAL.path.read_text(encoding="utf-8"))
    data["name"] = "pytorch-lms-fixture"
    data["aliases"] = []
    data["source"]["git"].update(url=up.url(), ref=up.tag, commit=up.commit, submodules=False)
    lms = data["steps"][0]
    assert lms["id"] == "ibm-lms"
    lms["url-patch"] = {"url": "https://lms.invalid/pytorch_v1.5.0_large_model_support.patch", "sha256": lms_sha}
    data["verify"] = [p for p in data["verify"] if p["name"] in FIXTURE_PROBES]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pytorch-lms-fixture.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def torch_fixture(tmp_path: Path, lgpatch) -> tuple[Upstream, Path]:
    up = make_upstream(tmp_path / "pytorch", fixture_files(), tag="v1.5.0")
    lms = tmp_path / "pytorch_v1.5.0_large_model_support.patch"
    lms.write_text(FAKE_LMS, encoding="utf-8")
    recipe = fixture_recipe(tmp_path / "recipes", up, hashlib.sha256(lms.read_bytes()).hexdigest())
    res = lgpatch("--recipe-path", recipe.parent, "cache", "add", lms)
    assert res.code == 0, res.err
    return up, recipe


def _apply(lgpatch, recipe: Path, up: Upstream, workdir: Path, cuda: str, arch: str):
    return lgpatch("apply", recipe, "--cuda", cuda, "--arch", arch, "--strict", "--offline", "--no-submodules",
                   "--source", up.path, "--workdir", workdir)


# ------------------------------------------------------------------------------------------ tests


def test_fixture_has_the_seed_shapes() -> None:
    files = fixture_files()
    gpudefs = files["caffe2/utils/GpuDefs.cuh"]
    assert "#if __CUDA_ARCH__ <= 750" in gpudefs and "#error Unknown __CUDA_ARCH__" in gpudefs
    assert "cusparseScsrmm2(" in files["aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cu"]
    assert "cudnn.h CUDNN_HEADER_CONTENTS" in files["cmake/public/cuda.cmake"]


# skipped: cudnn-tf32-on (tf32 defaults to false), plus the CUDA >= 12/13 steps for 11.1
@pytest.mark.parametrize("cuda, arch, skipped", [("11.1", "sm_86", 14), ("13.0", "sm_90", 1)])
def test_apply_strict_then_revert(torch_fixture, tmp_path: Path, lgpatch, cuda: str, arch: str,
                                  skipped: int) -> None:
    up, recipe = torch_fixture
    wt = tmp_path / f"wt-{cuda}"
    res = _apply(lgpatch, recipe, up, wt, cuda, arch)
    assert res.code == 0, res.err
    assert "inexact" not in res.err
    assert f"{skipped} skipped by conditions" in res.err
    # LMS survives every later step: the seed's lesson.
    assert (wt / "c10/core/LargeModelSupport.h").is_file()
    assert "LargeModelSupport.h" in (wt / "c10/cuda/CUDACachingAllocator.cpp").read_text()
    assert "#error Unknown __CUDA_ARCH__" not in (wt / "caffe2/utils/GpuDefs.cuh").read_text()
    assert "cusparseSpMM(" in (wt / "aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cu").read_text()
    assert ("-std=c++17" in (wt / "cmake/public/cuda.cmake").read_text()) == (cuda == "13.0")
    assert ("thrust::identity" in (wt / "aten/src/THC/generic/THCTensorMathReduce.cu").read_text()) == (cuda == "11.1")
    assert ("nvtx3/nvToolsExt.h" in (wt / "torch/csrc/cuda/shared/nvtx.cpp").read_text()) == (cuda == "13.0")
    # The wheel and Python 3.12 / NumPy 2 steps, on every CUDA; CCCL 3 fixes for caffe2 only with CUDA 13.
    assert "PyFrame_GetCode" in (wt / "torch/csrc/jit/python/python_tracer.cpp").read_text()
    assert "PY_VERSION_HEX < 0x030B0000" in (wt / "tools/lgpatch/pybind11_py312.py").read_text()
    assert "PyDataType_ELSIZE(descr)" in (wt / "torch/csrc/utils/tensor_numpy.cpp").read_text()
    assert "build\", \"CMakeCache.txt\"" in (wt / "setup.py").read_text()
    assert "LGPATCH_WHEEL_RPATH" in (wt / "cmake/Dependencies.cmake").read_text()
    descriptors = (wt / "aten/src/ATen/cudnn/Descriptors.h").read_text()
    assert "#define LGPATCH_CUDNN_TF32_DEFAULT 0" in descriptors and "CUDNN_FMA_MATH" in descriptors
    assert (wt / "aten/src/ATen/native/cudnn/Conv.cpp").read_text().count("lgpatch_float_conv_math_of(args);") == 3
    assert "TORCH_WARN_ONCE" in (wt / "aten/src/ATen/native/RNN.cpp").read_text()
    assert "def rnn_available():" in (wt / "torch/backends/cudnn/__init__.py").read_text()
    assert "defined(__CUDACC__)" in (wt / "c10/util/TypeIndex.h").read_text()
    assert (wt / "caffe2/utils/cub_compat.cuh").is_file() == (cuda == "13.0")
    assert ("cub::Sum" in (wt / "caffe2/utils/math/reduce.cu").read_text()) == (cuda == "11.1")
    # Applying again changes nothing (the inserts are idempotent, the ledger knows the rest).
    head = git(wt, "rev-parse", "HEAD")
    again = _apply(lgpatch, recipe, up, wt, cuda, arch)
    assert again.code == 0, again.err
    assert git(wt, "rev-parse", "HEAD") == head
    res = lgpatch("revert", "--workdir", wt)
    assert res.code == 0, res.err
    assert git(wt, "rev-parse", "HEAD^{tree}") == git(up.path, "rev-parse", f"{up.commit}^{{tree}}")
    assert git(wt, "status", "--porcelain") == ""


@requires_nvcc
@pytest.mark.nvcc
@pytest.mark.slow
def test_verify_probes_with_real_nvcc(torch_fixture, tmp_path: Path, lgpatch) -> None:
    up, recipe = torch_fixture
    wt = tmp_path / "wt"
    assert _apply(lgpatch, recipe, up, wt, "13.0", "sm_90").code == 0
    res = lgpatch("--recipe-path", recipe.parent, "verify", "--workdir", wt, "--arch", "sm_86,sm_90", "--json")
    assert res.code == 0, res.err
    report = json.loads(res.out)
    got = {(r["probe"], r["arch"]): r for r in report["results"]}
    for arch in ("sm_86", "sm_90"):
        r = got[("gpudefs-warp-size", arch)]
        assert r["verdict"] == "ok", r
        assert "#error Unknown __CUDA_ARCH__" in r["pristine"]["first_error"]
        assert got[("kernel-launch-check", arch)]["verdict"] == "ok"
        sparse = got[("sparse-cuda-blas", arch)]
        if sparse["verdict"] == "skipped":  # no cuSPARSE headers here: said, not hidden
            assert "cusparse.h" in sparse["reason"]
        else:
            assert sparse["verdict"] == "ok", sparse
            assert 'identifier "cusparseScsrmm2" is undefined' in sparse["pristine"]["output_head"]
    assert got[("export-aliases", None)]["verdict"] == "ok"
    assert got[("lms-caching-allocator", None)]["verdict"] == "ok"
    standalone = {r["probe"]: r["reason"] for r in report["results"] if r["verdict"] == "not-standalone"}
    assert set(standalone) == {"cudnn-version-cmake", "cmake4-arch-list", "nvcc-cxx17", "cudart-profiler"}
    assert all(standalone.values())
    assert report["toolchain"]["nvcc"]


@requires_nvcc
@pytest.mark.nvcc
def test_verify_reports_a_wrong_outcome(torch_fixture, tmp_path: Path, lgpatch) -> None:
    """A probe whose declared pristine error is not what nvcc says makes verify fail with its own exit code."""
    up, recipe = torch_fixture
    data = yaml.safe_load(recipe.read_text(encoding="utf-8"))
    for probe in data["verify"]:
        if probe["name"] == "gpudefs-warp-size":
            probe["expect_error"] = "an error nvcc never prints"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    wt = tmp_path / "wt"
    assert _apply(lgpatch, recipe, up, wt, "11.1", "sm_86").code == 0
    res = lgpatch("--recipe-path", recipe.parent, "verify", "--workdir", wt, "--probe", "gpudefs-warp-size")
    assert res.code == ExitCode.VERIFY, res.err
    assert "gpudefs-warp-size@sm_86" in res.err
    # The pristine checkout is gone again.
    assert "pristine" not in git(wt, "worktree", "list")



def test_tf32_parameter_selects_the_default_on_step(torch_fixture, tmp_path: Path, lgpatch) -> None:
    up, recipe = torch_fixture
    wt = tmp_path / "wt-tf32"
    res = lgpatch("apply", recipe, "--cuda", "13.0", "--arch", "sm_90", "-p", "tf32=true", "--strict", "--offline",
                  "--no-submodules", "--source", up.path, "--workdir", wt)
    assert res.code == 0, res.err
    assert "cudnn-tf32-on/default-on" in res.err and "0 skipped by conditions" in res.err
    descriptors = (wt / "aten/src/ATen/cudnn/Descriptors.h").read_text()
    assert "#define LGPATCH_CUDNN_TF32_DEFAULT 1" in descriptors
    assert 'getenv("LGPATCH_CUDNN_TF32")' in descriptors  # the run-time switch stays either way


@requires_nvcc
@pytest.mark.nvcc
def test_the_multi_arch_list_patches_like_sm90_and_verify_probes_each_target(torch_fixture, tmp_path: Path,
                                                                               lgpatch) -> None:
    """The users' wheel (issue 18): the arch parameter a list; the same steps as sm_90 (every arch-gated step is
    for sm_80+), the same tree, and `verify` without --arch compiles the GpuDefs probe for each listed target."""
    up, recipe = torch_fixture
    single, multi = tmp_path / "wt-sm90", tmp_path / "wt-multi"
    assert _apply(lgpatch, recipe, up, single, "13.0", "sm_90").code == 0
    res = _apply(lgpatch, recipe, up, multi, "13.0", "sm_90+ptx,sm_89,sm_86,sm_80")
    assert res.code == 0, res.err
    assert "1 skipped by conditions" in res.err and "inexact" not in res.err
    assert git(multi, "rev-parse", "HEAD^{tree}") == git(single, "rev-parse", "HEAD^{tree}")
    res = lgpatch("--recipe-path", recipe.parent, "verify", "--workdir", multi, "--probe", "gpudefs-warp-size",
                  "--json")
    assert res.code == 0, res.err
    got = {r["arch"]: r["verdict"] for r in json.loads(res.out)["results"]}
    assert got == {"sm_80": "ok", "sm_86": "ok", "sm_89": "ok", "sm_90+ptx": "ok"}
