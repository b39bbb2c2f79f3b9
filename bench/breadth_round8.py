"""Breadth cases, round 8 (2026-12-07): training set-ups rather than architectures -- what users put
around a model that the earlier rounds lack: frozen weights with adapters (LoRA), a gradient only for
the input, a straight-through estimator, a no-grad teacher inside the forward, unused parameters and
two losses, grouped-query SDPA, ``nn.MultiheadAttention`` with a key padding mask and returned
weights, ``nn.TransformerEncoder`` (norm first, causal mask), complex spectral layers, Gumbel-softmax
and multinomial draws, weight-norm and orthogonal parametrizations, a channels-last non-contiguous
input, cumsum/sort/interpolate, a CTC loss, sparse embedding gradients (``nn.Embedding`` and
``nn.EmbeddingBag`` with ``sparse=True``), float16 weights, an STFT front end, unfold/fold patches and
``baddbmm``/``einsum`` attention.

``ROUND8``: tiny sizes for ``python -m bench.breadth``.  Each case is a zero-argument builder returning
``(module, inputs, loss_fn)``; seed 0 before each build; random weights.  Round 8 found one fallback:
a sparse gradient has no single storage, and fxremat's analysis asked for it (fixed 2026-12-07, 86a3fce).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["ROUND8"]


class MLP(nn.Module):
    """Pre-norm residual MLP blocks."""

    def __init__(self, d: int = 64, n: int = 6) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + layer(self.norm(x))
        return x


class LoRA(nn.Module):
    def __init__(self, base: nn.Linear, rank: int = 4) -> None:
        super().__init__()
        self.base = base
        self.a = nn.Parameter(torch.randn(rank, base.in_features) * 0.1)
        self.b = nn.Parameter(torch.randn(base.out_features, rank) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.a.t()) @ self.b.t()


def _sq(out: Any) -> torch.Tensor:
    return out.float().pow(2).mean()


def lora_frozen_base():
    m = MLP()
    m.requires_grad_(False)
    for block in m.layers:
        block[0], block[2] = LoRA(block[0]), LoRA(block[2])
    return m, (torch.randn(4, 128, 64),), _sq


def input_gradient_only():
    m = MLP()
    m.requires_grad_(False)
    return m, (torch.randn(4, 128, 64, requires_grad=True),), _sq


class StraightThroughVQ(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc, self.dec, self.code = MLP(32, 3), MLP(32, 3), nn.Parameter(torch.randn(64, 32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.enc(x)
        q = self.code[torch.cdist(z.reshape(-1, 32), self.code).argmin(-1)].reshape(z.shape)
        commit = F.mse_loss(z, q.detach()) + F.mse_loss(q, z.detach())
        return self.dec(z + (q - z).detach()).pow(2).mean() + commit


class NoGradTeacher(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.student, self.teacher = MLP(), MLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            target = self.teacher(x)
        return F.mse_loss(self.student(x), target)


class TwoLosses(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.unused = MLP(), nn.Linear(64, 64)
        self.h1, self.h2 = nn.Linear(64, 3), nn.Linear(64, 5)

    def forward(self, x: torch.Tensor):
        h = self.body(x)
        return self.h1(h).logsumexp(-1).mean(), self.h2(h).softmax(-1)[..., 0].sum()


class GQACausal(nn.Module):
    def __init__(self, d: int = 64, n: int = 4) -> None:
        super().__init__()
        self.q = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
        self.kv = nn.ModuleList(nn.Linear(d, d // 2) for _ in range(n))
        self.o = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
        self.ln = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        for q, kv, o in zip(self.q, self.kv, self.o):
            h = self.ln(x)
            k = kv(h).view(b, s, 4, 8).transpose(1, 2)
            a = F.scaled_dot_product_attention(q(h).view(b, s, 8, 8).transpose(1, 2), k, k.sin(), is_causal=True,
                                               enable_gqa=True)
            x = x + o(a.transpose(1, 2).reshape(b, s, d))
        return x


class MHAPadding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.MultiheadAttention(64, 4, batch_first=True) for _ in range(3))

    def forward(self, x: torch.Tensor, pad: torch.Tensor):
        weights = 0
        for layer in self.layers:
            a, w = layer(x, x, x, key_padding_mask=pad, need_weights=True)
            x, weights = x + a, weights + w.sum()
        return x, weights


def mha_key_padding():
    pad = torch.zeros(2, 96, dtype=torch.bool)
    pad[1, 60:] = True
    return MHAPadding(), (torch.randn(2, 96, 64), pad), lambda out: out[0].sum() + out[1]


class CausalEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(96), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, mask=self.mask, is_causal=True)


class Spectral(nn.Module):
    """FNO-style layers: complex weights multiply an rFFT."""

    def __init__(self, d: int = 64, n: int = 4) -> None:
        super().__init__()
        self.w = nn.ParameterList(nn.Parameter(torch.randn(d // 2 + 1, dtype=torch.cfloat) * 0.1) for _ in range(n))
        self.lin = nn.ModuleList(nn.Linear(d, d) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for w, lin in zip(self.w, self.lin):
            x = x + F.gelu(lin(torch.fft.irfft(torch.fft.rfft(x, dim=-1) * w, n=x.shape[-1], dim=-1)))
        return x


class GumbelRouter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.route = MLP(64, 3), MLP(64, 3), nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        g = F.gumbel_softmax(self.route(h), tau=0.5, hard=True)
        pick = torch.multinomial(g.detach().reshape(-1, 16) + 0.01, 1).reshape(h.shape[:-1]).unsqueeze(-1)
        return self.b(h * g.sum(-1, keepdim=True)) * (pick.float() + 1)


def weight_norm_mlp():
    m = MLP()
    for block in m.layers:
        nn.utils.parametrizations.weight_norm(block[0])
    return m, (torch.randn(4, 128, 64),), _sq


def orthogonal_mlp():
    m = MLP(64, 3)
    for block in m.layers:
        nn.utils.parametrizations.orthogonal(block[0])
    return m, (torch.randn(4, 128, 64),), _sq


class DepthwiseResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
                          nn.Conv2d(16, 16, 1))
            for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return x.mean((2, 3))


def channels_last_view_input():
    return DepthwiseResidual(), (torch.randn(4, 32, 32, 16).permute(0, 3, 1, 2),), _sq  # NHWC memory, a view


class ScanSortResample(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(8, 8, 3, padding=1) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            y = torch.cumsum(conv(x), -1) / x.shape[-1]
            x = x + F.interpolate(torch.sort(y, -1).values[..., ::2], scale_factor=2, mode="linear")
        return x


class CTCHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc, self.out = MLP(64, 4), nn.Linear(64, 20)

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logp = self.out(self.enc(x)).log_softmax(-1).transpose(0, 1)
        return F.ctc_loss(logp, targets, torch.full((x.shape[0],), x.shape[1]), torch.full((x.shape[0],), targets.shape[1]))


class SparseEmbedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.body = nn.Embedding(1000, 64, sparse=True), MLP()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.body(self.emb(idx))


class SparseBagDLRM(nn.Module):
    """DLRM's shape: sparse embedding bags (sum) and a bottom MLP, concatenated into a top MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(500, 32, mode="sum", sparse=True) for _ in range(3))
        self.bottom = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32))
        self.top = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, dense: torch.Tensor, idx: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.top(torch.cat([self.bottom(dense)] + [bag(idx[i], offsets) for i, bag in enumerate(self.bags)], 1))


def sparse_bag_dlrm():
    batch = 64
    return SparseBagDLRM(), (torch.randn(batch, 16), torch.randint(0, 500, (3, batch * 4)), torch.arange(0, batch * 4, 4)), _sq


class STFTFrontEnd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.window, self.body = nn.Parameter(torch.hann_window(128)), MLP(65, 4)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(wav, 128, 32, window=self.window, return_complex=True).abs().pow(2).add(1e-6).log()
        return self.body(spec.transpose(1, 2))


class Patches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = MLP(48, 4)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        p = F.unfold(img, 4, stride=4).transpose(1, 2)
        return F.fold(self.body(p).transpose(1, 2), img.shape[-2:], 4, stride=4)


class BaddbmmAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.ModuleList(nn.Linear(64, 192) for _ in range(4))
        self.bias = nn.Parameter(torch.zeros(4, 1, 96, 96))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for qkv in self.qkv:
            q, k, v = qkv(x).view(4, 96, 3, 4, 16).unbind(2)
            scores = torch.baddbmm(self.bias.expand(4, 4, 96, 96).reshape(16, 96, 96), q.transpose(1, 2).reshape(16, 96, 16),
                                   k.permute(0, 2, 3, 1).reshape(16, 16, 96), alpha=0.25)
            x = x + torch.einsum("bhqk,bkhd->bqhd", scores.view(4, 4, 96, 96).softmax(-1), v).reshape(4, 96, 64)
        return x


def _seeded(build: Callable[[], tuple]) -> Callable[[], tuple]:
    def builder() -> tuple:
        torch.manual_seed(0)
        return build()

    builder.__name__ = getattr(build, "__name__", "builder")
    return builder


ROUND8: dict[str, Callable[[], tuple]] = {name: _seeded(build) for name, build in {
    "lora-frozen-base": lora_frozen_base,
    "input-grad-only": input_gradient_only,
    "straight-through-vq": lambda: (StraightThroughVQ(), (torch.randn(4, 64, 32),), lambda out: out),
    "no-grad-teacher": lambda: (NoGradTeacher(), (torch.randn(4, 128, 64),), lambda out: out),
    "two-losses-unused": lambda: (TwoLosses(), (torch.randn(4, 128, 64),), lambda out: out[0] + 0.3 * out[1]),
    "gqa-sdpa-causal": lambda: (GQACausal(), (torch.randn(2, 128, 64),), _sq),
    "mha-key-padding": mha_key_padding,
    "nn-transformer-causal": lambda: (CausalEncoder(), (torch.randn(2, 96, 64),), _sq),
    "complex-spectral": lambda: (Spectral(), (torch.randn(4, 128, 64),), _sq),
    "gumbel-multinomial": lambda: (GumbelRouter(), (torch.randn(2, 64, 64),), _sq),
    "weight-norm-mlp": weight_norm_mlp,
    "orthogonal": orthogonal_mlp,
    "channels-last-view-input": channels_last_view_input,
    "cumsum-sort-interp": lambda: (ScanSortResample(), (torch.randn(4, 8, 256),), _sq),
    "ctc-loss": lambda: (CTCHead(), (torch.randn(4, 100, 64), torch.randint(1, 20, (4, 10))), lambda out: out),
    "sparse-embedding": lambda: (SparseEmbedding(), (torch.randint(0, 1000, (4, 64)),), _sq),
    "sparse-bag-dlrm": sparse_bag_dlrm,
    "half-params": lambda: (MLP().half(), (torch.randn(4, 128, 64).half(),), _sq),
    "stft-frontend": lambda: (STFTFrontEnd(), (torch.randn(4, 8000),), _sq),
    "unfold-fold": lambda: (Patches(), (torch.randn(4, 3, 64, 64),), _sq),
    "baddbmm-einsum": lambda: (BaddbmmAttention(), (torch.randn(4, 96, 64),), _sq),
}.items()}
