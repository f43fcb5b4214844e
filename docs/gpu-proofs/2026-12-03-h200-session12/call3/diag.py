import statistics
import sys
import time

sys.path.insert(0, "bench/gpu")
import chainer
import chainer.function
import cupy
import numpy
from _speed_workloads import chainer_models
from chainer import _cudnn_graph, cuda

counts = {"plan": 0, "make": 0}
orig_plan, orig_make = _cudnn_graph._plan, _cudnn_graph._Made.make


def plan(*a, **k):
    counts["plan"] += 1
    return orig_plan(*a, **k)


def make(self, kind, *a, **k):
    counts["make"] += 1
    return orig_make(self, kind, *a, **k)


_cudnn_graph._plan = plan
_cudnn_graph._Made.make = make
Inspection = chainer_models()[0]
rng = numpy.random.RandomState(0)
model = Inspection()
model.to_gpu()
x = cuda.to_gpu(rng.randn(1, 3, 224, 224).astype("f"))
cls = chainer.function.Function


def step(tc):
    saved, cls.type_check_enable = cls.type_check_enable, tc
    try:
        return model(chainer.Variable(x, volatile="on"))
    finally:
        cls.type_check_enable = saved


def us(tc, graph, n=300):
    _cudnn_graph.enabled = graph
    step(tc)
    cupy.cuda.Device().synchronize()
    c0 = dict(counts)
    t = time.perf_counter()
    for _ in range(n):
        step(tc)
    e = time.perf_counter() - t
    cupy.cuda.Device().synchronize()
    return e / n * 1e6, {k: counts[k] - c0[k] for k in counts}



if len(sys.argv) > 1:  # free the pool between batches, as the bench's worker does at a case switch
    _us = us

    def us(tc, graph, n=300):
        cuda.memory_pool.free_all_blocks()
        return _us(tc, graph, n)


res = {}
for r in range(5):
    for tc in (True, False):
        for g in (True, False) if r % 2 == 0 else (False, True):
            v, c = us(tc, g)
            res.setdefault((tc, g), []).append(v)
            if r == 0:
                print("type_check", tc, "graph", g, f"{v:.1f} us", c, flush=True)
for k, v in res.items():
    print(f"type_check={k[0]} graph={k[1]} median {statistics.median(v):.1f} us [{min(v):.1f}-{max(v):.1f}]")
t = getattr(_cudnn_graph._local, "tables", None)
print("plans", len(t.plans), "packs", len(t.packs))
