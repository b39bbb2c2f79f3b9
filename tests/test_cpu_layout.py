"""The CPU layout of fxremat's compiled pairs (``_torch.compile_with_inductor(cpu_layout=...)``):
channels-last in both graphs where the forward has a depthwise convolution and Inductor would lay
it out channels-last, contiguous in both otherwise; never one graph channels-last and the other not."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import fxremat
from fxremat import _torch


def _cnn(depthwise: bool) -> nn.Module:
    torch.manual_seed(0)
    mix = nn.Conv2d(16, 16, 3, padding=1, groups=16 if depthwise else 1)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.GELU(), mix, nn.GELU(),
                         nn.Conv2d(16, 16, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4))


def _layouts(monkeypatch, model: nn.Module, x: torch.Tensor) -> dict[bool, bool]:
    """{is_backward: whether Inductor laid the graph out channels-last}, compiling ``model``
    with fxremat's backend; the gradients are checked against eager."""
    from torch._inductor.graph import GraphLowering

    seen: dict[bool, bool] = {}
    original = GraphLowering.__init__

    def spy(self, gm, *args, **kwargs):
        original(self, gm, *args, **kwargs)
        seen[bool(kwargs.get("is_backward"))] = bool(self.layout_opt)

    monkeypatch.setattr(GraphLowering, "__init__", spy)
    x.requires_grad_(True)
    model(x).square().sum().backward()
    expected = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad(set_to_none=True)
    x.grad = None
    with _torch.caches_disabled():
        torch.compile(model, backend=fxremat.backend)(x).square().sum().backward()
    for a, e in zip([p.grad for p in model.parameters()] + [x.grad], expected):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    return seen


@pytest.mark.inductor
def test_depthwise_network_runs_channels_last_in_both_graphs(monkeypatch):
    seen = _layouts(monkeypatch, _cnn(depthwise=True), torch.randn(2, 3, 16, 16))
    assert seen == {False: True, True: True}


@pytest.mark.inductor
def test_dense_network_runs_contiguous_in_both_graphs(monkeypatch):
    seen = _layouts(monkeypatch, _cnn(depthwise=False), torch.randn(2, 3, 16, 16))
    assert seen == {False: False, True: False}


def test_depthwise_detection():
    from torch.fx.experimental.proxy_tensor import make_fx

    for groups, expected in ((4, True), (2, False), (1, False)):
        gm = make_fx(lambda x, w: torch.nn.functional.conv2d(x, w, groups=groups), tracing_mode="fake")(
            torch.randn(1, 4, 8, 8), torch.randn(4, 4 // groups, 3, 3))
        assert _torch._has_depthwise_convolution(gm) is expected, groups


def test_unknown_layout_is_a_clear_error():
    with pytest.raises(ValueError, match="cpu_layout"):
        _torch.compile_with_inductor(None, [], None, cpu_layout="sideways")
