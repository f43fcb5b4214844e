"""A fix hint that names a patchset must name one that exists: the hint is what a user acts on."""

from __future__ import annotations

from legacy_gpu_patch.classify.classifier import load_rules
from legacy_gpu_patch.config.recipe import SearchPath


def test_every_patchset_named_by_a_rule_exists() -> None:
    known = set(SearchPath.from_options().patchset_names())
    missing = {(r.id, p) for r in load_rules().rules for p in r.patchsets if p not in known}
    assert not missing, f"rules name patchsets that do not exist: {sorted(missing)}"


def test_every_patchset_that_fixes_a_build_error_is_reachable_from_a_rule() -> None:
    # Patchsets that only add safety or run-time behaviour (no build error to classify) are listed here on purpose.
    not_build_errors = {
        "cupy-cuda13-wheels",  # run-time library loading, found by an import, not a build
        "chainer-relocatable-wheel",  # the wheel's run path, checked by tools/wheel_check
        "torch-wheel-rpath",  # the torch wheel's run paths, likewise
        "torch-wheel-requires",  # the torch wheel's metadata: pip installs it, nothing fails to build
        "cudnn-tf32", "cudnn-tf32-on",  # the tf32 parameter: numerics, not a build error
        "cupy-reduction-grid",  # speed of CuPy's reductions on many-SM GPUs: nothing fails, it is slow
        "cupy-reduction-layout",  # speed of CuPy's reductions over an axis (memory access shape): nothing fails
        "cupy-reduction-odometer",  # speed of CuPy's long reductions (index arithmetic, waves): nothing fails
        "chainer-cudnn-workspace",  # speed at batch 32 (cuDNN's algorithm choice within the workspace): nothing fails
        "chainer-cudnn-algo-cache",  # speed of small convolutions (a per-call cuDNN query): nothing fails
        "chainer-type-check-cache",  # speed of small batches (per-call type checks): nothing fails
        "chainer-call-overhead",  # speed of small batches (per-call Python of Function.__call__): nothing fails
        "chainer-cudnn-host-cache",  # speed of small batches (cuDNN descriptors made per call): nothing fails
        "chainer-cudnn-graph-conv",  # speed of small batches (cuDNN 8/9's legacy conv call per call): nothing fails
        "chainer-linear-cublas",  # speed of small batches (the linear layer's host path): nothing fails
        "chainer-call-lean",  # speed of small batches (Python calls per Function call): nothing fails
        "chainer-layer-lean",  # speed of small batches (per-problem work of pooling, activation, conv): nothing fails
        "chainer-host-inline",  # speed of small batches (Python frames a test in place answers): nothing fails
        "chainer-max-pool-kernel",  # speed of max_pooling_2d on a new GPU (bytes moved): nothing fails
        "chainer-softmax-ce-fused",  # speed of softmax_cross_entropy on the GPU (ten kernels to three): nothing fails
        "sparse-addmm-beta",  # a wrong number (beta applied twice), no message
        "cupy-ufunc-dtype-loop",  # a wrong number (a float64 mean of -1/12), no message
        "cupy-ufunc-scalar-cache",  # speed of ufunc calls with a scalar (the NEP 50 shim per call): nothing fails
        "engine-exit-finalized",  # exit status 134 after "terminate called without an active exception": a
        # message any C++ program can print, no sign of this cause in the line
    }
    named = {p for r in load_rules().rules for p in r.patchsets}
    unreached = set(SearchPath.from_options().patchset_names()) - named - not_build_errors
    assert not unreached, f"no classifier rule points at {sorted(unreached)}"
