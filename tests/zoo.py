"""A zoo of small synthetic models for fxremat's correctness and memory tests.

Every entry is a factory ``make_<name>(seed=0) -> ZooCase``; ``ZOO`` maps the
name to a zero-argument factory.  Models are fp32, CPU, deterministic given the
seed (parameters and inputs are built under ``torch.manual_seed(seed)``), and
small enough that one eager forward+backward takes well under 0.2 s on a CPU.
Each call builds fresh modules and inputs, so cases can be mutated freely.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from fxremat.demo import BasicBlock, GPTBlock  # blocks shared by the demo, the zoo and the bench



@dataclasses.dataclass(frozen=True, eq=False)  # eq on tensors is ambiguous; compare by identity
class ZooCase:
    name: str
    model: nn.Module
    inputs: tuple
    dynamic_dims: tuple[tuple[int, int], ...] = ()  # (input index, dim) to mark dynamic
    uses_dropout: bool = False
    sequential: nn.Sequential | None = None  # same modules as `model`, for checkpoint_sequential


# ---------------------------------------------------------------- building blocks


def _mlp(width: int, layers: int, dropout: float = 0.0) -> nn.Sequential:
    mods: list[nn.Module] = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i < layers - 1:
            mods.append(nn.GELU())
            if dropout:
                mods.append(nn.Dropout(p=dropout))
    return nn.Sequential(*mods)


def _resnet(blocks: int, channels: int) -> nn.Sequential:
    stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU())
    head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))
    return nn.Sequential(stem, *[BasicBlock(channels) for _ in range(blocks)], head)


class GPT(nn.Module):
    def __init__(self, layers: int, d: int, heads: int, seq: int, vocab: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


class UNet(nn.Module):
    """3 encoder levels (conv-relu, maxpool), bottleneck, 3 decoder levels
    (nearest upsample, concat skip, conv-relu)."""

    def __init__(self, cin: int = 3, chans: tuple[int, ...] = (8, 16, 32)) -> None:
        super().__init__()
        self.enc = nn.ModuleList()
        c = cin
        for ch in chans:
            self.enc.append(nn.Conv2d(c, ch, 3, padding=1))
            c = ch
        self.mid = nn.Conv2d(c, c, 3, padding=1)
        self.dec = nn.ModuleList()
        for ch in reversed(chans):
            self.dec.append(nn.Conv2d(c + ch, ch, 3, padding=1))
            c = ch
        self.out = nn.Conv2d(c, cin, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for conv in self.enc:
            x = F.relu(conv(x))
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = F.relu(self.mid(x))
        for conv, skip in zip(self.dec, reversed(skips)):
            x = F.interpolate(x, scale_factor=2, mode="nearest")
            x = F.relu(conv(torch.cat([x, skip], dim=1)))
        return self.out(x)


class MultiOutput(nn.Module):
    """Two inputs (the second a no-grad multiplicative mask); returns
    (differentiable output, differentiable output, argmax with no grad)."""

    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        h = torch.tanh(self.a(x)) * mask
        y1 = self.b(h)
        y2 = (h * y1).sum(dim=-1)
        return y1, y2, y1.argmax(dim=-1)


class InplaceInput(nn.Module):
    """Mutates a non-grad input (``state.add_(1)``) and a buffer
    (``self.count.add_(1)``) in place, then computes something differentiable."""

    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.register_buffer("count", torch.zeros((), dtype=torch.float32))

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        state.add_(1)
        self.count.add_(1)
        return F.gelu(self.lin(x * state)) * self.count


class DenseNet(nn.Module):
    """Dense block: layer i sees the concat of the input and all previous outputs."""

    def __init__(self, cin: int = 8, growth: int = 8, layers: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(cin + i * growth), nn.ReLU(), nn.Conv2d(cin + i * growth, growth, 3, padding=1))
            for i in range(layers)
        )
        self.head = nn.Linear(cin + layers * growth, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = [x]
        for layer in self.layers:
            feats.append(layer(torch.cat(feats, dim=1)))
        return self.head(torch.cat(feats, dim=1).mean(dim=(2, 3)))


# ---------------------------------------------------------------- factories


def make_mlp(seed: int = 0, batch: int = 32, width: int = 256) -> ZooCase:
    torch.manual_seed(seed)
    model = _mlp(width, 4)
    return ZooCase("mlp", model, (torch.randn(batch, width),), sequential=model)


def make_resnet_bn(seed: int = 0) -> ZooCase:
    torch.manual_seed(seed)
    model = _resnet(blocks=4, channels=16).train()
    return ZooCase("resnet_bn", model, (torch.randn(8, 3, 16, 16),), sequential=model)


def make_resnet_deep(seed: int = 0, blocks: int = 32, channels: int = 32, image: int = 32, batch: int = 16) -> ZooCase:
    torch.manual_seed(seed)
    model = _resnet(blocks, channels).train()
    return ZooCase("resnet_deep", model, (torch.randn(batch, 3, image, image),), sequential=model)


def make_transformer(seed: int = 0) -> ZooCase:
    torch.manual_seed(seed)
    model = GPT(layers=1, d=128, heads=4, seq=64, vocab=512)
    return ZooCase("transformer", model, (torch.randint(0, 512, (4, 64)),))


def make_gpt(seed: int = 0, layers: int = 12, d: int = 128, heads: int = 4, seq: int = 128, batch: int = 4,
             vocab: int = 512) -> ZooCase:
    torch.manual_seed(seed)
    model = GPT(layers, d, heads, seq, vocab)
    return ZooCase("gpt", model, (torch.randint(0, vocab, (batch, seq)),))


def make_dropout_mlp(seed: int = 0) -> ZooCase:
    torch.manual_seed(seed)
    model = _mlp(256, 4, dropout=0.3)
    return ZooCase("dropout_mlp", model, (torch.randn(32, 256),), uses_dropout=True, sequential=model)


def make_unet(seed: int = 0) -> ZooCase:
    torch.manual_seed(seed)
    return ZooCase("unet", UNet(), (torch.randn(2, 3, 32, 32),))


def make_multi_output(seed: int = 0) -> ZooCase:
    torch.manual_seed(seed)
    model = MultiOutput()
    mask = (torch.rand(16, 64) > 0.5).float()  # requires_grad=False
    return ZooCase("multi_output", model, (torch.randn(16, 64), mask))


def make_inplace_input(seed: int = 0) -> ZooCase:
    torch.manual_seed(seed)
    return ZooCase("inplace_input", InplaceInput(), (torch.randn(16, 64), torch.zeros(16, 64)))


def make_dynamic_batch(seed: int = 0) -> ZooCase:
    return dataclasses.replace(make_mlp(seed), name="dynamic_batch", dynamic_dims=((0, 0),))


def make_densenet(seed: int = 0) -> ZooCase:
    torch.manual_seed(seed)
    return ZooCase("densenet", DenseNet().train(), (torch.randn(4, 8, 16, 16),))


ZOO: dict[str, Callable[[], ZooCase]] = {
    "mlp": make_mlp,
    "resnet_bn": make_resnet_bn,
    "resnet_deep": lambda: make_resnet_deep(blocks=8, channels=16, image=16, batch=4),
    "transformer": make_transformer,
    "gpt": lambda: make_gpt(layers=4),
    "dropout_mlp": make_dropout_mlp,
    "unet": make_unet,
    "multi_output": make_multi_output,
    "inplace_input": make_inplace_input,
    "dynamic_batch": make_dynamic_batch,
    "densenet": make_densenet,
}


if __name__ == "__main__":
    import os
    import sys
    import time

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from fxremat.profiling import output_loss, peak_of_training_step

    def _step(case: ZooCase) -> None:
        output_loss(case.model(*case.inputs)).backward()

    print(f"{'case':<14}{'params':>9}{'fwd+bwd s':>11}{'eager peak':>14}")
    for name, factory in ZOO.items():
        case = factory()
        assert case.name == name, (case.name, name)
        for _ in range(2):  # warm-up (first calls pay one-off dispatch/allocator costs)
            _step(case)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            _step(case)
            times.append(time.perf_counter() - t0)
        dt = min(times)
        peak = peak_of_training_step(case.model, case.inputs)
        n = sum(p.numel() for p in case.model.parameters())
        print(f"{name:<14}{n:>9}{dt:>11.4f}{peak / 2**20:>11.3f} MiB")
        assert dt < 0.2, f"{name} too slow: {dt:.3f}s"
        assert all(p.grad is not None for p in case.model.parameters() if p.requires_grad), name
