"""The built-in model of ``python -m fxremat explain`` (run without a MODULE:FACTORY argument).

A 16-block residual CNN with BatchNorm (32 channels, 32x32 images, batch 8, fp32, CPU): deep
enough that checkpointing pays off clearly, small enough to compile without Inductor in seconds.
Its residual block and a pre-LN GPT block are also the building blocks of the test zoo and the
benchmark models, so all three measure the same layers.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["BasicBlock", "GPTBlock", "ResidualCNN", "make_demo", "DEMO_NAME"]

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


class GPTBlock(nn.Module):
    """Pre-LN GPT block: x + attn(ln1(x)); x + mlp(ln2(x)); causal SDPA (shared with the zoo and the bench)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


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
