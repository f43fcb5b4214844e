"""Chainer-only cases that split the batch-1 inference time into its host-side parts (no torch counterpart).

- cudnn_fwd_algo_query_conv3x3: the cuDNN heuristic query Chainer 1.24 makes on every convolution forward
  (getConvolutionForwardAlgorithm; on cuDNN 8/9 cupy-cudnn-compat answers it with the _v7 heuristics), alone.
  Backward makes two more (filter, data). torch caches its algorithm choice per shape; Chainer 1.24 does not.
- cudnn_descriptors_conv3x3: the four descriptors every convolution forward creates and destroys.
- inspection_infer_b1_no_type_check: the batch-1 inference with Function.type_check_enable off (what
  CHAINER_TYPE_CHECK=0 does), the share of the argument type checks every Function call runs.
"""

from __future__ import annotations

from typing import Any

X3, W3 = (32, 64, 56, 56), (64, 64, 3, 3)


def chainer_cases(rng: Any) -> dict:
    import _speed_workloads as w
    import chainer
    import chainer.function
    import cupy
    import numpy
    from chainer import cuda

    def descriptors() -> tuple:
        cudnn = cuda.cudnn
        x, weights = cupy.empty(X3, numpy.float32), cupy.empty(W3, numpy.float32)
        return (cudnn.get_handle(), cudnn.create_tensor_descriptor(x), cudnn.create_filter_descriptor(weights),
                cudnn.create_convolution_descriptor((1, 1), (1, 1), x.dtype), cudnn.create_tensor_descriptor(x))

    def query():
        libcudnn = cuda.cudnn.cudnn
        handle, x_desc, f_desc, conv_desc, y_desc = descriptors()
        pref = libcudnn.CUDNN_CONVOLUTION_FWD_SPECIFY_WORKSPACE_LIMIT
        return lambda: libcudnn.getConvolutionForwardAlgorithm(
            handle, x_desc.value, f_desc.value, conv_desc.value, y_desc.value, pref, cuda.get_max_workspace_size())

    def make_descriptors():
        return descriptors

    def no_type_check():
        Inspection, _ = w.chainer_models()
        model = Inspection()
        model.to_gpu()
        x = cuda.to_gpu(rng.randn(1, 3, 224, 224).astype("f"))
        cls = chainer.function.Function

        def step():
            saved, cls.type_check_enable = cls.type_check_enable, False
            try:
                return model(chainer.Variable(x, volatile="on"))
            finally:
                cls.type_check_enable = saved
        return step

    return {"cudnn_fwd_algo_query_conv3x3": query, "cudnn_descriptors_conv3x3": make_descriptors,
            "inspection_infer_b1_no_type_check": no_type_check}
