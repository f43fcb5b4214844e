"""cupy-ufunc-scalar-cache on the real Chainer 1.24.0 sdist: it applies (strict) as one commit on elementwise.pxi and
_numpy_compat.py, its key decides every can_cast the NEP 50 shim answers, and CuPy's loop choice for calls with
scalars, run as Python from the patched and the unpatched .pxi against every ufunc table written in CuPy 1.24,
gives the same loop call after call while finding it once per key.

On the GPU, bench/gpu/chainer_cudnn_probe.py --parts layers times `F.relu(x, use_cudnn=False)` (cupy.maximum(x, 0))
at batch 1 before and after.
"""

from __future__ import annotations

import json
import random
import types
from pathlib import Path
from typing import Any

import numpy
import pytest
from helpers import git
from helpers.cupy_pxi import cdef_function, op_tables
from helpers.reduction_template import applied_in_order, commit_of, text_at

pytestmark = [pytest.mark.integration]

STEP = "cupy-ufunc-scalar-cache/scalar-routine-cache"
BEFORE = "cupy-ufunc-dtype-loop/dtype-loop"
PXI = "cupy/core/elementwise.pxi"
COMPAT = "cupy/_numpy_compat.py"
TYPE_CHARS = "?bBhHiIlLqQefdFD"


class DeviceArray:
    """What the loop choice sees of a cupy.ndarray: a dtype (NumPy's can_cast reads the attribute)."""

    def __init__(self, char: str) -> None:
        self.dtype = numpy.dtype(char)


def scalars() -> list[Any]:
    """Scalars as _preprocess_args hands them on (NumPy scalar types), at the edges where NumPy 1.x's value-based
    casting changes its answer: sign, each integer width's limits, float16/32 range, NaN and infinities."""
    ints = [0, 1, -1, 100, 127, 128, -128, -129, 255, 256, 32767, 32768, 65535, 65536, 2**31 - 1, 2**31, -2**31,
            -2**31 - 1, 2**32, 2**63 - 1]
    floats = [0.0, -0.0, 0.5, 2.0, 1e4, 65504.0, 1e5, 3.4e38, 1e39, float("nan"), float("inf"), -float("inf")]
    values: list[Any] = [numpy.bool_(True), numpy.bool_(False)]
    values += [numpy.int64(v) for v in ints] + [numpy.int32(v) for v in ints if -2**31 <= v < 2**31]
    values += [numpy.uint8(200), numpy.int8(-5), numpy.uint64(2**64 - 1), numpy.int16(300)]
    values += [numpy.float64(v) for v in floats] + [numpy.float32(v) for v in floats[:8]] + [numpy.float16(1.5)]
    return values


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "ufunc-scalar-cache", BEFORE, STEP)


def compat(tree: Path, step: str) -> types.ModuleType:
    """cupy/_numpy_compat.py as it was right after `step` (it imports NumPy only)."""
    module = types.ModuleType("_numpy_compat")
    exec(compile(text_at(tree, step, COMPAT), COMPAT, "exec"), module.__dict__)
    return module


def guess_routine(tree: Path, step: str, module: types.ModuleType) -> tuple[Any, list[int]]:
    """_guess_routine and the two functions it calls, as Python from the .pxi after `step`; the list counts how many
    times the loop was looked for in a table (the work the cache saves)."""
    pxi = text_at(tree, step, PXI)
    searches = [0]
    namespace: dict[str, Any] = {"ndarray": DeviceArray, "_numpy_compat": module,
                                 "_kind_score": {"b": 0, "u": 1, "i": 1, "f": 2}}
    cdef_function(pxi, "_check_should_use_min_scalar", "in_args", namespace)
    cdef_function(pxi, "_guess_routine_from_dtype", "ops, dtype", namespace)
    search = cdef_function(pxi, "_guess_routine_from_in_types", "ops, in_types", namespace)

    def counted(ops: list, in_types: tuple) -> Any:
        searches[0] += 1
        return search(ops, in_types)

    namespace["_guess_routine_from_in_types"] = counted
    return cdef_function(pxi, "_guess_routine", "name, cache, ops, in_args, dtype", namespace), searches


def test_gated_to_numpy_2(lgpatch) -> None:
    for numpy_version, selected in (("1.26", False), ("2.0", True), ("2.3", True)):
        r = lgpatch("show", "chainer-1.24", "--python", "3.12", "--param", f"numpy={numpy_version}", "--json")
        assert r.code == 0, r.err
        steps = {s["step"]: s["selected"] for s in json.loads(r.out)["steps"]}
        assert steps[STEP] is selected, numpy_version


def test_one_commit_on_the_loop_choice_and_the_shim(tree: Path) -> None:
    files = git(tree, "show", "--name-only", "--format=", commit_of(tree, STEP)).split()
    assert sorted(files) == [COMPAT, PXI]


def test_the_shims_answers_are_unchanged(tree: Path) -> None:
    # _legacy_smallest was factored out of _legacy_can_cast: every answer the same as the NEP 50 step's.
    old, new = compat(tree, BEFORE), compat(tree, STEP)
    for value in scalars() + [DeviceArray(c) for c in TYPE_CHARS]:
        for char in TYPE_CHARS:
            to = numpy.dtype(char).type
            assert new.can_cast(value, to) == old.can_cast(value, to), (value, char)


def test_equal_keys_give_equal_answers_for_every_type(tree: Path) -> None:
    module = compat(tree, STEP)
    by_key: dict[Any, tuple[bool, ...]] = {}
    for value in scalars() + [DeviceArray(c) for c in TYPE_CHARS]:
        key = module.routine_key([value])
        assert key is not None, value
        answers = tuple(bool(module.can_cast(value, numpy.dtype(c).type)) for c in TYPE_CHARS)
        assert by_key.setdefault(key, answers) == answers, (value, key)
    assert len(set(by_key)) < len(scalars()) + len(TYPE_CHARS)  # values share keys: the cache has something to hit


def test_no_key_where_the_answer_is_not_the_shims(tree: Path) -> None:
    module = compat(tree, STEP)
    assert module.routine_key([object()]) is None  # no dtype
    assert module.routine_key([numpy.str_("a")]) is None  # not numeric
    module.can_cast = numpy.can_cast  # as on NumPy 1.x, whose can_cast is NumPy's own
    assert module.routine_key([DeviceArray("f"), numpy.float64(2.0)]) is None


def ufunc_calls(tree: Path) -> list[tuple[str, list, list]]:
    """Calls of every unary and binary ufunc table with an array and scalars, in a random order."""
    rng = random.Random(17)
    arrays, values = [DeviceArray(c) for c in "?bBhHiIlLqefd"], scalars()
    calls = []
    for name, ops in op_tables(tree, STEP).items():
        nin = len(ops[0][0])
        for _ in range(150 if nin in (1, 2) else 0):
            args = [rng.choice(arrays)] + [rng.choice(values) for _ in range(nin - 1)]
            rng.shuffle(args)
            calls.append((name, ops, args))
    return calls


def test_cached_loops_equal_cupy_124s_choice_on_every_table(tree: Path) -> None:
    """Each call as CuPy makes it (a cache per ufunc), twice over: the patched choice returns the loop the unpatched
    one finds afresh, and the second time round it finds none anew."""
    old_choice, old_searches = guess_routine(tree, BEFORE, compat(tree, BEFORE))
    new_choice, new_searches = guess_routine(tree, STEP, compat(tree, STEP))
    calls = ufunc_calls(tree)
    old_caches: dict[str, dict] = {}
    new_caches: dict[str, dict] = {}
    answered = 0
    for round_ in range(2):
        if round_ == 1:
            searched = (old_searches[0], new_searches[0])
        for name, ops, args in calls:
            try:
                want = old_choice(name, old_caches.setdefault(name, {}), ops, args, None)
            except (TypeError, KeyError) as error:  # no loop (or a complex scalar): the same error either way
                with pytest.raises(type(error)):
                    new_choice(name, new_caches.setdefault(name, {}), ops, args, None)
                continue
            assert new_choice(name, new_caches.setdefault(name, {}), ops, args, None) == want, (name, args)
            answered += 1
    assert answered > 10000
    assert new_searches[0] == searched[1], "the second round found a loop anew"
    assert old_searches[0] - searched[0] > 1000  # CuPy 1.24 searched again for every call with a scalar
