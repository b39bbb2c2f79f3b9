"""Custom ops are saved, never recomputed, unless someone vouches that they are pure.

A custom op (outside ``aten`` and ``prims``) may draw random numbers without saying so, so a
recomputation could differ from the forward: fxremat saves its outputs.  It recomputes one only
when it is known pure and deterministic (:data:`fxremat.analysis.PURE_CUSTOM_OPS`: transformers'
grouped matmul of MoE experts) or the user lists it in ``recomputable_ops``; a listed op whose
schema says it draws random numbers (``Tag.nondeterministic_seeded``) is still saved.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
from helpers import RecordingPartitioner, loss_of

import fxremat
from fxremat import _torch
from fxremat.backend import FxrematPartitioner, _Backend
from fxremat.options import Options

OP = "fxremat_tests::scaled_gelu"


@torch.library.custom_op(OP, mutates_args=())
def scaled_gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * 1.5


@scaled_gelu.register_fake
def _(x):
    return torch.empty_like(x)


def _scaled_gelu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return grad * 1.5 * (cdf + x * pdf)


scaled_gelu.register_autograd(_scaled_gelu_backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]))


@torch.library.custom_op("fxremat_tests::noisy_shift", mutates_args=(), tags=(torch.Tag.nondeterministic_seeded,))
def noisy_shift(x: torch.Tensor) -> torch.Tensor:
    return x + torch.rand_like(x)


@noisy_shift.register_fake
def _(x):
    return torch.empty_like(x)


noisy_shift.register_autograd(lambda ctx, grad: grad)


class WideBlocks(nn.Module):
    """``x + fc2(op(fc1(x)))`` in every block: the op's 4x wide output is what fc2's weight
    gradient reads, so a plan that does not recompute the op keeps it for every block."""

    def __init__(self, op, d: int = 64, n: int = 6) -> None:
        super().__init__()
        self.op = op
        self.fc1 = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(n))
        self.fc2 = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for fc1, fc2 in zip(self.fc1, self.fc2):
            x = x + fc2(self.op(torch.tanh(fc1(x))))
        return x


def _step(op, **options):
    """One training step through fxremat (eager compiler): the gradients and the recorded pairs."""
    torch.manual_seed(0)
    model = WideBlocks(op)
    x = torch.randn(256, 64, requires_grad=True)
    recorder = RecordingPartitioner(FxrematPartitioner(Options(**options)))
    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
    with _torch.caches_disabled():
        torch.manual_seed(1)
        loss_of(torch.compile(model, backend=_Backend(recorder, "eager"))(x)).backward()
    grads = [p.grad for p in model.parameters()] + [x.grad]
    return grads, recorder.calls, fxremat.last_reports(clear=True)


def _recomputed(calls, name: str) -> bool:
    """Whether a backward graph runs the forward op ``name`` (``namespace::op``) again."""
    target = name.replace("::", ".") + ".default"
    return any(str(n.target) == target for call in calls for n in call.bw.graph.nodes)


def test_custom_op_is_saved_unless_vouched_for():
    torch.manual_seed(0)
    eager_model = WideBlocks(scaled_gelu)
    x = torch.randn(256, 64, requires_grad=True)
    loss_of(eager_model(x)).backward()
    eager = [p.grad for p in eager_model.parameters()] + [x.grad]

    saved_grads, saved_calls, saved_reports = _step(scaled_gelu)
    assert not _recomputed(saved_calls, OP)
    vouched_grads, vouched_calls, vouched_reports = _step(scaled_gelu, recomputable_ops=(OP,))
    assert _recomputed(vouched_calls, OP)
    assert vouched_reports[0].chosen == "fxremat" and vouched_reports[0].plan.checkpoints
    # the op's outputs no longer held for every block
    assert vouched_reports[0].predicted_peak_bytes < 0.8 * saved_reports[0].predicted_peak_bytes
    for ours, theirs, ref in zip(vouched_grads, saved_grads, eager):
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
        assert torch.equal(ours, theirs)  # a deterministic op recomputed: the same bits


def test_vouched_op_given_as_a_torch_op():
    _, calls, _ = _step(scaled_gelu, recomputable_ops=(torch.ops.fxremat_tests.scaled_gelu,))
    assert _recomputed(calls, OP)


def test_listed_op_that_declares_randomness_stays_saved():
    _, calls, reports = _step(noisy_shift, recomputable_ops=("fxremat_tests::noisy_shift",))
    assert reports and not _recomputed(calls, "fxremat_tests::noisy_shift")


def test_hf_moe_experts_are_recomputed():
    """transformers' grouped matmul of MoE experts (a custom op under torch.compile with float32
    expert weights) is known pure: a plan may recompute it, and the gradients match eager's."""
    transformers = pytest.importorskip("transformers")
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        torch.manual_seed(0)
        cfg = Qwen3MoeConfig(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=128,
                             num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                             num_experts=4, num_experts_per_tok=2, max_position_embeddings=128, use_cache=False)
        hf = Qwen3MoeForCausalLM(cfg)
        ids = torch.randint(0, 256, (2, 128))

        def run(backend):
            hf.zero_grad(set_to_none=True)
            fn = hf if backend is None else torch.compile(hf, backend=backend)
            fn(input_ids=ids, labels=ids).loss.backward()
            return [p.grad.clone() for p in hf.parameters()]

        eager = run(None)
        recorder = RecordingPartitioner(FxrematPartitioner(Options()))
        torch._dynamo.reset()
        with _torch.caches_disabled():
            ours = run(_Backend(recorder, "eager"))
        torch._dynamo.reset()
    finally:
        transformers.logging.set_verbosity(level)
    assert _recomputed(recorder.calls, "transformers::grouped_mm_fallback")
    for a, b in zip(ours, eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
