"""Long run: 150 SGD steps with fxremat vs eager, same seeds.  The loss curves agree, and the
memory allocated at the end of every step returns to its level after the first step (no saved
tensor leaks from one step into the next)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import fxremat
from fxremat import _torch
from fxremat.demo import BasicBlock
from fxremat.profiling import _allocation_events

STEPS = 150  # 300 until 2026-12-02: the default test run must stay under 20 minutes


def small_cnn() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), *[BasicBlock(16) for _ in range(3)],
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    return model, torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, d=32, layers=3, heads=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                                               norm_first=True) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        mask = nn.Transformer.generate_square_subsequent_mask(idx.shape[1])
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.head(x).flatten(0, 1)


def small_transformer() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    idx = torch.randint(0, 64, (4, 16))
    return TinyGPT(), idx, torch.randint(0, 64, (4 * 16,))


def train(factory, compiled: bool, profile_memory: bool = False):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, x, y = factory()
    step_model = torch.compile(model, backend=fxremat.make_backend(compiler="eager")) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses: list[float] = []

    def run():
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(step_model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            del loss
            marker = torch.empty(1, dtype=torch.uint8)  # its allocation event carries the allocator total
            del marker

    if not profile_memory:
        run()
        return losses, None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    # The 1-byte markers' allocation events, in time order, carry the allocator's total at each step end.
    ends = [total for _, _, size, total, _ in _allocation_events(prof) if size == 1]
    return losses, ends


@pytest.mark.parametrize("factory", [small_cnn, small_transformer], ids=["residual_cnn", "transformer"])
def test_150_steps_match_eager_and_do_not_leak(factory):
    with _torch.caches_disabled():
        eager, _ = train(factory, compiled=False)
        ours, ends = train(factory, compiled=True, profile_memory=True)
    assert len(ours) == len(eager) == STEPS
    torch.testing.assert_close(torch.tensor(ours), torch.tensor(eager), rtol=1e-3, atol=1e-4)
    assert ours[-1] < ours[0]  # it trains
    assert len(ends) >= STEPS
    ends = ends[-STEPS:]
    baseline = ends[1]  # after the first step (optimizer state, grads) everything is steady
    assert max(ends[1:]) <= baseline + 4096, f"memory at step ends grows: {ends[1]} -> {max(ends[1:])}"
    torch._dynamo.reset()
