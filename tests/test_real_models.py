"""Real architectures: tiny HF transformers models (bench/hf_models.py) trained through fxremat.

Each case is a tiny config (2 layers, width 32, sequence 32 or 32x32 images) of a model of the
real-model suite (``python -m bench.real``): GPT-2 (sdpa with a padded attention mask; eager
attention without), Llama (padded mask), BERT (masked LM, dropout 0.1, padded mask), T5
(encoder-decoder with labels, with and without a padded mask), Qwen2 (grouped-query attention, padded
mask), BART (encoder-decoder, padded mask), ViT, ConvNeXt, ResNet, EfficientNet
(depthwise convolutions, squeeze-excite).  Two training steps (the second on fresh inputs, so a stale saved or
recomputed activation would show) through ``fxremat.make_backend(compiler="eager")`` are compared
with eager (``rtol=atol=1e-5``, as tests/test_end_to_end.py) and with PyTorch's min-cut partitioner
through the same pipeline (exact: partitioning only chooses what is saved and what recomputed).
The RNG is seeded before each step's forward, so dropout draws the same masks in every run.

Fine-tuning setups on the tiny Llama (LoRA adapters beside frozen layers, frozen bottom layers,
bfloat16 weights) are checked the same way.  One Inductor test (marked ``inductor``) runs the
smallest GPT-2 through ``fxremat.backend``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest
import torch

import fxremat
from fxremat.backend import min_cut_backend

transformers = pytest.importorskip("transformers")
from bench.hf_models import HFCase, add_lora, make_hf_case  # noqa: E402 - after the importorskip

pytestmark = pytest.mark.usefixtures("fresh_compile")

VS_EAGER = dict(rtol=1e-5, atol=1e-5)
EXACT = dict(rtol=0.0, atol=0.0)
VS_EAGER_INDUCTOR = dict(rtol=1e-4, atol=1e-4)  # Inductor fuses and reorders float math
STEP_SEEDS = (1234, 5678)

CASES = {  # test id -> (family, padded attention mask)
    "gpt2-sdpa-mask": ("gpt2-sdpa", True),
    "gpt2-eager": ("gpt2-eager", False),
    "llama-mask": ("llama", True),
    "bert-dropout-mask": ("bert", True),
    "t5": ("t5", False),
    "t5-mask": ("t5", True),
    "qwen2-mask": ("qwen2", True),
    "bart-mask": ("bart", True),
    "vit": ("vit", False),
    "convnext": ("convnext", False),
    "resnet": ("resnet", False),
    "efficientnet": ("efficientnet", False),
    # families added after the planner was built (held-out checks)
    "mistral-mask": ("mistral", True),
    "whisper-mask": ("whisper", True),
    "swin": ("swin", False),
    "regnet": ("regnet", False),
}


@pytest.fixture(autouse=True)
def _quiet_transformers():
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # config notices; no logging inside compiled code
    yield
    transformers.logging.set_verbosity(level)


@dataclasses.dataclass
class Step:
    loss: torch.Tensor
    grads: dict[str, torch.Tensor | None]
    buffers: dict[str, torch.Tensor]


class CountingBackend:
    """Counts Dynamo graphs: more than one means a graph break (or a recompile)."""

    def __init__(self, backend: Callable) -> None:
        self.backend, self.frames = backend, 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Any:
        self.frames += 1
        return self.backend(gm, example_inputs)


def two_steps(case: HFCase, backend: Callable | None, adapt: Callable[[Any], None] | None = None) -> list[Step]:
    """Two training steps of a fresh model (``backend`` None: eager), the second on the inputs of
    the case at the next seed (same shapes, other values); ``adapt(hf_model)`` edits the model
    first (fine-tuning setups)."""
    built = case.build()
    if adapt is not None:
        adapt(built.module.hf)
    fn = built.module if backend is None else torch.compile(built.module, backend=backend)
    second = dataclasses.replace(case, seed=case.seed + 1).build()
    out = []
    for (inputs, target), seed in zip([(built.inputs, built.target), (second.inputs, second.target)], STEP_SEEDS):
        built.module.zero_grad(set_to_none=True)
        torch.manual_seed(seed)
        loss = case.loss(fn(*inputs), target)
        loss.backward()
        out.append(Step(
            loss.detach().clone(),
            {n: None if p.grad is None else p.grad.clone() for n, p in built.module.named_parameters()},
            {n: b.detach().clone() for n, b in built.module.named_buffers()},
        ))
    return out


def assert_same(actual: list[Step], expected: list[Step], what: str, **tol: float) -> None:
    for i, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a.loss, e.loss, **tol, msg=lambda m: f"{what}, step {i}: loss\n{m}")
        assert a.grads.keys() == e.grads.keys(), what
        for name, g in e.grads.items():
            assert (a.grads[name] is None) == (g is None), f"{what}, step {i}: grad of {name} missing on one side"
            if g is not None:
                torch.testing.assert_close(a.grads[name], g, **tol,
                                           msg=lambda m: f"{what}, step {i}: grad of {name}\n{m}")
        for name, b in e.buffers.items():
            torch.testing.assert_close(a.buffers[name], b, **tol, msg=lambda m: f"{what}, step {i}: buffer {name}\n{m}")


@pytest.mark.parametrize("name", list(CASES))
def test_matches_eager_and_min_cut(name: str) -> None:
    case = make_hf_case(*CASES[name][:1], "tiny", CASES[name][1])
    counting = CountingBackend(fxremat.make_backend(compiler="eager"))
    actual = two_steps(case, counting)
    reports = fxremat.last_reports(clear=True)
    assert counting.frames == 1, f"{case.label}: {counting.frames} Dynamo graphs (graph break or recompile)"
    assert reports, f"{case.label}: no PartitionReport: fxremat fell back to min-cut (see its warning)"
    assert_same(actual, two_steps(case, None), f"{case.label}: fxremat vs eager", **VS_EAGER)
    torch._dynamo.reset()
    assert_same(actual, two_steps(case, min_cut_backend(compiler="eager")), f"{case.label}: fxremat vs min-cut",
                **EXACT)


def _frozen_bottom(hf: Any) -> None:
    hf.model.embed_tokens.requires_grad_(False)
    hf.model.layers[0].requires_grad_(False)


FINE_TUNING = {  # test id -> how the model is edited before training
    "lora": add_lora,
    "frozen-bottom": _frozen_bottom,
    "bfloat16-weights": lambda hf: hf.to(torch.bfloat16),
}


@pytest.mark.parametrize("setup", list(FINE_TUNING))
def test_fine_tuning_setups_match_eager_and_min_cut(setup: str) -> None:
    """Frozen parameters (no gradient, so not in the joint graph's outputs), LoRA adapters beside
    frozen layers, and a model whose weights are bfloat16: the plan is made (no fallback) and the
    gradients are eager's and min-cut's."""
    case = make_hf_case("llama", "tiny", True)
    adapt = FINE_TUNING[setup]
    actual = two_steps(case, fxremat.make_backend(compiler="eager"), adapt)
    assert fxremat.last_reports(clear=True), f"{setup}: no PartitionReport: fxremat fell back to min-cut"
    assert_same(actual, two_steps(case, None, adapt), f"{setup}: fxremat vs eager", **VS_EAGER)
    torch._dynamo.reset()
    assert_same(actual, two_steps(case, min_cut_backend(compiler="eager"), adapt), f"{setup}: fxremat vs min-cut",
                **EXACT)


def _steps_at_lengths(family: str, backend: Callable | None, seqs: tuple[int, ...]) -> list[Step]:
    """One model (padded mask) compiled once and stepped at each sequence length of ``seqs``
    (inputs of the case built at that length; ``backend`` None: eager)."""
    no_dropout = {"dropout": 0.0} if "dropout" in make_hf_case(family, "tiny").size else {}  # eager's draws differ
    built = make_hf_case(family, "tiny", True, seq=max(seqs), **no_dropout).build()  # position tables for every length
    fn = built.module if backend is None else torch.compile(built.module, backend=backend)
    out = []
    for seq in seqs:
        tiny = make_hf_case(family, "tiny", True, seed=seq, **no_dropout)
        other = dataclasses.replace(tiny, size={**tiny.size, "seq": seq}).build()
        built.module.zero_grad(set_to_none=True)
        torch.manual_seed(seq)
        loss = tiny.loss(fn(*other.inputs), other.target)
        loss.backward()
        out.append(Step(loss.detach().clone(),
                        {n: None if p.grad is None else p.grad.clone() for n, p in built.module.named_parameters()}, {}))
    return out


@pytest.mark.parametrize("family", ["llama", "t5", "gpt2-eager", "bert"])
def test_sequence_length_changing_between_steps(family: str) -> None:
    """Batches padded to their longest sequence change the sequence length from step to step:
    Dynamo's automatic dynamic shapes compile the second length as a graph with a symbolic
    sequence length, which later lengths reuse.  fxremat plans both graphs, planning for Inductor
    (its kernels not compiled: :func:`test_inductor_replay.inductor_mode_backend`), so that the
    Inductor-mode memory model runs on symbolic sizes; every step matches eager.  T5's relative
    position buckets are computed from the symbolic length.  (Through Inductor itself, HF Llama at
    lengths 48-96 and a d256 Llama at 512/1024 after a dynamic compile were checked by hand,
    2026-12-07: the latter 0.35x min-cut's peak.)"""
    from test_inductor_replay import inductor_mode_backend

    seqs = (24, 32, 40)
    calls: list = []
    actual = _steps_at_lengths(family, inductor_mode_backend(fxremat.partition, calls), seqs)
    reports = fxremat.last_reports(clear=True)
    assert len(calls) >= 2, f"{family}: expected a recompile with a symbolic sequence length, got {len(calls)} graphs"
    assert len(reports) == len(calls), f"{family}: {len(calls) - len(reports)} graphs fell back to min-cut"
    assert any(any(isinstance(s, torch.SymInt) for n in fw.graph.nodes if isinstance(v := n.meta.get("val"), torch.Tensor)
                   for s in v.shape) for fw, _, _ in calls), f"{family}: no graph with a symbolic size"
    expected = _steps_at_lengths(family, None, seqs)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_same([a], [e], f"{family}, sequence {seqs[i]}: fxremat vs eager", **VS_EAGER_INDUCTOR)


@pytest.mark.inductor
def test_inductor_gpt2_matches_eager() -> None:
    """The smallest GPT-2 (sdpa, padded mask) through the default backend, Inductor included."""
    case = make_hf_case("gpt2-sdpa", "tiny", True)
    actual = two_steps(case, fxremat.backend)
    assert fxremat.last_reports(), "no PartitionReport: fxremat fell back to min-cut"
    assert_same(actual, two_steps(case, None), f"{case.label}: fxremat + Inductor vs eager", **VS_EAGER_INDUCTOR)


def test_suite_labels_are_unique_and_published_configs_run_padded() -> None:
    """``python -m bench.real`` selects cases by label: every label names one case, and the
    published configurations (GPT-2 small, BERT-base, ...) sit beside the suite's own sizes
    without taking their labels; their language models run the padded batch only."""
    from bench.hf_models import FAMILIES, hf_cases, select_cases

    cases = hf_cases()
    labels = [c.label for c in cases]
    assert len(labels) == len(set(labels))
    published = [c for c in cases if c.kind == "published"]
    assert {c.model for c in published} >= {"gpt2-sdpa", "bert", "t5", "vit", "llama"}
    assert all(c.label.endswith("-published-mask") == FAMILIES[c.model].lm for c in published)
    assert all(c.mask for c in published if FAMILIES[c.model].lm)
    assert select_cases(cases, ["gpt2-sdpa-s512-published-mask"])[0].size["d"] == 768
