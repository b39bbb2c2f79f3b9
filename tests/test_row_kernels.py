"""``row_kernels.store_softmax_inputs`` (forward graphs): a softmax input computed inline from an operand broadcast
over an outer dimension (an attention mask over the heads, a position bias over the batch) is
marked stored where the graph computes it, when a same-size buffer it reads (the scores) dies
there; every reader reads the mark.  Left alone: inputs with no outer broadcast (Inductor's row
loops stay whole), a broadcast over the reduced dimension only or over every outer dimension (a
per-column bias: the outer dimensions still collapse), scores read again elsewhere (the
mark would add a buffer), returned inputs, small ones, reductions over another dimension.

Invariants: exact in value (the marked graph against the original on real tensors), the graph
lints, a second call marks nothing.  End to end (Inductor mode, no kernel compiled): eager-style
attention layers with an HF-style padding mask and a position bias planned for Inductor get one
mark per softmax in the forward and none in the backward, and the gradients equal eager's.  Through
Inductor (kernels compiled): the measured peak of a training step is the same with and without the
marks.
"""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx
from test_inductor_replay import inductor_mode_backend
from torch._inductor.decomposition import select_decomp_table
from torch.fx.experimental.proxy_tensor import make_fx

import fxremat
from fxremat import _torch, partitioner, row_kernels
from fxremat.partitioner import partition
from fxremat.profiling import peak_of_training_step
from fxremat.row_kernels import store_softmax_inputs

pytestmark = pytest.mark.skipif(_torch.realize_op() is None, reason="this torch has no inductor_force_stride_order")

B, H, S, D = 2, 4, 128, 16  # B * H * S * S = 131072 >= SOFTMAX_MIN_NUMEL


def _args(s: int = S) -> list[torch.Tensor]:
    torch.manual_seed(0)
    valid = torch.ones(B, s, dtype=torch.bool)
    valid[1, s * 3 // 4:] = False
    return [torch.randn(B, H, s, D), torch.randn(B, H, s, D), torch.randn(B, H, s, D), torch.randn(1, H, s, s), valid]


def _masked_bias_attention(q, k, v, bias, valid):
    """T5's masked position bias (transformers' sdpa path): where(mask, bias, min), added to the scores."""
    scores = q @ k.transpose(-1, -2)
    masked = torch.where(valid[:, None, None, :], bias, torch.finfo(torch.float32).min).contiguous()
    return (torch.softmax(scores + masked, dim=-1) @ v,)


def _traced(fn, args) -> fx.GraphModule:
    return make_fx(fn, decomposition_table=select_decomp_table())(*args)  # softmax decomposed, as Inductor's joint graph has it


def _marks(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if _torch.is_realize(n)]


def _softmax_marks(gm: fx.GraphModule) -> list[fx.Node]:
    return [m for m in _marks(gm) if any(u.target is torch.ops.aten.amax.default for u in m.users)]


def test_broadcast_softmax_input_is_stored_where_computed():
    args = _args()
    gm, ref = _traced(_masked_bias_attention, args), _traced(_masked_bias_attention, args)
    assert store_softmax_inputs(gm) == 1
    (mark,) = _marks(gm)
    value = mark.args[0]
    assert value.target is torch.ops.aten.add.Tensor and list(value.users) == [mark]
    assert torch.ops.aten.amax.default in {u.target for u in mark.users}
    assert list(mark.args[1]) == list(value.meta["val"].stride())
    assert store_softmax_inputs(gm) == 0
    torch.testing.assert_close(gm(*args)[0], ref(*args)[0], rtol=0, atol=0)


@pytest.mark.parametrize("case", ["no_broadcast", "reduced_dim_only", "every_outer_dim", "scores_read_again", "returned",
                                  "small", "other_dim"])
def test_other_softmax_inputs_are_not_marked(case):
    def fn(q, k, v, bias, valid):
        scores = q @ k.transpose(-1, -2)
        masked = torch.where(valid[:, None, None, :], bias, torch.finfo(torch.float32).min)
        return {
            "no_broadcast": lambda: (torch.softmax(scores * 0.25, -1) @ v,),
            "reduced_dim_only": lambda: (torch.softmax(scores + scores.sum(-1, keepdim=True), -1) @ v,),
            "every_outer_dim": lambda: (torch.softmax(scores + bias[0, 0, 0], -1) @ v,),  # a per-column (S,) bias
            "scores_read_again": lambda: (torch.softmax(scores + masked, -1) @ v + scores @ v,),
            "returned": lambda: (lambda x: (torch.softmax(x, -1) @ v, x))(scores + masked),
            "small": lambda: (torch.softmax(scores + masked, -1) @ v,),
            "other_dim": lambda: (torch.softmax(scores + masked, -2) @ v,),
        }[case]()

    gm = _traced(fn, _args(16 if case == "small" else S))
    assert store_softmax_inputs(gm) == 0


def test_softmax_inputs_of_attention_layers_marked_when_planned_for_inductor():
    """Eager-style attention with an HF padding mask (B, 1, 1, S) and a position bias (1, H, S, S),
    three layers, planned for Inductor: every forward softmax reads a mark, no recomputed one
    does, and the gradients equal eager's."""

    class Layers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.ModuleList(torch.nn.Linear(H * D, 3 * H * D) for _ in range(3))
            self.bias = torch.nn.Parameter(torch.randn(1, H, S, S) * 0.1)
            self.out = torch.nn.Linear(H * D, 8)

        def forward(self, x, valid):
            mask = torch.where(valid[:, None, None, :], 0.0, torch.finfo(torch.float32).min)
            for qkv in self.qkv:
                q, k, v = (t.view(B, S, H, D).transpose(1, 2) for t in qkv(x).chunk(3, dim=-1))
                p = torch.softmax(q @ k.transpose(-1, -2) * D**-0.5 + self.bias + mask, dim=-1)
                x = x + torch.tanh((p @ v).transpose(1, 2).reshape(B, S, H * D))
            return self.out(x)

    torch.manual_seed(0)
    model, x, valid = Layers(), torch.randn(B, S, H * D), _args()[-1]
    model(x, valid).square().sum().backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    calls = []
    torch.compile(model, backend=inductor_mode_backend(partition, calls))(x, valid).square().sum().backward()
    (fw, bw, _), = calls
    assert len(_softmax_marks(fw)) == 3 and not _softmax_marks(bw)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, ref[n], rtol=1e-4, atol=1e-5)


def test_measured_peak_is_the_same_without_the_marks(monkeypatch):
    """Through Inductor, kernels compiled: a training step of masked-bias attention layers measures
    the same peak with the softmax inputs stored as without (the scores' buffer takes each)."""

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(H * D, 3 * H * D)
            self.bias = torch.nn.Parameter(torch.randn(1, H, S, S) * 0.1)

        def forward(self, x, valid):
            for _ in range(2):
                q, k, v = (t.view(B, S, H, D).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
                x = x + _masked_bias_attention(q, k, v, self.bias, valid)[0].transpose(1, 2).reshape(B, S, H * D)
            return x

    torch.manual_seed(0)
    x, valid = torch.randn(B, S, H * D), _args()[-1]
    peaks, marked = [], []
    for on in (True, False):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = Layer()
        count = (lambda gm, **kw: marked.append(row_kernels.store_softmax_inputs(gm, **kw)) or marked[-1]) if on else \
            (lambda gm, **kw: 0)
        monkeypatch.setattr(partitioner, "store_softmax_inputs", count)
        with _torch.caches_disabled():
            peaks.append(peak_of_training_step(torch.compile(model, backend=fxremat.backend), (x, valid),
                                               lambda out: out.square().sum()))
    assert sum(marked) >= 2  # the forward's two softmax inputs at least
    assert peaks[0] == peaks[1]
