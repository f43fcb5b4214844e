"""CuPy 1.24's reduction kernel template as a patched Chainer tree has it at a given ledger step, rendered the way
cupy/core/reduction.pxi's _get_simple_reduction_kernel renders it (string.Template with the same keys).

Each speed patchset's tests read the files as they were right after its own step, so that a later step on the same
file (cupy-reduction-layout after cupy-reduction-grid) does not rewrite what the earlier step's tests check.
"""

from __future__ import annotations

import re
import string
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers import NVCC, git
from helpers.ptx_support import apply

PARAMS = ("CArray<{tin}, {in_ndim}> _raw_in0, CArray<{tout}, {out_ndim}> _raw_out0, CIndexer<{in_ndim}> _in_ind, "
          "CIndexer<{out_ndim}> _out_ind, int _block_stride, CArray<unsigned char, 1> _lg_part, "
          "CArray<unsigned int, 1> _lg_count, int _lg_nsplit")


def applied_in_order(tmp_path_factory: pytest.TempPathFactory, label: str, *steps: str) -> Path:
    """The chainer-1.24 recipe applied strictly to the real sdist; `steps` must be in its ledger, in this order."""
    tree, report = apply(tmp_path_factory.mktemp(label), "chainer-1.24")
    applied = [a["step"] for a in report["applied"]]
    assert all(step in applied for step in steps), applied
    assert [applied.index(step) for step in steps] == sorted(applied.index(step) for step in steps), applied
    return tree


def commit_of(tree: Path, step: str) -> str:
    """The ledger commit of `step` ("patchset/step-id") in an applied tree."""
    for line in git(tree, "log", "--format=%H %s").splitlines():
        if line.endswith(f"lgpatch: {step}"):
            return line.split()[0]
    raise AssertionError(f"{step} is not in the ledger of {tree}")


def text_at(tree: Path, step: str, path: str) -> str:
    """`path` as it was right after `step`."""
    return git(tree, "show", f"{commit_of(tree, step)}:{path}") + "\n"


def template(pxi: str) -> str:
    found = re.search(r"module_code = string\.Template\('''(.*?)'''\)", pxi, re.S)
    assert found, "reduction.pxi has no kernel template"
    return found.group(1)


def render(pxi: str, name: str, reduce_type: str, tin: str, tout: str, identity: str, pre: str, reduce: str,
           post: str, preamble: str = "", in_ndim: int = 1, out_ndim: int = 0) -> str:
    params = PARAMS.format(tin=tin, tout=tout, in_ndim=in_ndim, out_ndim=out_ndim)
    return string.Template(template(pxi)).substitute(
        name=name, block_size=512, reduce_type=reduce_type, params=params, identity=identity, reduce_expr=reduce,
        pre_map_expr=pre, post_map_expr=post, preamble=preamble,
        type_preamble=f"typedef {tin} type_in0_raw; typedef {tout} type_out0_raw;",
        input_expr="const type_in0_raw in0 = _raw_in0[_in_ind.get()];",
        output_expr="type_out0_raw &out0 = _raw_out0[_out_ind.get()];")


def kernels(pxi: str, core: str) -> dict[str, str]:
    """CuPy's sum, a float16 mean over an axis, argmax of doubles (its struct reduce type and _J pre-map) and a
    float16 max, each a complete .cu source body (prepend carray.cuh)."""
    min_max = re.search(r"cdef _min_max_preamble = '''(.*?)'''", core, re.S)
    assert min_max
    return {
        "sum_float": render(pxi, "cupy_sum", "float", "float", "float", "0", "in0", "a + b", "out0 = a"),
        "mean_float16_2d": render(pxi, "cupy_mean", "float", "float16", "float16", "0", "in0", "a + b",
                                  "out0 = a / (_in_ind.size() / _out_ind.size())", in_ndim=2, out_ndim=1),
        "argmax_double": render(pxi, "cupy_argmax", "min_max_st<type_in0_raw>", "double", "long long", "",
                                "min_max_st<type_in0_raw>(in0, _J)", "my_argmax_float(a, b)", "out0 = a.index",
                                min_max.group(1)),
        "max_float16": render(pxi, "cupy_max", "min_max_st<type_in0_raw>", "float16", "float16", "",
                              "min_max_st<type_in0_raw>(in0)", "my_max_float(a, b)", "out0 = a.value",
                              min_max.group(1)),
    }


def python_function(pxi: str, name: str) -> dict:
    """A plain-Python `def` of reduction.pxi and the module's integer _LG_ constants, exec'd into a namespace."""
    consts = re.findall(r"^(_LG_[A-Z_]+ = (?:0x[0-9a-fA-F]+|\d+))[ \t]*(?:#.*)?$", pxi, re.M)
    body = re.search(rf"^def {name}\(.*?(?=^\S)", pxi, re.S | re.M)
    assert consts and body, name
    namespace: dict = {}
    exec("\n".join(consts) + "\n" + body.group(0), namespace)
    return namespace


def assert_compiles(header: str, source: str, tmp_path: Path, kind: str, arch: str) -> None:
    """nvcc --cubin/--ptx of carray.cuh + a rendered kernel; a PTX must hold the kernel's entry and the split's
    arrival counter (atom.global.add.u32)."""
    assert NVCC
    (tmp_path / "kern.cu").write_text(header + source)
    proc = subprocess.run([NVCC, f"--{kind}", "-arch", arch, "kern.cu"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"nvcc --{kind} -arch {arch} failed:\n{proc.stdout}{proc.stderr}"
    if kind == "ptx":
        text = (tmp_path / "kern.ptx").read_text()
        assert re.search(r"\.entry\s+cupy_\w+", text) and "atom.global.add.u32" in text


def bench_modules() -> tuple[Any, Any]:
    """bench/gpu/_reduction_runs.py and reduction_variants.py (the GPU scripts of the axes (0,2,3) sum's parts)."""
    import importlib
    import sys

    from helpers import REPO

    sys.path.insert(0, str(REPO / "bench" / "gpu"))
    try:
        return importlib.import_module("_reduction_runs"), importlib.import_module("reduction_variants")
    finally:
        sys.path.remove(str(REPO / "bench" / "gpu"))
