"""The built-in model of ``python -m fxremat explain`` (run without a MODULE:FACTORY argument).

A 16-block residual CNN with BatchNorm (32 channels, 32x32 images, batch 8, fp32, CPU): deep
enough that checkpointing pays off clearly, small enough to compile without Inductor in seconds.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["BasicBlock", "ResidualCNN", "make_demo", "DEMO_NAME"]

DEMO_NAME = "demo: residual CNN, 16 blocks with BatchNorm, 32 channels, 32x32 images, batch 8"


class BasicBlock(nn.Module):
    """conv-BN-ReLU-conv-BN + identity skip, then ReLU."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class ResidualCNN(nn.Module):
    """Stem (conv-BN-ReLU), ``blocks`` residual blocks, global pooling and a linear classifier."""

    def __init__(self, blocks: int = 16, channels: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU())
        self.blocks = nn.Sequential(*[BasicBlock(channels) for _ in range(blocks)])
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))


def make_demo(blocks: int = 16, channels: int = 32, image: int = 32, batch: int = 8, seed: int = 0):
    """``(model, example_inputs)`` for the demo: the factory protocol of ``python -m fxremat explain``."""
    torch.manual_seed(seed)
    model = ResidualCNN(blocks, channels).train()
    return model, (torch.randn(batch, 3, image, image),)
