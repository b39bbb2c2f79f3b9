"""Correctness hazards from torch's own modules and functional APIs that people compile for training:
flex_attention's higher-order ops, parametrizations that update buffers in the forward (spectral
norm), a forward that renormalises its own weight in place (Embedding's ``max_norm``), ensembles
under ``torch.func.vmap``, graph message passing (``scatter_reduce``), learnable fake quantization.

Same harness and tolerances as tests/test_hazards.py (``check_hazard``): one seeded step under eager,
min-cut and fxremat; fxremat equal to eager within tolerance and to min-cut exactly, the whole
state_dict after the step included, no fallback; under ``forced`` fxremat's own plan is used and
must recompute something.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from test_hazards import CONFIGS, check_hazard, recording

pytestmark = pytest.mark.usefixtures("fresh_compile")


class FlexBlocks(nn.Module):
    """flex_attention with a causal + per-sequence length block mask and a learnable relative-position
    bias in its score_mod (the bias's gradient comes out of flex_attention_backward)."""

    def __init__(self, d: int = 64, heads: int = 4, layers: int = 3, seq: int = 64) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))
        self.out = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
        self.bias = nn.Parameter(torch.randn(2 * seq) * 0.1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        b, s, d = x.shape
        bias = self.bias

        def mask_mod(bi, hi, qi, ki):
            return (qi >= ki) & (ki < lengths[bi])

        def score_mod(score, bi, hi, qi, ki):
            return score + bias[qi - ki + s]

        block = create_block_mask(mask_mod, b, None, s, s, device="cpu")
        for qkv, out in zip(self.qkv, self.out):
            q, k, v = qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = flex_attention(q, k, v, score_mod=score_mod, block_mask=block)
            x = x + out(torch.tanh(a.transpose(1, 2).reshape(b, s, d)))
        return x


@pytest.fixture
def one_thread():
    """One intra-op thread for the test, restored after it: a parallel accumulation (index_put with
    accumulate) is not bitwise reproducible, and fxremat is compared with min-cut exactly."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_flex_attention(config, monkeypatch, one_thread):
    # torch refuses flex_attention's backward on CPU up front, although the higher-order op's dense
    # implementation (what the eager compiler runs) computes it; lifted so the plan is checked here.
    import torch.nn.attention.flex_attention as flex

    monkeypatch.setattr(flex, "_validate_device", lambda *args: None)
    config, recorders = recording(config)
    check_hazard(lambda: (FlexBlocks(), (torch.randn(2, 64, 64, requires_grad=True), torch.tensor([64, 40]))), config)
    targets = {str(n.target) for r in recorders for call in r.calls for n in call.bw.graph.nodes}
    assert "flex_attention_backward" in targets, f"no flex_attention_backward in the backward: {sorted(targets)[:20]}"


class SpectralNormMLP(nn.Module):
    """Linears under parametrizations.spectral_norm: each training forward runs a power iteration that
    updates the buffers u and v in place, then divides the weight by the estimated norm."""

    def __init__(self, d: int = 64, n: int = 4) -> None:
        super().__init__()
        from torch.nn.utils.parametrizations import spectral_norm

        self.layers = nn.ModuleList(spectral_norm(nn.Linear(d, d)) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + torch.tanh(layer(x))
        return x


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_spectral_norm_buffers_updated_in_forward(config):
    check_hazard(lambda: (SpectralNormMLP(), (torch.randn(64, 64, requires_grad=True),)), config)


class EmbeddingMaxNorm(nn.Module):
    """``nn.Embedding(max_norm=1)``: the forward renormalises the looked-up rows of the weight in place
    (under no_grad) before reading them; the weight's gradient must be taken at the renormalised rows."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 64, max_norm=1.0)
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(4))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        for layer in self.layers:
            h = h + torch.tanh(layer(h))
        return h


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_embedding_max_norm_renormalises_its_weight(config):
    def factory():
        model = EmbeddingMaxNorm()
        with torch.no_grad():
            model.emb.weight.mul_(3.0)  # every row above max_norm: the renormalisation changes them all
        return model, (torch.randint(0, 100, (8, 32)),)

    check_hazard(factory, config)


class VmapEnsemble(nn.Module):
    """An ensemble: ``torch.func.functional_call`` of one MLP under ``torch.func.vmap`` over stacked weights."""

    def __init__(self, members: int = 4, d: int = 64) -> None:
        super().__init__()
        self.base = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
        self.w1 = nn.Parameter(torch.randn(members, 2 * d, d) * 0.1)
        self.w2 = nn.Parameter(torch.randn(members, d, 2 * d) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def member(w1, w2, x):
            for _ in range(3):
                x = x + torch.tanh(torch.func.functional_call(self.base, {"0.weight": w1, "2.weight": w2}, (x,)))
            return x

        return torch.func.vmap(member, in_dims=(0, 0, None))(self.w1, self.w2, x).mean(0)


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_vmap_ensemble(config):
    check_hazard(lambda: (VmapEnsemble(), (torch.randn(64, 64, requires_grad=True),)), config)


class MessagePassing(nn.Module):
    """Graph message passing over an edge list given as inputs: index_select, index_add, scatter_reduce
    ("amax", which routes the gradient to the arg-max edge only) and a GRUCell update."""

    def __init__(self, d: int = 32, layers: int = 3) -> None:
        super().__init__()
        self.msg = nn.ModuleList(nn.Linear(2 * d, d) for _ in range(layers))
        self.upd = nn.ModuleList(nn.GRUCell(2 * d, d) for _ in range(layers))

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        deg = torch.zeros(x.shape[0]).index_add(0, dst, torch.ones(dst.shape[0])).clamp(min=1)
        for msg, upd in zip(self.msg, self.upd):
            m = F.relu(msg(torch.cat([x.index_select(0, src), x.index_select(0, dst)], -1)))
            mean = torch.zeros_like(x).index_add(0, dst, m) / deg[:, None]
            most = torch.zeros_like(x).scatter_reduce(0, dst[:, None].expand_as(m), m, "amax", include_self=False)
            x = upd(torch.cat([mean, most], -1), x)
        return x


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_message_passing_scatter_reduce(config):
    def factory():
        g = torch.Generator().manual_seed(3)
        return MessagePassing(), (torch.randn(64, 32), torch.randint(0, 64, (256,), generator=g),
                                  torch.randint(0, 64, (256,), generator=g))

    check_hazard(factory, config)


class LearnableFakeQuant(nn.Module):
    """Quantization-aware training with learnable scales (LSQ) on weights and activations."""

    def __init__(self, d: int = 64, n: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
        self.scale = nn.Parameter(torch.full((n,), 0.02))
        self.register_buffer("zero_point", torch.zeros(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fq = torch._fake_quantize_learnable_per_tensor_affine
        for i, layer in enumerate(self.layers):
            s, z = self.scale[i:i + 1], self.zero_point[i:i + 1]
            w = fq(layer.weight, s, z, -128, 127, 1.0)
            x = fq(x + torch.relu(F.linear(x, w, layer.bias)), s * 8, z, -128, 127, 1.0)
        return x


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_learnable_fake_quantization(config):
    check_hazard(lambda: (LearnableFakeQuant(), (torch.randn(64, 64, requires_grad=True),)), config)
