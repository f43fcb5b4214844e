"""Every kernel header CuPy 1.24 prepends compiles with the real nvcc, to a cubin (sm_90) and to PTX (compute_75).

CuPy compiles kernels at run time: cupy/core/carray.pxi reads cupy/core/carray.cuh and prepends it to every kernel
source (ElementwiseKernel, ReductionKernel, ufuncs, Chainer's cuda.elementwise/reduce). A header that does not
compile breaks every GPU operation at its first launch, so this runs in the fully patched tree: the chainer-1.24
recipe when it is shipped, else the patchsets that touch kernel code (cupy-ptx-fallback, cupy-fp16-header). The
kernels below have the shapes CuPy generates (cupy/core/elementwise.pxi and reduction.pxi templates), written here.
The command is the patched compiler's: `nvcc --cubin -arch sm_XX` or `nvcc --ptx -arch compute_XX`.
"""

from __future__ import annotations

import re
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest
from helpers import NVCC, requires_nvcc
from helpers.ptx_support import FP16_PATCHSET, FP16_REASON, apply, local_sdist, patchset_available, recipe_available

pytestmark = [pytest.mark.integration, pytest.mark.nvcc, requires_nvcc]

RECIPE = "chainer-1.24"
TARGETS = [("cubin", "sm_90"), ("ptx", "compute_75")]

KERNELS = {
    # The header on its own, with one trivial kernel.
    "header": 'extern "C" __global__ void cupy_nop() {}\n',
    # ElementwiseKernel('T x, T y', 'T z', 'z = x + y') for float16, as elementwise.pxi generates it.
    "elementwise_float16": textwrap.dedent("""\
        typedef float16 in0_type; typedef float16 in1_type; typedef float16 out0_type;
        extern "C" __global__ void cupy_add(CArray<float16, 1> _raw_in0, CArray<float16, 1> _raw_in1,
                                            CArray<float16, 1> _raw_out0, CIndexer<1> _ind) {
          ;
          CUPY_FOR(i, _ind.size()) {
            _ind.set(i);
            const in0_type in0 = _raw_in0[_ind.get()];
            const in1_type in1 = _raw_in1[_ind.get()];
            out0_type &out0 = _raw_out0[_ind.get()];
            out0 = in0 + in1;
          }
          ;
        }
        """),
    # float16 helpers from the header that ufuncs use (isnan, copysign, nextafter, min/max) and a 2-d float64 op.
    "ufuncs_mixed": textwrap.dedent("""\
        extern "C" __global__ void cupy_misc(CArray<float16, 2> h, CArray<double, 2> d, CArray<int, 2> o,
                                             CIndexer<2> _ind) {
          CUPY_FOR(i, _ind.size()) {
            _ind.set(i);
            float16 a = h[_ind.get()];
            float16 b = nextafter(copysign(a, float16(-1.0f)), max(a, float16(2.0f)));
            d[_ind.get()] = static_cast<double>(float(b)) * 0.5 + _floor_divide(i, 3);
            o[_ind.get()] = isnan(b) + isinf(a) + signbit(min(a, b));
          }
        }
        """),
    # ReductionKernel sum over float with shared memory, the shape of reduction.pxi's template.
    "reduction_sum": textwrap.dedent("""\
        typedef float type_in0_raw; typedef float type_out0_raw;
        #define REDUCE(a, b) (a + b)
        #define POST_MAP(a) (out0 = a)
        typedef float _type_reduce;
        extern "C" __global__ void cupy_sum(CArray<type_in0_raw, 1> _raw_in0, CArray<type_out0_raw, 0> _raw_out0,
                                            CIndexer<1> _in_ind, CIndexer<0> _out_ind, int _block_stride) {
          extern __shared__ _type_reduce _sdata_raw[];
          _type_reduce *_sdata = _sdata_raw;
          unsigned int _tid = threadIdx.x;
          _type_reduce _s = _type_reduce(0);
          for (long long _j = _tid; _j < _in_ind.size(); _j += 512) {
            _in_ind.set(_j);
            const type_in0_raw in0 = _raw_in0[_in_ind.get()];
            _s = REDUCE(_s, in0);
          }
          _sdata[_tid] = _s;
          __syncthreads();
          for (int _offset = 256; _offset > 0; _offset >>= 1) {
            if (_tid < _offset) _sdata[_tid] = REDUCE(_sdata[_tid], _sdata[_tid + _offset]);
            __syncthreads();
          }
          if (_tid == 0) {
            _out_ind.set(0);
            type_out0_raw &out0 = _raw_out0[_out_ind.get()];
            POST_MAP(_sdata[0]);
          }
        }
        """),
}


@pytest.fixture(scope="module")
def patched_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if recipe_available(RECIPE):
        tree, _ = apply(tmp_path_factory.mktemp("chainer-full"), RECIPE)
    else:
        if not patchset_available(FP16_PATCHSET):
            pytest.skip(FP16_REASON)
        tree, _ = apply(tmp_path_factory.mktemp("chainer-kernels"), None, ["cupy-ptx-fallback", FP16_PATCHSET])
    return tree


def headers(tree: Path) -> list[Path]:
    """The kernel headers CuPy prepends: what cupy/core/carray.pxi's _get_header_source reads (asserted below)."""
    return sorted(tree.glob("cupy/**/*.cuh"))


def test_the_prepended_headers_are_found(patched_tree: Path) -> None:
    found = [str(p.relative_to(patched_tree)) for p in headers(patched_tree)]
    assert "cupy/core/carray.cuh" in found
    reader = (patched_tree / "cupy/core/carray.pxi").read_text()
    assert re.search(r"os\.path\.join\(os\.path\.dirname\(__file__\), 'carray\.cuh'\)", reader)


@pytest.mark.parametrize(("kind", "arch"), TARGETS, ids=[a for _, a in TARGETS])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_kernel_compiles(patched_tree: Path, tmp_path: Path, kernel: str, kind: str, arch: str) -> None:
    source = "".join(h.read_text() for h in headers(patched_tree)) + KERNELS[kernel]
    (tmp_path / "kern.cu").write_text(source)
    proc = subprocess.run([NVCC, f"--{kind}", "-arch", arch, "kern.cu"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"nvcc --{kind} -arch {arch} failed:\n{proc.stdout}{proc.stderr}"
    out = tmp_path / f"kern.{kind}"
    if kind == "ptx":
        text = out.read_text()
        assert re.search(rf"^\.target\s+sm_{arch.split('_')[1]}\b", text, re.M)
        entry = re.search(r'extern "C" __global__ void (\w+)', KERNELS[kernel]).group(1)
        assert re.search(rf"\.entry\s+{entry}\b", text)
    else:
        assert out.read_bytes()[:4] == b"\x7fELF"


def test_pristine_header_does_not_compile(tmp_path: Path) -> None:
    """Why the fp16 patchset is needed: the sdist's own header fails with nvcc >= 9 (field notes row 15)."""
    sdist = local_sdist()
    if sdist is not None:
        with tarfile.open(sdist) as tf:
            member = tf.extractfile("chainer-1.24.0/cupy/core/carray.cuh")
            assert member is not None
            pristine = member.read()
    else:
        # No local copy: let lgpatch fetch the sdist (PyPI) and read the header from the pristine baseline commit.
        tree, _ = apply(tmp_path / "fetch", None, [FP16_PATCHSET])
        baseline = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=tree, capture_output=True,
                                  text=True, check=True).stdout.strip()
        pristine = subprocess.run(["git", "show", f"{baseline}:cupy/core/carray.cuh"], cwd=tree,
                                  capture_output=True, check=True).stdout
    (tmp_path / "kern.cu").write_bytes(pristine + KERNELS["header"].encode())
    proc = subprocess.run([NVCC, "--cubin", "-arch", "sm_90", "kern.cu"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0 and 'identifier "__float2half_rn" is undefined' in proc.stdout + proc.stderr
