"""split_model on a small CNN: one model, the same training trajectory as the unsplit model."""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'legacy-gpu-patch[hetero]')")
import torch.nn.functional as F  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from legacy_gpu_patch.hetero import SplitLayer, split_model  # noqa: E402
from legacy_gpu_patch.hetero.nets import SeedNet  # noqa: E402

CPU_PAIR: dict[str, Any] = {"accel": "cpu", "host": "cpu"}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.bn = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 8, 3, groups=2, bias=False)
        self.gate = nn.Conv2d(8, 1, 1)  # one output channel: nothing to split
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: Tensor) -> Tensor:
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        x = x * torch.sigmoid(self.gate(x))
        return self.fc(torch.flatten(x, 1))


def _train(model: nn.Module, steps: int = 4) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(123)
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 3, 16, 16, generator=gen)
        y = torch.randint(0, 5, (8,), generator=gen)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_split_model_trains_to_the_same_weights() -> None:
    torch.manual_seed(0)
    reference = SmallCNN()
    split = copy.deepcopy(reference)
    report = split_model(split, 0.5, cpu_threads=1, **CPU_PAIR)
    assert [name for name, _ in report.layers] == ["conv1", "conv2", "fc"]
    assert report.skipped == [("gate", "a single output unit cannot be split")]
    assert isinstance(split.conv1, SplitLayer) and split.conv1.host_units == 3
    assert split.conv2.host_units == 1  # 2 groups, one on each side
    assert list(split.state_dict()) == list(reference.state_dict())
    torch.testing.assert_close(_train(split), _train(reference), rtol=1e-5, atol=1e-6)
    for (name, got), want in zip(split.state_dict().items(), reference.state_dict().values()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=name)
    assert "fc: linear, 2/5 units on the host — fixed ratio 0.400" in report.format()


def test_an_optimizer_built_before_the_split_still_trains_the_model() -> None:
    torch.manual_seed(1)
    model = SeedNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.conv1.weight.detach().clone()
    split_model(model, 0.5, **CPU_PAIR)
    F.cross_entropy(model(torch.randn(2, 3, 32, 32)), torch.tensor([1, 2])).backward()
    opt.step()
    assert not torch.equal(model.conv1.weight, before)


def test_auto_tunes_every_layer_once_and_restores_batch_norm() -> None:
    torch.manual_seed(2)
    model = SmallCNN()
    reference = copy.deepcopy(model)
    assert model.bn.running_mean is not None
    stats = model.bn.running_mean.clone()
    report = split_model(model, "auto", cpu_threads=1, example_input=torch.randn(4, 3, 16, 16), **CPU_PAIR)
    torch.testing.assert_close(model.bn.running_mean, stats)
    decisions = report.decisions()
    assert all(d.tuned and d.measured_s is not None and d.predicted_s is not None for d in decisions)
    assert set(report.to_json()["tuning"]) == {"conv1", "conv2", "fc"}
    x = torch.randn(3, 3, 16, 16)
    model.eval()
    reference.eval()
    torch.testing.assert_close(model(x), reference(x), rtol=1e-5, atol=1e-6)


def test_split_model_leaves_split_layers_alone() -> None:
    model = SeedNet()
    split_model(model, 0.5, **CPU_PAIR)
    assert split_model(model, 0.5, **CPU_PAIR).layers == []
    alone = split_model(nn.Linear(3, 4), 0.5, **CPU_PAIR)
    assert alone.layers == [] and alone.skipped == [("Linear", "the model itself is one layer: use split_conv")]


def test_a_split_model_copies_saves_and_loads_like_the_original() -> None:
    import json

    torch.manual_seed(3)
    model = SeedNet()
    plain = copy.deepcopy(model)
    report = split_model(model, "auto", cpu_threads=1, example_input=torch.randn(2, 3, 32, 32), **CPU_PAIR)
    json.dumps(report.to_json())  # plain data all the way down: the bench prints it as JSON
    clone = copy.deepcopy(model)
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(clone(x), plain(x), rtol=1e-5, atol=1e-6)
    fresh = SeedNet()
    fresh.load_state_dict(model.state_dict())  # the checkpoint of a split model loads into an unsplit one
    torch.testing.assert_close(fresh(x), plain(x), rtol=1e-5, atol=1e-6)


def test_nested_modules_are_found_and_named_by_their_path() -> None:
    from legacy_gpu_patch.hetero.nets import ResNet18Like

    torch.manual_seed(4)
    model = ResNet18Like().eval()
    reference = copy.deepcopy(model)
    report = split_model(model, 0.25, **CPU_PAIR)
    names = [name for name, _ in report.layers]
    assert len(names) == 21 and names[0] == "stem" and names[-1] == "fc"
    assert {"blocks.0.conv1", "blocks.2.down.0", "blocks.7.conv2"} <= set(names)
    assert isinstance(model.blocks[2].down[0], SplitLayer) and model.blocks[2].down[0].host_units == 32
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x), rtol=1e-4, atol=1e-5)
