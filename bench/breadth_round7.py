"""Breadth cases, round 7 (2026-12-06): torchvision-style convnets that the earlier rounds lack, written from
their papers (torchvision's CPU wheels do not load against the CPU torch): DenseNet-BC (every layer reads the
concatenation of all earlier layers' outputs of its block), ShuffleNetV2 (channel split, concatenation and
channel shuffle), SqueezeNet (fire modules: two expand convolutions concatenated; dropout before a
convolutional classifier) and ResNeXt (grouped 3x3 bottlenecks).

``ROUND7``: tiny sizes for ``python -m bench.breadth``; ``MEDIUM_ROUND7``: activation-dominated sizes for
``--medium``.  Each case is a zero-argument builder returning ``(module, inputs, loss_fn)``.  The DenseNet has
torchvision's ``memory_efficient`` mode (the bottleneck -- concatenation, norm, ReLU, 1x1 convolution -- run
under non-reentrant ``torch.utils.checkpoint``), switched on by ``gradient_checkpointing_enable()`` like an HF
model's, so ``--hf-ckpt`` measures the per-layer checkpointing a DenseNet user has today.  Seed 0 before each
build; random weights.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint

__all__ = ["ROUND7", "MEDIUM_ROUND7"]


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bn_size: int, drop: float) -> None:
        super().__init__()
        self.norm1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)
        self.drop, self.memory_efficient = drop, False

    def bottleneck(self, *features: torch.Tensor) -> torch.Tensor:
        return self.conv1(F.relu(self.norm1(torch.cat(features, 1))))

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        if self.memory_efficient and self.training:
            x = checkpoint.checkpoint(self.bottleneck, *features, use_reentrant=False)
        else:
            x = self.bottleneck(*features)
        x = self.conv2(F.relu(self.norm2(x)))
        return F.dropout(x, self.drop, self.training) if self.drop else x


class DenseNet(nn.Module):
    """DenseNet-BC: dense blocks of bottleneck layers, transitions halving channels and resolution."""

    supports_gradient_checkpointing = True

    def __init__(self, growth: int = 16, blocks: tuple[int, ...] = (4, 4, 4), init: int = 32, bn_size: int = 4,
                 drop: float = 0.0, classes: int = 100) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, init, 3, 1, 1, bias=False), nn.BatchNorm2d(init), nn.ReLU())
        self.blocks, self.transitions = nn.ModuleList(), nn.ModuleList()
        c = init
        for i, n in enumerate(blocks):
            self.blocks.append(nn.ModuleList(DenseLayer(c + j * growth, growth, bn_size, drop) for j in range(n)))
            c += n * growth
            if i < len(blocks) - 1:
                self.transitions.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                                                      nn.AvgPool2d(2)))
                c //= 2
        self.norm, self.fc = nn.BatchNorm2d(c), nn.Linear(c, classes)

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None) -> None:
        """torchvision's ``memory_efficient=True`` (non-reentrant checkpoint of every bottleneck)."""
        for layer in self.modules():
            if isinstance(layer, DenseLayer):
                layer.memory_efficient = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for i, layers in enumerate(self.blocks):
            features = [x]
            for layer in layers:
                features.append(layer(features))
            x = torch.cat(features, 1)
            if i < len(self.transitions):
                x = self.transitions[i](x)
        return self.fc(F.adaptive_avg_pool2d(F.relu(self.norm(x)), 1).flatten(1))


def _shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.stride, half = stride, cout // 2
        if stride > 1:
            self.left = nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
                                      nn.Conv2d(cin, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(inplace=True))
        first = cin if stride > 1 else half
        self.right = nn.Sequential(
            nn.Conv2d(first, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(inplace=True),
            nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False), nn.BatchNorm2d(half),
            nn.Conv2d(half, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(inplace=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat((a, self.right(b)), 1)
        else:
            out = torch.cat((self.left(x), self.right(x)), 1)
        return _shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, repeats: tuple[int, ...] = (3, 5, 3), channels: tuple[int, ...] = (24, 48, 96, 192),
                 classes: int = 100) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels[0], 3, 2, 1, bias=False), nn.BatchNorm2d(channels[0]),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        units, c = [], channels[0]
        for r, cout in zip(repeats, channels[1:]):
            units += [ShuffleUnit(c, cout, 2)] + [ShuffleUnit(cout, cout, 1) for _ in range(r)]
            c = cout
        self.stages = nn.Sequential(*units)
        self.head = nn.Sequential(nn.Conv2d(c, 256, 1, bias=False), nn.BatchNorm2d(256), nn.ReLU(inplace=True))
        self.fc = nn.Linear(256, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.head(self.stages(self.stem(x))).mean([2, 3]))


class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1, self.expand3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.squeeze(x), inplace=True)
        return torch.cat([F.relu(self.expand1(x), inplace=True), F.relu(self.expand3(x), inplace=True)], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1; ``dropout`` before the convolutional classifier (0.5 in the paper)."""

    def __init__(self, dropout: float = 0.5, classes: int = 100) -> None:
        super().__init__()
        pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), pool(), Fire(64, 16, 64), Fire(128, 16, 64), pool(),
            Fire(128, 32, 128), Fire(256, 32, 128), pool(), Fire(256, 48, 192), Fire(384, 48, 192),
            Fire(384, 64, 256), Fire(512, 64, 256))
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Conv2d(512, classes, 1), nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x)).flatten(1)


class ResNeXtBlock(nn.Module):
    def __init__(self, cin: int, width: int, cout: int, stride: int, groups: int = 8) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNeXt(nn.Module):
    def __init__(self, layers: tuple[int, ...] = (2, 2, 2), classes: int = 100) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        blocks, c = [], 32
        for i, n in enumerate(layers):
            for j in range(n):
                blocks.append(ResNeXtBlock(c, 64 * 2**i, 128 * 2**i, 2 if j == 0 and i > 0 else 1))
                c = 128 * 2**i
        self.body, self.fc = nn.Sequential(*blocks), nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(self.stem(x)).mean([2, 3]))


def _cross_entropy(out: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out, torch.arange(out.shape[0]) % out.shape[1])


def _case(cls, batch: int, image: int, **kw):
    def build():
        torch.manual_seed(0)
        return cls(**kw), (torch.randn(batch, 3, image, image),), _cross_entropy
    return build


ROUND7 = {
    # dense blocks: each layer concatenates every earlier output of its block; transitions avg-pool
    "tv-densenet": _case(DenseNet, 2, 16, growth=8, blocks=(3, 3), init=16, classes=10),
    # channel split / concatenation / channel shuffle, depthwise 3x3, in-place ReLU
    "tv-shufflenetv2": _case(ShuffleNetV2, 2, 32, repeats=(1, 2), channels=(8, 16, 32), classes=10),
    # fire modules (two expand convolutions concatenated), dropout 0.5, convolutional classifier
    "tv-squeezenet": _case(SqueezeNet, 2, 48, classes=10),
    # grouped 3x3 bottlenecks with projection shortcuts
    "tv-resnext": _case(ResNeXt, 2, 16, layers=(1, 1), classes=10),
}

MEDIUM_ROUND7 = {
    # DenseNet-BC, growth 16, three blocks of 4 layers, 64 px, batch 8 (no dropout: gradients compare with eager)
    "tv-densenet": _case(DenseNet, 8, 64),
    "tv-shufflenetv2": _case(ShuffleNetV2, 8, 128),
    "tv-squeezenet": _case(SqueezeNet, 8, 128, dropout=0.0),
    "tv-resnext": _case(ResNeXt, 8, 64),
}
