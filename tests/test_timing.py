"""The time model (fxremat.timing): one per-op roofline prices the chain's stages and whole steps.

Invariants checked: a value Inductor fuses into its readers costs only its arithmetic, a stored
pointwise op its memory traffic, a matmul its FLOPs; views cost nothing; the chain's stage costs are
the time model's (so a stage of fused pointwise ops is cheap to recompute next to a matmul's); the
partitioner reports an estimate of both pairs' steps.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.fx.experimental.proxy_tensor import make_fx

import fxremat
from fxremat.memory import fused_in
from fxremat.timing import MACHINES, Machine, flops, graph_seconds, step_seconds

from test_linearize import _joint_of

aten = torch.ops.aten
CPU = MACHINES["cpu"]


def _keys(node):
    from fxremat import _torch

    return [_torch.storage_key(t) for t in _torch.tensors_in(node.meta.get("val"))]


def _priced(fn, *args, inductor=True):
    gm = make_fx(fn, tracing_mode="fake")(*args)
    fused = fused_in(gm.graph) if inductor else set()
    return gm, fused, graph_seconds(gm.graph, fused, _keys, CPU)


def _one(gm, target):
    (node,) = [n for n in gm.graph.nodes if n.target == target]
    return node


def test_a_fused_pointwise_value_costs_only_its_arithmetic():
    """(x * 2).relu().sum(): under Inductor the mul and relu run inside the sum's kernel: they cost
    one FLOP per element at the matmul rate, the sum pays for reading x.  Without Inductor each is a
    kernel that reads and writes a tensor."""
    x = torch.randn(1 << 16)
    gm, fused, t = _priced(lambda x: ((x * 2).relu().sum() * 3,), x)
    (mul,) = [n for n in gm.graph.nodes if n.target == aten.mul.Tensor and n.args[1] == 2]
    relu, total = _one(gm, aten.relu.default), _one(gm, aten.sum.default)
    assert {mul, relu} <= fused
    assert t[mul] == t[relu] == pytest.approx(x.numel() / CPU.flop_rate)
    assert t[total] == pytest.approx(CPU.launch + (x.numel() * 4 + 4) / CPU.bandwidth)
    gm, _, plain = _priced(lambda x: ((x * 2).relu().sum() * 3,), x, inductor=False)
    (mul,) = [n for n in gm.graph.nodes if n.target == aten.mul.Tensor and n.args[1] == 2]
    stored = CPU.launch + 2 * x.numel() * 4 / CPU.bandwidth  # read x, write the product
    assert plain[mul] == pytest.approx(stored) and plain[mul] > 20 * x.numel() / CPU.flop_rate


def test_a_matmul_costs_its_flops_and_a_view_nothing():
    a, b = torch.randn(256, 512), torch.randn(512, 256)
    gm, _, t = _priced(lambda a, b: ((a @ b).t(),), a, b)
    mm, tr = _one(gm, aten.mm.default), _one(gm, aten.t.default)
    assert flops(mm) == 2 * 256 * 512 * 256
    moved = (256 * 512 * 2 + 256 * 256) * 4
    assert t[mm] == pytest.approx(CPU.launch + max(flops(mm) / CPU.flop_rate, moved / CPU.bandwidth))
    assert t[tr] == 0.0
    assert all(t[n] == 0.0 for n in gm.graph.nodes if n.op in ("placeholder", "output"))


@pytest.mark.parametrize("field,value", [("flop_rate", 0.0), ("bandwidth", -1.0), ("launch", float("nan"))])
def test_machine_rejects_nonsense_rates(field, value):
    kwargs = dict(flop_rate=1e11, bandwidth=1e10, launch=1e-6) | {field: value}
    with pytest.raises(ValueError, match=field):
        Machine(**kwargs)


class _MatmulThenPointwise(nn.Module):
    """Layers of a linear followed by a run of pointwise ops: under Inductor the pointwise run is
    fused into its readers, so recomputing it costs a small share of the layer."""

    def __init__(self, layers: int = 3, d: int = 128):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))

    def forward(self, x):
        for lin in self.lins:
            x = torch.tanh(torch.relu(lin(x)) * 1.5 + 0.5)
        return x


def test_stage_costs_are_the_time_model_and_favour_matmuls():
    torch.manual_seed(0)
    (jg,) = _joint_of(_MatmulThenPointwise(), (torch.randn(256, 128, requires_grad=True),))
    assert jg.seconds and set(jg.forward) <= set(jg.seconds)
    assert all(t >= 0.0 for t in jg.seconds.values())
    mms = [n for n in jg.forward if n.target in (aten.addmm.default, aten.mm.default)]
    assert mms and all(jg.seconds[n] >= flops(n) / CPU.flop_rate for n in mms)
    from fxremat.linearize import linearize

    chain = linearize(jg, []).chain
    assert sum(chain.forward_cost) == pytest.approx(sum(jg.seconds.values()))


def test_the_report_estimates_both_pairs_steps():
    torch.manual_seed(0)
    model = _MatmulThenPointwise(layers=4)
    x = torch.randn(256, 128, requires_grad=True)
    fxremat.last_reports(clear=True)
    torch.compile(model, backend=fxremat.make_backend(compiler="eager"))(x).sum().backward()
    (r,) = fxremat.last_reports(clear=True)
    assert r.step is not None and r.min_cut_step is not None
    assert r.step.forward_s > 0 and r.step.backward_s > 0
    assert r.predicted_step_s == (r.step if r.chosen == "fxremat" else r.min_cut_step).step_s
    # recomputation adds to the backward: never less than min-cut's pair, which recomputes least
    assert r.step.backward_s >= 0.5 * r.min_cut_step.backward_s


def test_step_seconds_counts_both_graphs():
    gm = make_fx(lambda a, b: (a @ b,), tracing_mode="fake")(torch.randn(64, 64), torch.randn(64, 64))
    one = step_seconds(gm, gm, inductor=True)
    assert one.forward_s == one.backward_s > 0 and one.step_s == pytest.approx(2 * one.forward_s)
