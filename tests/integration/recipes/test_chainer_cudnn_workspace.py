"""chainer-cudnn-workspace on the real Chainer 1.24.0 sdist: it applies (strict) after chainer-cudnn-algo-cache as
one commit on convolution_2d.py and cuda.py; every cuDNN call site sizes its workspace through the new function;
and that function, run as plain Python from the patched file with cuDNN's queries and CuPy's allocation replaced
by recording fakes, picks the algorithm for the right limit, sizes the workspace to it (asked once per problem),
keeps a limit the program set, and falls back to Chainer's 8 MiB only on an allocation failure under the default.

On the GPU, bench/gpu/chainer_reduction_check.py (check_conv_workspace) runs the real thing: the default limit
against im2col, the workspace sized to the algorithm, and the fallback with the GPU's memory almost all taken.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helpers import git
from helpers.chainer_cpu import assert_gated_to_cudnn_builds_from_cuda_9
from helpers.reduction_template import applied_in_order, commit_of, text_at

pytestmark = [pytest.mark.integration]

STEP = "chainer-cudnn-workspace/conv2d-workspace-by-algorithm"
ALGO_CACHE = "chainer-cudnn-algo-cache/conv2d-algo-cache"
CONV2D = "chainer/functions/connection/convolution_2d.py"
CUDA = "chainer/cuda.py"
MIB = 1 << 20


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "cudnn-workspace", ALGO_CACHE, STEP)


def test_gated_like_the_algorithm_cache(lgpatch) -> None:
    assert_gated_to_cudnn_builds_from_cuda_9(lgpatch, STEP)


def test_one_commit_and_every_call_site_sized_by_the_algorithm(tree: Path) -> None:
    commit = commit_of(tree, STEP)
    assert sorted(git(tree, "show", "--name-only", "--format=", commit).split()) == [CUDA, CONV2D]
    text = text_at(tree, STEP, CONV2D)
    # No whole-limit allocation is left; the three sites pass query and size query to the new function.
    assert "cuda.cupy.empty((workspace_size,), dtype='b')" not in text
    for query in ("ForwardAlgorithm", "BackwardFilterAlgorithm", "BackwardDataAlgorithm"):
        assert f"libcudnn.getConvolution{query},\n" in text, query
        size = query.replace("Algorithm", "WorkspaceSize")
        assert f"libcudnn.getConvolution{size},\n" in text, size
    assert text.count("algo, workspace = _lg_algorithm_and_workspace(") == 3
    assert text.count("workspace_size = workspace.size") == 3
    # deterministic=True keeps its fixed algorithms, now with a workspace of their size.
    assert text.count("fixed = cuda.cupy.cuda.cudnn.CUDNN_CONVOLUTION_BWD_") == 2
    cuda_py = text_at(tree, STEP, CUDA)
    assert "_max_workspace_size = 8 * 1024 * 1024\n" in cuda_py  # Chainer's own default, untouched
    assert "    _lg_workspace_size_set = True\n" in cuda_py


class CUDARuntimeError(RuntimeError):
    def __init__(self, status: int) -> None:
        super().__init__(f"status {status}")
        self.status = status


class Fakes:
    """Chainer's cuda module as the patched functions see it: the limit and its flag, the device id, and an
    allocator that fails (with a CUDA status) above `free` bytes."""

    def __init__(self) -> None:
        self.limit, self.set, self.device, self.free = 8 * MIB, False, 0, 1 << 40
        self.allocated: list[int] = []
        fakes = self

        class Runtime:
            pass
        Runtime.CUDARuntimeError = CUDARuntimeError  # type: ignore[attr-defined]

        class Array:
            def __init__(self, size: int) -> None:
                self.size = size

        def empty(shape: tuple, dtype: str) -> Array:
            assert dtype == "b"
            if shape[0] > fakes.free:
                raise CUDARuntimeError(fakes.status)
            fakes.allocated.append(shape[0])
            return Array(shape[0])
        self.status = 2
        cupy_cuda = type("CupyCuda", (), {"runtime": Runtime, "get_device_id": staticmethod(lambda: fakes.device)})
        self.module = type("ChainerCuda", (), {
            "cupy": type("Cupy", (), {"cuda": cupy_cuda, "empty": staticmethod(empty)}),
            "get_max_workspace_size": staticmethod(lambda: fakes.limit)})

    def sync(self) -> None:
        self.module._lg_workspace_size_set = self.set  # type: ignore[attr-defined]


def patched_functions(tree: Path, fakes: Fakes) -> dict[str, Any]:
    text = text_at(tree, STEP, CONV2D)
    body = re.search(r"^_lg_algorithms = \{\}$.*?(?=^def _pair|^def _check_cudnn|^class )", text, re.S | re.M)
    assert body and "def _lg_algorithm_and_workspace(" in body.group(0)
    namespace: dict[str, Any] = {"cuda": fakes.module}
    exec(body.group(0), namespace)
    return namespace


def recording_queries(needs: dict[int, int]) -> tuple[list, list, Any, Any]:
    """An algorithm query answering 1 for limits >= 512 MiB and 0 below (the H200's answer at batch 32), and a
    size query answering `needs[algo]`; both record their calls."""
    asked: list[tuple] = []
    sized: list[tuple] = []

    def query(*args: Any) -> int:
        asked.append(args)
        return 1 if args[-1] >= 512 * MIB else 0

    def size_query(*args: Any) -> int:
        sized.append(args)
        return needs[args[-1]]
    return asked, sized, query, size_query


KEY = ("fwd", (32, 32, 112, 112), (64, 32, 3, 3), 1, 1, 1, 1, "<f4")
ARGS = ("handle", "x", "W", "conv", "y")


def test_default_limit_is_512_mib_with_a_workspace_of_the_algorithms_size(tree: Path) -> None:
    fakes = Fakes()
    fakes.sync()
    ns = patched_functions(tree, fakes)
    asked, sized, query, size_query = recording_queries({1: 154214547, 0: 0})
    for _ in range(3):
        algo, workspace = ns["_lg_algorithm_and_workspace"](KEY, query, size_query, ARGS, "pref")
        assert (algo, workspace.size) == (1, 154214547)
    assert asked == [(*ARGS, "pref", 512 * MIB)]          # asked once, with the default limit
    assert sized == [(*ARGS, 1)]                            # sized once per problem and algorithm
    assert fakes.allocated == [154214547] * 3               # never the whole limit


def test_a_limit_the_program_set_is_kept(tree: Path) -> None:
    fakes = Fakes()
    fakes.set, fakes.limit = True, 8 * MIB
    fakes.sync()
    ns = patched_functions(tree, fakes)
    asked, _, query, size_query = recording_queries({1: 154214547, 0: 1024})
    assert ns["_lg_algorithm_and_workspace"](KEY, query, size_query, ARGS, "pref")[0] == 0
    assert asked[-1][-1] == 8 * MIB
    fakes.limit = 2048 * MIB
    assert ns["_lg_algorithm_and_workspace"](KEY, query, size_query, ARGS, "pref")[0] == 1
    assert asked[-1][-1] == 2048 * MIB


def test_allocation_failure_under_the_default_falls_back_to_8_mib_and_nothing_else_does(tree: Path) -> None:
    fakes = Fakes()
    fakes.sync()
    ns = patched_functions(tree, fakes)
    _, _, query, size_query = recording_queries({1: 154214547, 0: 4096})
    fakes.free = 100 * MIB
    algo, workspace = ns["_lg_algorithm_and_workspace"](KEY, query, size_query, ARGS, "pref")
    assert (algo, workspace.size) == (0, 4096)
    # Another CUDA error is not an allocation failure: raised as it is.
    fakes.status = 700
    with pytest.raises(CUDARuntimeError):
        ns["_lg_algorithm_and_workspace"](KEY, query, size_query, ARGS, "pref")
    # A limit the program chose is its decision: the failure is raised, not hidden by another algorithm.
    fakes.status, fakes.set, fakes.limit = 2, True, 1024 * MIB
    fakes.sync()
    with pytest.raises(CUDARuntimeError):
        ns["_lg_algorithm_and_workspace"](KEY, query, size_query, ARGS, "pref")
    # A fixed algorithm (deterministic=True) has no other to fall back to.
    fakes.set = False
    fakes.sync()
    with pytest.raises(CUDARuntimeError):
        ns["_lg_algorithm_and_workspace"](KEY, query, size_query, ARGS, "pref", 1)


def test_fixed_algorithm_gets_its_own_size_and_sizes_are_per_device_and_bounded(tree: Path) -> None:
    fakes = Fakes()
    fakes.sync()
    ns = patched_functions(tree, fakes)
    asked, sized, query, size_query = recording_queries({1: 333, 0: 0})
    algo, workspace = ns["_lg_algorithm_and_workspace"](KEY, query, size_query, ARGS, "pref", 1)
    assert (algo, workspace.size, asked) == (1, 333, [])
    fakes.device = 1
    ns["_lg_algorithm_and_workspace"](KEY, query, size_query, ARGS, "pref", 1)
    assert len(sized) == 2  # another GPU: sized again
    limit = ns["_LG_MAX_ALGORITHMS"]
    for n in range(limit + 10):
        ns["_lg_workspace_size"](("fwd", (n,)), size_query, ARGS, 1)
    assert len(ns["_lg_workspace_sizes"]) <= limit
