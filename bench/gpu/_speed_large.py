"""Large-input variants of the memory-bound cases (issue 17's bandwidth goal is "on large inputs").

The 6.4 M-float cases of _speed_workloads.py move 25.7 MB, which fits in the H200's 50 MB L2 and takes a few
microseconds of memory time: they measure launch and Python overhead, not bandwidth. Every case here moves
arrays of 2**26 floats (268 MB) or more, several times the L2, so achieved GB/s against the copy bandwidth is a
bandwidth figure. Same builder convention as _speed_workloads.CASES: a factory returns a zero-argument step.
Inputs are generated on the device (no host randoms, no host-to-device copies of 268 MB): the values do not
matter for a memory-bound op, only that they are finite and not all equal.
"""

from __future__ import annotations

import math
from typing import Any

N = 1 << 26  # 67.1 M floats, 268 MB
ROWS = (N // 1024, 1024)  # (65536, 1024)
NCHW = (32, 64, 128, 256)  # N floats
SCE = (65536, 1000)  # softmax cross-entropy at a large batch: 262 MB of scores
F4 = 4

# Minimum bytes each case reads + writes per iteration (the bandwidth column).
BYTES = {
    "sum_full_64M": N * F4, "max_full_64M": N * F4, "argmax_full_64M": N * F4,
    "sum_axis0_65536x1024": N * F4, "sum_axis-1_65536x1024": N * F4,
    "sum_axes023_32x64x128x256": N * F4,
    "elementwise_add_64M": 3 * N * F4,
    "F.sum_fwd_bwd_64M": 2 * N * F4,  # read x; write the broadcast gradient
    "broadcast_add_fwd_bwd_32x64x128x256": 4 * N * F4,  # read x, write y; read gy for the bias gradient
    "max_pool2_fwd_bwd_32x64x128x256": int((2 + 2 * 0.25) * N * F4),
    # A forward and a backward are two calls, and nothing smaller than x can carry the softmax from one to the
    # other: the forward reads x, the backward reads x again and writes gx. (Counting 2 passes, as sessions 8-9
    # did, caps any implementation at 67 % of the copy.)
    "softmax_cross_entropy_fwd_bwd_65536x1000": 3 * SCE[0] * SCE[1] * F4,
}


def chainer_cases() -> dict:
    import chainer
    import chainer.functions as F
    import cupy
    import numpy

    def wave(shape: tuple[int, ...]) -> Any:
        x = cupy.arange(math.prod(shape), dtype=numpy.float32)
        cupy.sin(x, out=x)
        return x.reshape(shape)

    def reduce_case(shape, reduce):
        def factory():
            x = wave(shape)
            return lambda: reduce(x)
        return factory

    cases: dict[str, Any] = {
        "sum_full_64M": reduce_case((N,), lambda x: x.sum()),
        "max_full_64M": reduce_case((N,), lambda x: x.max()),
        "argmax_full_64M": reduce_case((N,), lambda x: x.argmax()),
        "sum_axis0_65536x1024": reduce_case(ROWS, lambda x: x.sum(axis=0)),
        "sum_axis-1_65536x1024": reduce_case(ROWS, lambda x: x.sum(axis=-1)),
        "sum_axes023_32x64x128x256": reduce_case(NCHW, lambda x: x.sum(axis=(0, 2, 3))),
    }

    def add():
        a, b, c = wave((N,)), wave((N,)), cupy.empty(N, numpy.float32)
        return lambda: cupy.add(a, b, out=c)

    def var_sum_bwd():
        x = wave((N,))
        return lambda: F.sum(chainer.Variable(x)).backward()

    def bcast_bwd():
        x, b, gy = wave(NCHW), wave((1, NCHW[1], 1, 1)), cupy.ones(NCHW, numpy.float32)

        def step():
            y = F.broadcast_to(chainer.Variable(b), NCHW) + chainer.Variable(x)
            y.grad = gy
            y.backward()
        return step

    def pool():
        x = wave(NCHW)

        def step():
            y = F.max_pooling_2d(chainer.Variable(x), 2)
            y.grad = cupy.ones_like(y.data)
            y.backward()
        return step

    def sce():
        x = wave(SCE)
        t = (cupy.arange(SCE[0], dtype=numpy.int32) * 7919 % SCE[1]).astype(numpy.int32)
        return lambda: F.softmax_cross_entropy(chainer.Variable(x), chainer.Variable(t)).backward()

    cases.update({"elementwise_add_64M": add, "F.sum_fwd_bwd_64M": var_sum_bwd,
                  "broadcast_add_fwd_bwd_32x64x128x256": bcast_bwd, "max_pool2_fwd_bwd_32x64x128x256": pool,
                  "softmax_cross_entropy_fwd_bwd_65536x1000": sce})
    return cases


def torch_cases() -> dict:
    import torch
    import torch.nn.functional as tf

    dev = torch.device("cuda")

    def wave(shape: tuple[int, ...], grad: bool = False) -> Any:
        x = torch.sin(torch.arange(math.prod(shape), dtype=torch.float32, device=dev))
        return x.reshape(shape).requires_grad_(grad)

    def reduce_case(shape, reduce):
        def factory():
            x = wave(shape)
            return lambda: reduce(x)
        return factory

    cases: dict[str, Any] = {
        "sum_full_64M": reduce_case((N,), lambda x: x.sum()),
        "max_full_64M": reduce_case((N,), lambda x: x.max()),
        "argmax_full_64M": reduce_case((N,), lambda x: x.argmax()),
        "sum_axis0_65536x1024": reduce_case(ROWS, lambda x: x.sum(dim=0)),
        "sum_axis-1_65536x1024": reduce_case(ROWS, lambda x: x.sum(dim=-1)),
        "sum_axes023_32x64x128x256": reduce_case(NCHW, lambda x: x.sum(dim=(0, 2, 3))),
    }

    def add():
        a, b, c = wave((N,)), wave((N,)), torch.empty(N, device=dev)
        return lambda: torch.add(a, b, out=c)

    def var_sum_bwd():
        x = wave((N,), grad=True)

        def step():
            x.grad = None
            x.sum().backward()
        return step

    def bcast_bwd():
        x, b, gy = wave(NCHW, True), wave((1, NCHW[1], 1, 1), True), torch.ones(NCHW, device=dev)

        def step():
            x.grad = b.grad = None
            (b.expand(NCHW) + x).backward(gy)
        return step

    def pool():
        x = wave(NCHW, True)

        def step():
            x.grad = None
            y = tf.max_pool2d(x, 2)
            y.backward(torch.ones_like(y))
        return step

    def sce():
        x = wave(SCE, True)
        t = torch.arange(SCE[0], device=dev) * 7919 % SCE[1]

        def step():
            x.grad = None
            tf.cross_entropy(x, t).backward()
        return step

    cases.update({"elementwise_add_64M": add, "F.sum_fwd_bwd_64M": var_sum_bwd,
                  "broadcast_add_fwd_bwd_32x64x128x256": bcast_bwd, "max_pool2_fwd_bwd_32x64x128x256": pool,
                  "softmax_cross_entropy_fwd_bwd_65536x1000": sce})
    return cases
