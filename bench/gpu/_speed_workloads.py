"""The computations chainer_speed.py times, each written once for Chainer 1.24 (+ its CuPy) and once for torch.

Every entry of CASES is (name, kind, bytes moved or None, chainer builder, torch builder). A builder takes the
batch-independent setup (arrays on the GPU) and returns a zero-argument step that enqueues one iteration; the
caller synchronizes. `bytes` is what a memory-bound op must read + write at least, for the bandwidth column.
Shapes are the seed's (issue 17): 8x3x224x224 input, 7x7 conv with 64 filters, F.sum + backward on its output.
"""

from __future__ import annotations

from typing import Any

import numpy

SEED_X = (8, 3, 224, 224)
SEED_Y = (8, 64, 112, 112)  # 7x7 conv, stride 2, pad 3
F4 = 4  # bytes per float32


def _n(shape: tuple[int, ...]) -> int:
    return int(numpy.prod(shape))


# ---------------------------------------------------------------- Chainer 1.24
def chainer_models():
    import chainer
    import chainer.functions as F
    import chainer.links as L

    class Inspection(chainer.Chain):
        """Visual-inspection-style CNN: three conv/ReLU/max-pool stages, global average pool, 2 classes."""

        def __init__(self):
            super().__init__(c1=L.Convolution2D(3, 32, 3, pad=1), c2=L.Convolution2D(32, 64, 3, pad=1),
                             c3=L.Convolution2D(64, 128, 3, pad=1), fc=L.Linear(128, 2))

        def __call__(self, x):
            for conv in (self.c1, self.c2, self.c3):
                x = F.max_pooling_2d(F.relu(conv(x)), 2)
            x = F.average_pooling_2d(x, x.shape[2])
            return self.fc(x)

    class VGG(chainer.Chain):
        """VGG-style: eight 3x3 conv layers in four stages, two FC layers (112x112 input)."""

        widths = (64, 128, 256, 512)

        def __init__(self):
            layers, cin = {}, 3
            for s, w in enumerate(self.widths):
                layers[f"c{s}a"] = L.Convolution2D(cin, w, 3, pad=1)
                layers[f"c{s}b"] = L.Convolution2D(w, w, 3, pad=1)
                cin = w
            layers["fc1"] = L.Linear(512 * 7 * 7, 1024)
            layers["fc2"] = L.Linear(1024, 10)
            super().__init__(**layers)

        def __call__(self, x):
            for s in range(len(self.widths)):
                x = F.relu(self[f"c{s}b"](F.relu(self[f"c{s}a"](x))))
                x = F.max_pooling_2d(x, 2)
            return self.fc2(F.relu(self.fc1(x)))

    return Inspection, VGG


def chainer_cases(rng: numpy.random.RandomState) -> dict:
    import chainer
    import chainer.functions as F
    import chainer.links as L
    import cupy
    from chainer import cuda, optimizers

    Inspection, VGG = chainer_models()
    g = cuda.to_gpu
    cases: dict[str, Any] = {}

    def seed_conv(workspace=None, use_cudnn=True):
        conv = L.Convolution2D(3, 64, 7, stride=2, pad=3, use_cudnn=use_cudnn)
        conv.to_gpu()
        x = g(rng.randn(*SEED_X).astype("f"))

        def step():
            # Chainer 1.24's knob: the limit its algorithm choice works within. Restored as it was, including
            # chainer-cudnn-workspace's record of whether the program set it (later cases keep the default).
            saved = (cuda._max_workspace_size, getattr(cuda, "_lg_workspace_size_set", None))
            if workspace is not None:
                cuda.set_max_workspace_size(workspace)
            conv.cleargrads()
            loss = F.sum(conv(chainer.Variable(x)))
            loss.backward()
            cuda._max_workspace_size = saved[0]
            if saved[1] is not None:
                cuda._lg_workspace_size_set = saved[1]
        return step
    cases["seed_conv7x7_fwd_sum_bwd"] = seed_conv
    cases["seed_conv7x7_workspace_512MiB"] = lambda: seed_conv(workspace=512 * 2**20)
    cases["seed_conv7x7_no_cudnn"] = lambda: seed_conv(use_cudnn=False)

    def infer(model_class, shape):
        model = model_class()
        model.to_gpu()
        x = g(rng.randn(*shape).astype("f"))
        return lambda: model(chainer.Variable(x, volatile="on"))
    cases["inspection_infer_b1"] = lambda: infer(Inspection, (1, 3, 224, 224))
    cases["inspection_infer_b32"] = lambda: infer(Inspection, (32, 3, 224, 224))
    cases["vgg_infer_b1"] = lambda: infer(VGG, (1, 3, 112, 112))
    cases["vgg_infer_b32"] = lambda: infer(VGG, (32, 3, 112, 112))

    def train():
        model = L.Classifier(Inspection())
        model.to_gpu()
        opt = optimizers.MomentumSGD(lr=0.01)
        opt.setup(model)
        x = g(rng.randn(32, 3, 224, 224).astype("f"))
        t = g(rng.randint(0, 2, 32).astype("i"))
        return lambda: opt.update(model, chainer.Variable(x), chainer.Variable(t))
    cases["inspection_train_step_b32"] = train

    def var_sum_bwd():
        x = g(rng.randn(*SEED_Y).astype("f"))

        def step():
            v = chainer.Variable(x)
            F.sum(v).backward()
        return step
    cases["F.sum_fwd_bwd_6.4M"] = var_sum_bwd
    big = g(rng.randn(_n(SEED_Y)).astype("f"))
    rows = g(rng.randn(6272, 1024).astype("f"))
    nchw = g(rng.randn(*SEED_Y).astype("f"))
    cases["sum_full_6.4M"] = lambda: (lambda: big.sum())
    cases["max_full_6.4M"] = lambda: (lambda: big.max())
    cases["argmax_full_6.4M"] = lambda: (lambda: big.argmax())
    cases["sum_axis0_6272x1024"] = lambda: (lambda: rows.sum(axis=0))
    cases["sum_axis-1_6272x1024"] = lambda: (lambda: rows.sum(axis=-1))
    cases["sum_axes023_NCHW"] = lambda: (lambda: nchw.sum(axis=(0, 2, 3)))
    a2, b2, c2 = (g(rng.randn(_n(SEED_Y)).astype("f")) for _ in range(3))
    cases["elementwise_add_6.4M"] = lambda: (lambda: cupy.add(a2, b2, out=c2))

    def bcast_bwd():
        x = g(rng.randn(*SEED_Y).astype("f"))
        b = g(rng.randn(1, 64, 1, 1).astype("f"))
        gy = g(numpy.ones(SEED_Y, "f"))

        def step():
            vb = chainer.Variable(b)
            y = F.broadcast_to(vb, SEED_Y) + chainer.Variable(x)
            y.grad = gy
            y.backward()
        return step
    cases["broadcast_add_fwd_bwd_NCHW"] = bcast_bwd

    def sce():
        x = g(rng.randn(4096, 1000).astype("f"))
        t = g(rng.randint(0, 1000, 4096).astype("i"))
        return lambda: F.softmax_cross_entropy(chainer.Variable(x), chainer.Variable(t)).backward()
    cases["softmax_cross_entropy_fwd_bwd_4096x1000"] = sce

    def pool():
        x = g(rng.randn(32, 64, 112, 112).astype("f"))

        def step():
            v = chainer.Variable(x)
            y = F.max_pooling_2d(v, 2)
            y.grad = cupy.ones_like(y.data)
            y.backward()
        return step
    cases["max_pool2_fwd_bwd_32x64x112x112"] = pool

    def conv3():
        conv = L.Convolution2D(64, 64, 3, pad=1)
        conv.to_gpu()
        x = g(rng.randn(32, 64, 56, 56).astype("f"))
        return lambda: conv(chainer.Variable(x, volatile="on"))
    cases["conv3x3_cudnn_fwd_32x64x56x56"] = conv3
    m1, m2 = g(rng.randn(4096, 4096).astype("f")), g(rng.randn(4096, 4096).astype("f"))
    cases["matmul_cublas_4096"] = lambda: (lambda: cupy.dot(m1, m2))
    return cases


# ---------------------------------------------------------------- torch 2.11
def torch_cases(rng: numpy.random.RandomState) -> dict:
    import torch
    import torch.nn as nn
    import torch.nn.functional as tf

    dev = torch.device("cuda")

    def g(a):
        return torch.from_numpy(a).to(dev)

    class Inspection(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList([nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1),
                                        nn.Conv2d(64, 128, 3, padding=1)])
            self.fc = nn.Linear(128, 2)

        def forward(self, x):
            for conv in self.convs:
                x = tf.max_pool2d(tf.relu(conv(x)), 2)
            return self.fc(tf.avg_pool2d(x, x.shape[2]).flatten(1))

    class VGG(nn.Module):
        def __init__(self):
            super().__init__()
            layers, cin = [], 3
            for w in (64, 128, 256, 512):
                layers += [nn.Conv2d(cin, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, w, 3, padding=1), nn.ReLU(),
                           nn.MaxPool2d(2)]
                cin = w
            self.features = nn.Sequential(*layers)
            self.head = nn.Sequential(nn.Linear(512 * 7 * 7, 1024), nn.ReLU(), nn.Linear(1024, 10))

        def forward(self, x):
            return self.head(self.features(x).flatten(1))

    cases: dict[str, Any] = {}

    def seed_conv():
        conv = nn.Conv2d(3, 64, 7, stride=2, padding=3).to(dev)
        x = g(rng.randn(*SEED_X).astype("f"))

        def step():
            conv.zero_grad(set_to_none=True)
            conv(x).sum().backward()
        return step
    for name in ("seed_conv7x7_fwd_sum_bwd", "seed_conv7x7_workspace_512MiB", "seed_conv7x7_no_cudnn"):
        cases[name] = seed_conv

    def infer(model_class, shape):
        model = model_class().to(dev).eval()
        x = g(rng.randn(*shape).astype("f"))

        def step():
            with torch.no_grad():
                return model(x)
        return step
    cases["inspection_infer_b1"] = lambda: infer(Inspection, (1, 3, 224, 224))
    cases["inspection_infer_b32"] = lambda: infer(Inspection, (32, 3, 224, 224))
    cases["vgg_infer_b1"] = lambda: infer(VGG, (1, 3, 112, 112))
    cases["vgg_infer_b32"] = lambda: infer(VGG, (32, 3, 112, 112))

    def train():
        model = Inspection().to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = g(rng.randn(32, 3, 224, 224).astype("f"))
        t = g(rng.randint(0, 2, 32).astype("int64"))

        def step():
            opt.zero_grad(set_to_none=True)
            tf.cross_entropy(model(x), t).backward()
            opt.step()
        return step
    cases["inspection_train_step_b32"] = train

    def var_sum_bwd():
        x = g(rng.randn(*SEED_Y).astype("f")).requires_grad_()

        def step():
            x.grad = None
            x.sum().backward()
        return step
    cases["F.sum_fwd_bwd_6.4M"] = var_sum_bwd
    big = g(rng.randn(_n(SEED_Y)).astype("f"))
    rows = g(rng.randn(6272, 1024).astype("f"))
    nchw = g(rng.randn(*SEED_Y).astype("f"))
    cases["sum_full_6.4M"] = lambda: (lambda: big.sum())
    cases["max_full_6.4M"] = lambda: (lambda: big.max())
    cases["argmax_full_6.4M"] = lambda: (lambda: big.argmax())
    cases["sum_axis0_6272x1024"] = lambda: (lambda: rows.sum(dim=0))
    cases["sum_axis-1_6272x1024"] = lambda: (lambda: rows.sum(dim=-1))
    cases["sum_axes023_NCHW"] = lambda: (lambda: nchw.sum(dim=(0, 2, 3)))
    a2, b2, c2 = (g(rng.randn(_n(SEED_Y)).astype("f")) for _ in range(3))
    cases["elementwise_add_6.4M"] = lambda: (lambda: torch.add(a2, b2, out=c2))

    def bcast_bwd():
        x = g(rng.randn(*SEED_Y).astype("f")).requires_grad_()
        b = g(rng.randn(1, 64, 1, 1).astype("f")).requires_grad_()
        gy = torch.ones(SEED_Y, device=dev)

        def step():
            x.grad = b.grad = None
            (b.expand(SEED_Y) + x).backward(gy)
        return step
    cases["broadcast_add_fwd_bwd_NCHW"] = bcast_bwd

    def sce():
        x = g(rng.randn(4096, 1000).astype("f")).requires_grad_()
        t = g(rng.randint(0, 1000, 4096).astype("int64"))

        def step():
            x.grad = None
            tf.cross_entropy(x, t).backward()
        return step
    cases["softmax_cross_entropy_fwd_bwd_4096x1000"] = sce

    def pool():
        x = g(rng.randn(32, 64, 112, 112).astype("f")).requires_grad_()

        def step():
            x.grad = None
            y = tf.max_pool2d(x, 2)
            y.backward(torch.ones_like(y))
        return step
    cases["max_pool2_fwd_bwd_32x64x112x112"] = pool

    def conv3():
        conv = nn.Conv2d(64, 64, 3, padding=1).to(dev)
        x = g(rng.randn(32, 64, 56, 56).astype("f"))

        def step():
            with torch.no_grad():
                return conv(x)
        return step
    cases["conv3x3_cudnn_fwd_32x64x56x56"] = conv3
    m1, m2 = g(rng.randn(4096, 4096).astype("f")), g(rng.randn(4096, 4096).astype("f"))
    cases["matmul_cublas_4096"] = lambda: (lambda: m1 @ m2)
    return cases


# Minimum bytes a memory-bound case moves per iteration (reads + writes), for the bandwidth column.
_Y = _n(SEED_Y) * F4
BYTES = {
    "F.sum_fwd_bwd_6.4M": 2 * _Y,  # read x; write the broadcast gradient
    "sum_full_6.4M": _Y, "max_full_6.4M": _Y, "argmax_full_6.4M": _Y,
    "sum_axis0_6272x1024": 6272 * 1024 * F4, "sum_axis-1_6272x1024": 6272 * 1024 * F4,
    "sum_axes023_NCHW": _Y,
    "elementwise_add_6.4M": 3 * _Y,
    "broadcast_add_fwd_bwd_NCHW": 4 * _Y,  # read x, write y; read gy for the bias gradient; gx = gy (a copy)
    "softmax_cross_entropy_fwd_bwd_4096x1000": 2 * 4096 * 1000 * F4,
    "max_pool2_fwd_bwd_32x64x112x112": (2 + 2 * 0.25) * 32 * 64 * 112 * 112 * F4,
}
MEMORY_BOUND_LARGE = set(BYTES)
