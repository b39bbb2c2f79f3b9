"""Correctness hazards from torch's own modules and functional APIs that people compile for training:
flex_attention's higher-order ops, parametrizations that update buffers in the forward (spectral
norm), a forward that renormalises its own weight in place (Embedding's ``max_norm``), ensembles
under ``torch.func.vmap``, graph message passing (``scatter_reduce``), learnable fake quantization.

The models are bench/breadth_models.py's (the breadth cases of the same names).  Same harness and
tolerances as tests/test_hazards.py (``check_hazard``): one seeded step under eager,
min-cut and fxremat; fxremat equal to eager within tolerance and to min-cut exactly, the whole
state_dict after the step included, no fallback; under ``forced`` fxremat's own plan is used and
must recompute something.
"""

from __future__ import annotations

import pytest
import torch

from test_hazards import CONFIGS, check_hazard, recording

from bench.breadth_models import GNN, EmbMaxNorm, FlexAttn, LSQNet, SpectralNormMLP, VmapEnsemble

pytestmark = pytest.mark.usefixtures("fresh_compile")


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_flex_attention(config, monkeypatch, one_thread):
    """flex_attention with a causal + per-sequence length block mask and a relative-position bias
    parameter read by its score_mod (the bias's gradient comes out of flex_attention_backward)."""
    # torch refuses flex_attention's backward on CPU up front, although the higher-order op's dense
    # implementation (what the eager compiler runs) computes it; lifted so the plan is checked here.
    import torch.nn.attention.flex_attention as flex

    monkeypatch.setattr(flex, "_validate_device", lambda *args: None)
    config, recorders = recording(config)
    check_hazard(lambda: (FlexAttn(), (torch.randn(2, 64, 64, requires_grad=True), torch.tensor([64, 40]))), config)
    targets = {str(n.target) for r in recorders for call in r.calls for n in call.bw.graph.nodes}
    assert "flex_attention_backward" in targets, f"no flex_attention_backward in the backward: {sorted(targets)[:20]}"


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_spectral_norm_buffers_updated_in_forward(config):
    """parametrizations.spectral_norm: each training forward runs a power iteration that updates the
    buffers u and v in place, then divides the weight by the estimated norm."""
    check_hazard(lambda: (SpectralNormMLP(), (torch.randn(32, 64, requires_grad=True),)), config)


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_embedding_max_norm_renormalises_its_weight(config):
    """``nn.Embedding(max_norm=1)``: the forward renormalises the looked-up rows of the weight in
    place (under no_grad) before reading them; the weight's gradient is taken at the renormalised rows."""
    def factory():
        model = EmbMaxNorm()
        with torch.no_grad():
            model.emb.weight.mul_(3.0)  # every row above max_norm: the renormalisation changes them all
        return model, (torch.randint(0, 100, (8, 32)),)

    check_hazard(factory, config)


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_vmap_ensemble(config):
    """An ensemble: ``torch.func.functional_call`` of one MLP under ``torch.func.vmap`` over stacked weights."""
    check_hazard(lambda: (VmapEnsemble(), (torch.randn(64, 64, requires_grad=True),)), config)


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_message_passing_scatter_reduce(config):
    """Message passing over an edge list given as inputs: index_select, index_add, scatter_reduce
    ("amax": the gradient goes to the arg-max edge only), a GRUCell update."""
    def factory():
        g = torch.Generator().manual_seed(3)
        return GNN(), (torch.randn(64, 32), torch.randint(0, 64, (256,), generator=g),
                       torch.randint(0, 64, (256,), generator=g))

    check_hazard(factory, config)


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_learnable_fake_quantization(config):
    """Quantization-aware training with learnable scales (LSQ) on weights and activations."""
    check_hazard(lambda: (LSQNet(), (torch.randn(64, 64, requires_grad=True),)), config)
