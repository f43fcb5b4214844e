"""Max-pool at batch 1: max-pool-small-cudnn's rule (cuDNN below 2^22 elements) against the kernels at every size
(_LG_CUDNN_BELOW = 0), enqueue us."""

import statistics
import sys
import time

sys.path.insert(0, "bench/gpu")
import chainer
import chainer.functions as F
import cupy
import numpy
from _speed_workloads import chainer_models
from chainer.functions.pooling import max_pooling_2d as mp

rng = numpy.random.RandomState(0)


def us(fn, n=300):
    fn()
    cupy.cuda.Device().synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    e = time.perf_counter() - t
    cupy.cuda.Device().synchronize()
    return e / n * 1e6


items = {}
for c, hw in ((32, 224), (64, 112), (128, 56), (64, 56), (32, 448)):
    for b in (1, 8):
        x = cupy.asarray(rng.randn(b, c, hw, hw).astype("f"))
        items[f"max_pool2 {b}x{c}x{hw}x{hw}"] = (
            lambda v: lambda: F.max_pooling_2d(chainer.Variable(v, volatile="on"), 2)
        )(x)
model = chainer_models()[0]()
model.to_gpu()
xi = cupy.asarray(rng.randn(1, 3, 224, 224).astype("f"))
items["inspection b1"] = lambda: model(chainer.Variable(xi, volatile="on"))
for name, fn in items.items():
    s = {True: [], False: []}
    for r in range(7):
        for k in (True, False) if r % 2 == 0 else (False, True):
            mp._LG_CUDNN_BELOW = (1 << 22) if k else 0
            s[k].append(us(fn))
    mp._LG_CUDNN_BELOW = 1 << 22
    a, b = statistics.median(s[True]), statistics.median(s[False])
    print(f"{name}: rule {a:.1f} us, kernels always {b:.1f} us, rule/kernels {a / b:.2f}", flush=True)
