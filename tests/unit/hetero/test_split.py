"""split_conv against the unsplit layer: both shares on the CPU, through the same code path a GPU split takes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'legacy-gpu-patch[hetero]')")
from torch import Tensor, nn  # noqa: E402

from legacy_gpu_patch.hetero import split_conv  # noqa: E402
from legacy_gpu_patch.hetero.split import Parts, SplitLayer  # noqa: E402

CPU_PAIR: dict[str, Any] = {"accel": "cpu", "host": "cpu"}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _check_same(layer: nn.Module, x: Tensor, ratio: float) -> SplitLayer:
    """Forward and every gradient (weight, bias, input) of the split equal the unsplit layer's."""
    split = split_conv(layer, ratio, cpu_threads=1, **CPU_PAIR)
    x = x.clone().requires_grad_(True)
    expected = layer(x)
    got = split(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    grad_out = torch.randn_like(expected)
    params = [p for p in (layer.weight, layer.bias) if p is not None]
    want = torch.autograd.grad(expected, [*params, x], grad_out)
    have = torch.autograd.grad(got, [*params, x], grad_out)
    for a, b in zip(have, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    return split


@pytest.mark.parametrize("ratio", [0.0, 1 / 6, 0.5, 5 / 6, 1.0])
def test_seed_conv_forward_and_backward_equal_unsplit(ratio: float) -> None:
    torch.manual_seed(0)
    split = _check_same(nn.Conv2d(3, 6, 5), torch.randn(4, 3, 32, 32), ratio)
    assert split.host_units == round(ratio * 6)


def test_odd_channel_count_rounds_to_whole_channels() -> None:
    torch.manual_seed(1)
    split = _check_same(nn.Conv2d(5, 7, 3, padding=1), torch.randn(2, 5, 9, 11), 0.3)
    assert (split.host_units, split.spec.units) == (2, 7)
    assert split.ratio == pytest.approx(2 / 7)


def test_groups_split_on_group_boundaries() -> None:
    torch.manual_seed(2)
    conv = nn.Conv2d(8, 12, 3, groups=4, padding=1)
    split = _check_same(conv, torch.randn(2, 8, 10, 10), 0.5)
    assert (split.spec.units, split.spec.out_per_unit, split.host_units) == (4, 3, 2)


def test_depthwise_conv() -> None:
    torch.manual_seed(3)
    _check_same(nn.Conv2d(6, 6, 3, groups=6, bias=False), torch.randn(3, 6, 8, 8), 0.5)


def test_bias_off_and_conv_options() -> None:
    torch.manual_seed(4)
    conv = nn.Conv2d(4, 9, 3, stride=2, dilation=2, padding=2, bias=False, padding_mode="reflect")
    split = _check_same(conv, torch.randn(2, 4, 15, 15), 0.4)
    assert split.bias is None


def test_padding_same() -> None:
    torch.manual_seed(5)
    _check_same(nn.Conv2d(3, 4, (3, 5), padding="same"), torch.randn(1, 3, 7, 7), 0.5)


@pytest.mark.parametrize("shape", [(5, 10), (2, 3, 10)])
def test_linear(shape: tuple[int, ...]) -> None:
    torch.manual_seed(6)
    _check_same(nn.Linear(10, 7), torch.randn(*shape), 0.5)


def test_same_parameters_same_state_dict() -> None:
    conv = nn.Conv2d(3, 6, 5)
    split = split_conv(conv, 0.5, **CPU_PAIR)
    assert split.weight is conv.weight and split.bias is conv.bias
    assert list(split.state_dict()) == list(conv.state_dict())
    assert [id(p) for p in split.parameters()] == [id(p) for p in conv.parameters()]


def test_gradients_land_in_the_original_parameters() -> None:
    torch.manual_seed(7)
    conv = nn.Conv2d(3, 6, 5)
    reference = nn.Conv2d(3, 6, 5)
    reference.load_state_dict(conv.state_dict())
    x = torch.randn(2, 3, 12, 12)
    split_conv(conv, 0.5, **CPU_PAIR)(x).square().sum().backward()
    reference(x).square().sum().backward()
    torch.testing.assert_close(conv.weight.grad, reference.weight.grad)
    assert conv.bias is not None and reference.bias is not None
    torch.testing.assert_close(conv.bias.grad, reference.bias.grad)


def test_no_grad_and_inference_mode_reach_the_worker_thread() -> None:
    split = split_conv(nn.Conv2d(3, 6, 5), 0.5, **CPU_PAIR)
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        assert split(x).grad_fn is None
    with torch.inference_mode():
        assert split(x).is_inference()
    assert split(x).grad_fn is not None


def test_inference_cache_follows_weight_updates() -> None:
    """Without autograd the host copy of the weights is cached; an in-place update (an optimizer step) must
    invalidate it."""
    torch.manual_seed(8)
    conv = nn.Conv2d(3, 6, 3)
    split = split_conv(conv, 0.5, **CPU_PAIR)
    x = torch.randn(1, 3, 6, 6)
    with torch.no_grad():
        split(x)
        conv.weight.mul_(2.0)
        torch.testing.assert_close(split(x), conv(x))


def test_copies_to_the_other_device_are_cached_only_without_autograd() -> None:
    """Where the Parameters live on the other device (here: the CPU, against the data-less "meta" device), inference
    reuses one copy until the Parameter changes; with autograd every forward makes a fresh differentiable copy."""
    split = split_conv(nn.Conv2d(3, 6, 3), 0.5, **CPU_PAIR)
    meta = torch.device("meta")

    def host_weight_on_meta() -> Tensor:  # as run() does it: slices taken anew, then the copy
        w_host, b_host, _, _ = split._slices(3)
        assert w_host is not None
        return split._params_on(meta, w_host, b_host, 3)[0]

    with torch.no_grad():
        first = host_weight_on_meta()
        assert first.device == meta and host_weight_on_meta() is first
        split.weight.add_(1.0)  # an optimizer step: the version counter moves
        assert host_weight_on_meta() is not first
        assert len(split._copies) == 1  # the stale copy was dropped
    fresh = host_weight_on_meta()
    assert fresh.grad_fn is not None and fresh is not host_weight_on_meta()


def test_one_share_alone_for_the_tuner() -> None:
    torch.manual_seed(9)
    conv = nn.Conv2d(3, 6, 3)
    split = split_conv(conv, 0.5, **CPU_PAIR)
    x = torch.randn(1, 3, 6, 6)
    full = conv(x)
    torch.testing.assert_close(split.run(x, 2, Parts.HOST), full[:, :2])
    torch.testing.assert_close(split.run(x, 2, Parts.ACCEL), full[:, 2:])


@pytest.mark.parametrize("ratio", [-0.1, 1.5, "half"])
def test_bad_ratio_is_refused(ratio: object) -> None:
    with pytest.raises(ValueError, match="ratio must be"):
        split_conv(nn.Conv2d(3, 6, 5), ratio, **CPU_PAIR)  # type: ignore[arg-type]


def test_other_layers_are_refused() -> None:
    with pytest.raises(TypeError, match=r"nn\.Conv2d or nn\.Linear, not ConvTranspose2d"):
        split_conv(nn.ConvTranspose2d(3, 6, 5), 0.5, **CPU_PAIR)


def test_auto_tunes_on_the_first_forward_and_stays_correct() -> None:
    torch.manual_seed(10)
    conv = nn.Conv2d(3, 6, 5)
    split = split_conv(conv, "auto", cpu_threads=1, **CPU_PAIR)
    assert split.tuning is None and "not tuned yet" in repr(split)
    x = torch.randn(2, 3, 16, 16)
    torch.testing.assert_close(split(x), conv(x))
    assert split.tuning is not None and split.host_units == split.tuning.host_units
    assert {c.host_units for c in split.tuning.candidates} >= {0, 6}
    assert split.tuning.chosen.measured_s is not None


def test_the_two_shares_run_concurrently_on_two_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each share waits until the other has started: run one after the other, the first would time out."""
    import threading

    from legacy_gpu_patch.hetero.split import LayerSpec

    started = {"host": threading.Event(), "accel": threading.Event()}
    threads: dict[str, str] = {}
    real_compute = LayerSpec.compute

    def rendezvous(self: LayerSpec, x: Tensor, weight: Tensor, bias: Tensor | None, n_units: int) -> Tensor:
        side = "host" if threading.current_thread() is not threading.main_thread() else "accel"
        threads[side] = threading.current_thread().name
        started[side].set()
        other = "accel" if side == "host" else "host"
        assert started[other].wait(timeout=30), f"the {other} share never started while the {side} share ran"
        return real_compute(self, x, weight, bias, n_units)

    monkeypatch.setattr(LayerSpec, "compute", rendezvous)
    conv = nn.Conv2d(3, 6, 3)
    split = split_conv(conv, 0.5, cpu_threads=1, **CPU_PAIR)
    x = torch.randn(1, 3, 6, 6)
    out = split(x)
    monkeypatch.undo()
    torch.testing.assert_close(out, conv(x))
    assert threads["host"].startswith("lgpatch-hetero-cpu1") and threads["accel"] == "MainThread"


@settings(max_examples=30, deadline=None)
@given(groups=st.integers(1, 3), in_per_group=st.integers(1, 3), out_per_group=st.integers(1, 4),
       kernel=st.integers(1, 3), stride=st.integers(1, 2), bias=st.booleans(), ratio=st.floats(0.0, 1.0),
       size=st.integers(3, 7))
def test_any_conv_any_ratio_equals_unsplit(groups: int, in_per_group: int, out_per_group: int, kernel: int,
                                           stride: int, bias: bool, ratio: float, size: int) -> None:
    torch.manual_seed(11)
    conv = nn.Conv2d(groups * in_per_group, groups * out_per_group, kernel, stride, groups=groups, bias=bias)
    split = _check_same(conv, torch.randn(2, groups * in_per_group, size, size), ratio)
    assert split.host_units == round(ratio * split.spec.units)
