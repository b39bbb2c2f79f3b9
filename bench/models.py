"""The benchmark's models, written here (no downloads), each sized for the device it runs on.

A :class:`Case` is one model at one size: ``case.build()`` returns fresh modules and inputs,
deterministic given ``case.seed`` (parameters, inputs and targets are drawn under
``torch.manual_seed``), so every contender gets an identical copy.  Every model that is a sequence
of layers *is* an ``nn.Sequential`` (stem, blocks, head), so ``checkpoint_sequential`` runs on
exactly the module the other contenders compile.

Families:

* ``resnet``: CIFAR-style ResNet of ``depth`` BasicBlocks (conv-BN-ReLU-conv-BN + identity), the
  network Chen et al. checkpoint to 1,000 layers (``depth`` blocks = ``2 * depth`` conv layers);
* ``resnet50``: ImageNet-shaped ResNet with bottleneck blocks (strided stages, 7x7 stem, maxpool);
* ``gpt``: GPT-2-like pre-LN transformer, causal SDPA, token + learned position embeddings;
* ``unet``: U-Net (double conv-BN-ReLU per level, maxpool down, nearest upsample + concat up):
  not a sequence, its skips span the network.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from fxremat.demo import BasicBlock, GPTBlock  # blocks shared by the demo, the zoo and the bench

__all__ = ["Case", "Built", "MODELS", "make_case", "default_depths"]


@dataclasses.dataclass(frozen=True)
class Built:
    module: nn.Module
    inputs: tuple[torch.Tensor, ...]
    target: torch.Tensor


@dataclasses.dataclass(frozen=True)
class Case:
    model: str  # family: resnet, resnet50, gpt, unet
    label: str  # e.g. "resnet-32"
    size: dict[str, Any]  # every size parameter, for the report
    sequential: bool  # the module is an nn.Sequential (checkpoint_sequential applies)
    depth: int | None  # blocks, for the depth sweep (resnet family)
    factory: Callable[..., Built] = dataclasses.field(repr=False)
    seed: int = 0

    def build(self, device: str | torch.device = "cpu", **overrides: Any) -> Built:
        """Fresh module, inputs and target on ``device`` (``overrides`` replace size entries,
        e.g. ``batch`` for the largest-batch search)."""
        size = {**self.size, **overrides}
        torch.manual_seed(self.seed)
        built = self.factory(**size)
        module = built.module.to(device).train()
        return Built(module, tuple(t.to(device) for t in built.inputs), built.target.to(device))

    def loss(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return LOSSES[self.model](out, target)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.size.items())


# ------------------------------------------------------------------------------- ResNet (CIFAR)


def build_resnet(depth: int, channels: int, image: int, batch: int, classes: int = 10) -> Built:
    stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU())
    head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes))
    module = nn.Sequential(stem, *[BasicBlock(channels) for _ in range(depth)], head)
    return Built(module, (torch.randn(batch, 3, image, image),), torch.randint(0, classes, (batch,)))


# ------------------------------------------------------------------------ ResNet-50 (bottleneck)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand (x4), each with BN; projection shortcut when the
    shape changes."""

    def __init__(self, cin: int, mid: int, stride: int) -> None:
        super().__init__()
        cout = 4 * mid
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + self.shortcut(x))


def build_resnet50(stages: tuple[int, ...], width: int, image: int, batch: int, classes: int = 1000) -> Built:
    mods: list[nn.Module] = [
        nn.Sequential(
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
    ]
    cin = width
    for i, blocks in enumerate(stages):
        mid = width * 2**i
        for j in range(blocks):
            mods.append(Bottleneck(cin, mid, stride=2 if (j == 0 and i > 0) else 1))
            cin = 4 * mid
    mods.append(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)))
    return Built(nn.Sequential(*mods), (torch.randn(batch, 3, image, image),), torch.randint(0, classes, (batch,)))


# ------------------------------------------------------------------------------------ GPT-2-like


class Embed(nn.Module):
    def __init__(self, vocab: int, d: int, seq: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.tok(idx) + self.pos[: idx.shape[1]]


def build_gpt(layers: int, d: int, heads: int, seq: int, batch: int, vocab: int) -> Built:
    head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, vocab, bias=False))
    module = nn.Sequential(Embed(vocab, d, seq), *[GPTBlock(d, heads) for _ in range(layers)], head)
    return Built(module, (torch.randint(0, vocab, (batch, seq)),), torch.randint(0, vocab, (batch, seq)))


# ----------------------------------------------------------------------------------------- U-Net


def _double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
    )


class UNet(nn.Module):
    def __init__(self, levels: int, base: int, cin: int = 3, cout: int = 3) -> None:
        super().__init__()
        chans = [base * 2**i for i in range(levels)]
        self.down = nn.ModuleList()
        c = cin
        for ch in chans:
            self.down.append(_double_conv(c, ch))
            c = ch
        self.mid = _double_conv(c, 2 * c)
        c = 2 * c
        self.up = nn.ModuleList()
        for ch in reversed(chans):
            self.up.append(_double_conv(c + ch, ch))
            c = ch
        self.out = nn.Conv2d(c, cout, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.mid(x)
        for block, skip in zip(self.up, reversed(skips)):
            x = F.interpolate(x, scale_factor=2, mode="nearest")
            x = block(torch.cat([x, skip], dim=1))
        return self.out(x)


def build_unet(levels: int, base: int, image: int, batch: int) -> Built:
    return Built(UNet(levels, base), (torch.randn(batch, 3, image, image),), torch.randn(batch, 3, image, image))


# ------------------------------------------------------------------------------------ registry


def _ce(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "resnet": _ce, "resnet50": _ce, "gpt": _ce, "unet": F.mse_loss,
}
FACTORIES: dict[str, Callable[..., Built]] = {
    "resnet": build_resnet, "resnet50": build_resnet50, "gpt": build_gpt, "unet": build_unet,
}
MODELS = tuple(FACTORIES)

# Sizes: (cpu, cpu --quick, cuda, cuda --quick).  ResNet depth comes from --depths.
_SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "resnet": {
        "cpu": dict(channels=32, image=32, batch=16),
        "cpu-quick": dict(channels=8, image=16, batch=4),
        "cuda": dict(channels=64, image=32, batch=64),
        "cuda-quick": dict(channels=16, image=32, batch=16),
    },
    "resnet50": {
        "cpu": dict(stages=(3, 4, 6, 3), width=16, image=128, batch=8),
        "cpu-quick": dict(stages=(1, 1, 1, 1), width=8, image=64, batch=2),
        "cuda": dict(stages=(3, 4, 6, 3), width=64, image=224, batch=64),
        "cuda-quick": dict(stages=(1, 1, 1, 1), width=16, image=64, batch=8),
    },
    "gpt": {
        "cpu": dict(layers=12, d=128, heads=4, seq=128, batch=4, vocab=512),
        "cpu-quick": dict(layers=3, d=32, heads=2, seq=32, batch=2, vocab=64),
        "cuda": dict(layers=12, d=768, heads=12, seq=1024, batch=8, vocab=50257),
        "cuda-quick": dict(layers=4, d=128, heads=4, seq=128, batch=4, vocab=512),
    },
    "unet": {
        "cpu": dict(levels=4, base=16, image=64, batch=2),
        "cpu-quick": dict(levels=2, base=4, image=16, batch=1),
        "cuda": dict(levels=4, base=64, image=256, batch=16),
        "cuda-quick": dict(levels=3, base=16, image=64, batch=4),
    },
}
_DEPTHS = {"cpu": (8, 16, 32), "cpu-quick": (2, 4), "cuda": (32, 128, 500), "cuda-quick": (8, 32)}


def _key(device: str, quick: bool) -> str:
    return ("cuda" if device.startswith("cuda") else "cpu") + ("-quick" if quick else "")


def default_depths(device: str, quick: bool) -> tuple[int, ...]:
    return _DEPTHS[_key(device, quick)]


def make_case(model: str, device: str, quick: bool = False, depth: int | None = None, seed: int = 0) -> Case:
    """``model`` at the size for ``device`` (``depth``: ResNet blocks, required for ``resnet``)."""
    if model not in FACTORIES:
        raise ValueError(f"unknown model {model!r}; expected one of {list(MODELS)}")
    size = dict(_SIZES[model][_key(device, quick)])
    label = model
    if model == "resnet":
        if depth is None:
            raise ValueError("resnet needs a depth (blocks)")
        size = {"depth": depth, **size}
        label = f"resnet-{depth}"
    elif model == "gpt":
        label = f"gpt-{size['layers']}"
    return Case(model, label, size, sequential=model != "unet", depth=depth, factory=FACTORIES[model], seed=seed)
