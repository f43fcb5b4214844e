"""cupy-ufunc-dtype-loop on the real Chainer 1.24.0 sdist: it applies (strict) as one commit on elementwise.pxi, and
the loop choice for dtype= it leaves, run as Python against every ufunc and reduction table in CuPy 1.24's
core.pyx, takes the loop whose types all equal dtype where one exists (true_divide in float64: 'dd->d', where CuPy
1.24 took 'bb->d' and cast 500 to int8 -12) and CuPy 1.24's choice everywhere else.

On the GPU, bench/gpu/chainer_sce_reference.py runs Chainer 1.24's softmax cross-entropy (whose float64 mean went
through that loop) against NumPy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy
import pytest
from helpers import git
from helpers.cupy_pxi import cdef_function
from helpers.cupy_pxi import op_tables as cupy_op_tables
from helpers.reduction_template import applied_in_order, commit_of, text_at

pytestmark = [pytest.mark.integration]

STEP = "cupy-ufunc-dtype-loop/dtype-loop"
NUMPY2 = "chainer-numpy2/nep50-value-casting"
PXI = "cupy/core/elementwise.pxi"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "ufunc-dtype-loop", NUMPY2, STEP)


def test_gated_to_builds_that_generate_cupys_cpp(lgpatch) -> None:
    # Below 3.7 the sdist's shipped C++ is compiled, not the .pxi: the step would change nothing there.
    for python, selected in (("3.6", False), ("3.7", True), ("3.12", True)):
        r = lgpatch("show", "chainer-1.24", "--python", python, "--json")
        assert r.code == 0, r.err
        steps = {s["step"]: s["selected"] for s in json.loads(r.out)["steps"]}
        assert steps[STEP] is selected, python
        assert steps["chainer-stale-generated/cythonize-into-build"] is selected  # fresh C++ from the .pyx/.pxi


def test_one_commit_on_elementwise_pxi(tree: Path) -> None:
    assert git(tree, "show", "--name-only", "--format=", commit_of(tree, STEP)).split() == [PXI]


def choice_function(pxi: str) -> Any:
    """_guess_routine_from_dtype as Python: the cdef signature and its cdef locals line made plain."""
    return cdef_function(pxi, "_guess_routine_from_dtype", "ops, dtype", {})


def op_tables(tree: Path) -> dict[str, list[tuple]]:
    return cupy_op_tables(tree, STEP)


def test_true_divide_in_float64_takes_the_double_loop(tree: Path) -> None:
    tables = op_tables(tree)
    ops = tables["cupy_true_divide"]
    old, new = choice_function(text_at(tree, NUMPY2, PXI)), choice_function(text_at(tree, STEP, PXI))
    d, f, e = numpy.float64, numpy.float32, numpy.float16
    assert old(ops, d)[0] == (numpy.int8, numpy.int8)  # the bug: 500 cast to int8
    assert new(ops, d)[0] == (d, d) and new(ops, f)[0] == (f, f) and new(ops, e)[0] == (e, e)
    assert new(ops, numpy.int64) is None and old(ops, numpy.int64) is None


def test_every_table_and_dtype_gets_an_all_dtype_loop_or_cupy_124s_choice(tree: Path) -> None:
    tables = op_tables(tree)
    assert len(tables) >= 40 and "cupy_sum" in tables, sorted(tables)  # the tables written as literals
    old, new = choice_function(text_at(tree, NUMPY2, PXI)), choice_function(text_at(tree, STEP, PXI))
    changed = []
    for name, ops in tables.items():
        for char in "?bBhHiIlLqQefd":
            dtype = numpy.dtype(char).type
            got, before = new(ops, dtype), old(ops, dtype)
            assert (got is None) == (before is None), (name, char)
            if got is not before:
                assert all(t == dtype for t in got[0] + got[1]), (name, char, got)
                changed.append((name, char))
    assert ("cupy_true_divide", "d") in changed
