"""cupy-reduction-grid on the real Chainer 1.24.0 sdist: it applies (strict) as one step of the recipe, the kernel
template it changes compiles with the real nvcc for sm_90 (and PTX for compute_75), its launch-shape function
matches a reference, and a model of the kernel's index mapping, tied to the template's own expressions, reduces
every element exactly once and gives NumPy's results (sum, argmax with ties, mean's size-based post-map).

The templates are rendered the way cupy/core/reduction.pxi's _get_simple_reduction_kernel does (string.Template
with the same keys), from the patched file as this step left it (cupy-reduction-layout changes it again; its tests
are in test_cupy_reduction_layout.py), with the min/max preamble from the patched core.pyx. The chainer-cudnn-
algo-cache tests read convolution_2d.py as that step left it (chainer-cudnn-workspace follows it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy
import pytest
from helpers import git, reduction_template, requires_nvcc
from helpers.chainer_cpu import assert_gated_like_the_speed_steps, assert_gated_to_cudnn_builds_from_cuda_9
from helpers.reduction_template import applied_in_order, commit_of, text_at

pytestmark = [pytest.mark.integration]

STEP = "cupy-reduction-grid/reduction-split-grid"
PXI = "cupy/core/reduction.pxi"
ALGO_CACHE = "chainer-cudnn-algo-cache/conv2d-algo-cache"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return applied_in_order(tmp_path_factory, "chainer-speed", STEP)


def pxi_at_step(tree: Path) -> str:
    return text_at(tree, STEP, PXI)


def template(tree: Path) -> str:
    return reduction_template.template(pxi_at_step(tree))


def split_function(tree: Path) -> Any:
    """_lg_reduction_split and its constants as this step left reduction.pxi, run as plain Python."""
    return reduction_template.python_function(pxi_at_step(tree), "_lg_reduction_split")["_lg_reduction_split"]


def kernels(tree: Path) -> dict[str, str]:
    return reduction_template.kernels(pxi_at_step(tree), text_at(tree, STEP, "cupy/core/core.pyx"))


def test_step_is_gated_to_cuda_9_and_newer(lgpatch) -> None:
    assert_gated_like_the_speed_steps(lgpatch, STEP)


def test_applies_as_one_commit_touching_only_reduction_pxi(tree: Path) -> None:
    files = git(tree, "show", "--name-only", "--format=", commit_of(tree, STEP)).split()
    assert files == [PXI]


@requires_nvcc
@pytest.mark.nvcc
@pytest.mark.parametrize(("kind", "arch"), [("cubin", "sm_90"), ("ptx", "compute_75")])
@pytest.mark.parametrize("kernel", ["sum_float", "mean_float16_2d", "argmax_double", "max_float16"])
def test_patched_template_compiles(tree: Path, tmp_path: Path, kernel: str, kind: str, arch: str) -> None:
    reduction_template.assert_compiles(text_at(tree, STEP, "cupy/core/carray.cuh"), kernels(tree)[kernel], tmp_path,
                                       kind, arch)


def reference_split(in_size: int, out_size: int, block_stride: int, block_size: int, sm_count: int) -> int:
    """Independent statement of the rule: the most blocks per output (at most 1024, and together no more than
    the rounded-up share of 4 resident blocks per SM) such that every thread gets at least 8 elements."""
    if block_stride != 1 or out_size == 0 or out_size >= 4 * sm_count:
        return 1
    best = 1
    for s in range(1, 1025):
        fits_slots = (s - 1) * out_size < 4 * sm_count
        enough_work = (in_size // out_size) >= s * block_size * 8
        if fits_slots and enough_work:
            best = s
    return best


@pytest.mark.parametrize("sm_count", [1, 24, 80, 132])
def test_split_matches_reference(tree: Path, sm_count: int) -> None:
    split = split_function(tree)
    rng = numpy.random.RandomState(sm_count)
    cases = [(6422528, 1, 1), (0, 1, 1), (4096, 1, 1), (8192, 1, 1), (8191, 1, 1), (6422528, 64, 1),
             (100003 * 3, 3, 1), (6422528, 1, 2), (1 << 30, 1, 1), (528 * 8192, 528, 1), (527 * 8192, 527, 1)]
    cases += [(int(rng.randint(1, 1 << 26)), int(rng.randint(1, 700)), 1) for _ in range(300)]
    for in_size, out_size, stride in cases:
        in_size -= in_size % max(out_size, 1)
        want = reference_split(in_size, out_size, stride, 512, sm_count)
        assert split(in_size, out_size, stride, 512, sm_count) == want, (in_size, out_size, stride, sm_count)
    # The seed's full reduction on an H200: the whole GPU, not one block.
    assert split(6422528, 1, 1, 512, 132) == 528


def simulate(x: numpy.ndarray, block_size: int, nsplit: int, pre, reduce, identity) -> list:
    """The split kernel's work division, per the template's index expressions (asserted in the test): block b
    serves output b // nsplit, slice b % nsplit; its thread t visits J = t + slice*B, stepping B*nsplit. The
    block's partial is combined in slice order by the last block (order is irrelevant for these reductions)."""
    reduced, out_size = x.shape
    results = []
    for i in range(out_size):
        partials, seen = [], []
        for s in range(nsplit):
            acc = identity
            for t in range(block_size):
                for j in range(t + s * block_size, reduced, block_size * nsplit):
                    acc = reduce(acc, pre(x[j, i], j))
                    seen.append(j)
            partials.append(acc)
        assert sorted(seen) == list(range(reduced))
        total = identity
        for p in partials:
            total = reduce(total, p)
        results.append(total)
    return results


def test_index_mapping_model_gives_numpy_results(tree: Path) -> None:
    kernel = template(tree)
    for expr in ("int _lg_slice = blockIdx.x % _lg_nsplit;",
                 "int _J_offset = _tid / _block_stride + _lg_slice * ${block_size};",
                 "int _J_stride = ${block_size} * _lg_nsplit;",
                 "_i_base = (blockIdx.x / _lg_nsplit) * _block_stride;",
                 "POST_MAP(_s);"):
        assert expr in kernel, expr
    # The last block applies POST_MAP with the original indexers: mean's size-based post-map is unchanged.
    assert "(_lg_nsplit == 1 || _lg_is_last)" in kernel
    rng = numpy.random.RandomState(0)
    x = rng.randint(-3, 4, size=(3000, 3)).astype("d")
    for nsplit in (1, 2, 7):
        sums = simulate(x, 16, nsplit, lambda v, j: v, lambda a, b: a + b, 0.0)
        assert sums == list(x.sum(axis=0))
        means = [s / (x.size / 3) for s in sums]
        assert numpy.allclose(means, x.mean(axis=0))

        def argmax(a, b):
            if a is None:
                return b
            if b is None:
                return a
            if a[0] == b[0]:
                return (a[0], min(a[1], b[1]))
            return a if a[0] >= b[0] else b
        got = simulate(x, 16, nsplit, lambda v, j: (v, j), argmax, None)
        assert [g[1] for g in got] == list(x.argmax(axis=0))


def test_block_size_and_shared_memory_bounds(tree: Path) -> None:
    """The partial buffer and the shared memory both assume sizeof(reduce type) <= 32 bytes; the kernel's
    final combine loops over at most _LG_MAX_SPLIT partials with a 512-thread block."""
    pxi = pxi_at_step(tree)
    # Partials for fewer than 2 * slots (split * outputs < slots + outputs, outputs < slots) of 32 bytes each.
    assert "buffers = (ndarray((32 * 2 * slots,), numpy.uint8), count)" in pxi
    assert pxi.count("shared_mem = 32 * block_size") == 2
    split = split_function(tree)
    assert max(split(1 << 40, 1, 1, 512, n) for n in (1, 132, 1000)) == 1024


def old_launch(in_size: int, out_size: int, block_size: int = 512) -> tuple[int, int]:
    """CuPy 1.24's (grid, block) for a reduction: block_stride from the reduced length rounded up to a power of
    2, then Function.linear_launch(ceil(out / block_stride) * block_size, block_max_size=block_size)."""
    clp2_count = 1 << int.bit_length(int(in_size // out_size - 1))
    block_stride = max(1, block_size // clp2_count)
    size = (out_size + block_stride - 1) // block_stride * block_size
    return min(size // block_size + 1, 65536), min(size, block_size)


def new_launch(split, in_size: int, out_size: int, sm_count: int = 132, block_size: int = 512) -> tuple[int, int]:
    """The patched _lg_launch: CuPy 1.24's launch when the split is 1, else out_size * split blocks."""
    clp2_count = 1 << int.bit_length(int(in_size // out_size - 1))
    block_stride = max(1, block_size // clp2_count)
    nsplit = split(in_size, out_size, block_stride, block_size, sm_count)
    return old_launch(in_size, out_size, block_size) if nsplit == 1 else (out_size * nsplit, block_size)


# (what, reduced elements in total, outputs, blocks per output on an H200 after the patch): the bench's
# reductions and the ones Chainer 1.24 makes inside the ops whose times moved between the two H200 runs.
LAUNCH_TABLE = [
    ("sum/max/argmax full 6.4M", 6422528, 1, 528),
    ("sum axis 0 of 6272x1024", 6422528, 1024, 1),
    ("sum axis -1 of 6272x1024", 6422528, 6272, 1),
    ("sum axes (0,2,3) of 8x64x112x112 (= broadcast_to backward, im2col conv bias grad)", 6422528, 64, 9),
    ("softmax_cross_entropy 4096x1000: (t != ignore).sum()", 4096, 1, 1),
    ("softmax_cross_entropy 4096x1000: crossent_fwd cuda.reduce", 4096, 1, 1),
    ("log_softmax without cuDNN: max/sum axis 1 of 4096x1000", 4096000, 4096, 1),
    ("softmax_cross_entropy train step b32: count", 32, 1, 1),
    ("sum full 64M", 1 << 26, 1, 528),
    ("sum axis 0 of 65536x1024", 1 << 26, 1024, 1),
    ("sum axis -1 of 65536x1024", 1 << 26, 65536, 1),
    ("sum axes (0,2,3) of 32x64x128x256", 1 << 26, 64, 9),
    ("softmax_cross_entropy 65536x1000: count", 65536, 1, 16),
    ("per-row sum, 528 outputs (the slot limit)", 528 * 8192, 528, 1),
    ("per-row sum, 527 outputs of 8192", 527 * 8192, 527, 2),
]


def test_launch_shapes_old_and_new(tree: Path) -> None:
    """Shapes that had enough blocks keep CuPy 1.24's launch exactly (and the unsplit branch calls linear_launch
    with CuPy 1.24's own arguments); only few outputs over a long axis get more blocks."""
    pxi = pxi_at_step(tree)
    clp2 = "clp2_count = 1 << int.bit_length(\n            int(in_indexer.size // out_indexer.size - 1))"
    assert pxi.count(clp2) == 2
    assert pxi.count("block_stride = max(1, block_size // clp2_count)") == 2
    assert ("        kern.linear_launch(\n            (out_indexer.size + block_stride - 1) // block_stride *\n"
            "            block_size, inout_args, shared_mem, block_size, stream)") in pxi
    split = split_function(tree)
    lines = []
    for what, in_size, out_size, want_split in LAUNCH_TABLE:
        old, new = old_launch(in_size, out_size), new_launch(split, in_size, out_size)
        lines.append(f"{what}: {old} -> {new}")
        if want_split == 1:
            assert new == old, lines[-1]
        else:
            assert new == (out_size * want_split, 512), lines[-1]
    print("\n".join(lines))


CONV2D = "chainer/functions/connection/convolution_2d.py"


def test_algo_cache_is_gated_to_cudnn_builds_from_cuda_9(lgpatch) -> None:
    assert_gated_to_cudnn_builds_from_cuda_9(lgpatch, ALGO_CACHE)


def test_algo_cache_applies_to_convolution_2d_only_and_routes_every_query(tree: Path) -> None:
    log = git(tree, "log", "--format=%H %s")
    commit = next(line.split()[0] for line in log.splitlines() if "conv2d-algo-cache" in line)
    assert git(tree, "show", "--name-only", "--format=", commit).split() == [CONV2D]
    text = text_at(tree, ALGO_CACHE, CONV2D)
    for query in ("getConvolutionForwardAlgorithm", "getConvolutionBackwardFilterAlgorithm",
                  "getConvolutionBackwardDataAlgorithm"):
        # the query is only passed to the cache, never called directly
        assert text.count(f"libcudnn.{query},") == 1 and f"libcudnn.{query}(" not in text, query
    for direction in ("'fwd'", "'bwd_filter'", "'bwd_data'"):
        assert f"({direction}, x.shape, W.shape, self.sy, self.sx" in text
    assert text.count("x.dtype.str, workspace_size),") == 3


def cache_function(tree: Path, device: list[int]) -> tuple[Any, dict]:
    """_lg_algorithm and its dict from the patched file, run as plain Python; the device id comes from `device`
    (what cupy.cuda.get_device_id answers on a GPU)."""
    text = text_at(tree, ALGO_CACHE, CONV2D)
    body = re.search(r"^_lg_algorithms = \{\}$.*?^    return algo$", text, re.S | re.M)
    assert body
    cupy = type("CuPy", (), {"cuda": type("Cuda", (), {"get_device_id": staticmethod(lambda: device[0])})})
    namespace: dict[str, Any] = {"cuda": type("ChainerCuda", (), {"cupy": cupy})}
    exec(body.group(0), namespace)
    return namespace["_lg_algorithm"], namespace


def test_algo_cache_asks_once_per_device_and_problem(tree: Path) -> None:
    device = [0]
    cached, namespace = cache_function(tree, device)
    asked: list[tuple] = []

    def query(*args: Any) -> int:
        asked.append(args)
        return 100 + len(asked)
    fwd = ("fwd", (1, 3, 224, 224), (32, 3, 3, 3), 1, 1, 1, 1, "<f4", 8 << 20)
    assert [cached(fwd, query, "handle", 2) for _ in range(5)] == [101] * 5
    assert asked == [("handle", 2)]
    assert cached((*fwd[:-1], 512 << 20), query, "handle", 2) == 102  # another workspace limit: asked again
    assert cached(("bwd_data", *fwd[1:]), query) == 103
    device[0] = 1
    assert cached(fwd, query, "handle", 2) == 104  # another GPU: asked again
    device[0] = 0
    assert cached(fwd, query, "handle", 2) == 101 and len(asked) == 4
    # Bounded: a run over more distinct problems than the limit clears the dict instead of growing it.
    limit = namespace["_LG_MAX_ALGORITHMS"]
    for n in range(limit + 10):
        cached(("fwd", (n,)), query)
    assert len(namespace["_lg_algorithms"]) <= limit


def test_split_buffers_are_made_once_per_device_and_stream_and_reset_by_the_kernel(tree: Path) -> None:
    """No allocation, memset or sync per split reduction: the partials and counters of a (device, stream) are made
    and zeroed once, and the last block of each output puts its counter back to zero for the next kernel."""
    pxi = pxi_at_step(tree)
    args = re.search(r"^cpdef list _lg_split_args\(.*?(?=^\S)", pxi, re.S | re.M)
    buffers = re.search(r"^cdef tuple _lg_buffers\(.*?(?=^\S)", pxi, re.S | re.M)
    assert args and buffers
    assert "memsetAsync" not in args.group(0) and "ndarray((32" not in args.group(0)
    assert "_lg_buffers(device_id, 0 if stream is None else stream.ptr)" in args.group(0)
    body = buffers.group(0)
    assert "key = (device_id, stream_ptr)" in body and "_lg_split_buffers[key] = buffers" in body
    assert body.index("memsetAsync(count.data.ptr, 0, 4 * slots") < body.index("deviceSynchronize()")
    kernel = template(tree)
    last = kernel[kernel.index("if (_lg_is_last) {"):]
    assert "if (_tid == 0) _lg_count[_i] = 0u;" in last[:last.index("POST_MAP(_s);")]
    # The buffers hold the largest split the launch rule allows, for every GPU size.
    split = split_function(tree)
    for sm_count in (1, 24, 80, 132, 1000):
        slots = 4 * sm_count
        for out_size in range(1, slots):
            s = split(1 << 40, out_size, 1, 512, sm_count)
            assert s * out_size < 2 * slots, (sm_count, out_size, s)
