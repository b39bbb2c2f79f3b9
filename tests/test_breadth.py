"""A few of bench/breadth_*.py's third-party-style cases through the eager compiler: each is
planned without a fallback warning, and its gradients equal min-cut's exactly (same pipeline, no
Inductor: partitioning only chooses what is saved and what recomputed) and eager's to 1e-5 of each
gradient's largest entry.  The whole set, and Inductor peaks: ``python -m bench.breadth [--inductor]``."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from bench.breadth import run_case  # noqa: E402 - after the importorskip

pytestmark = pytest.mark.usefixtures("fresh_compile")

NAMES = ["meta-llama-complex", "moe-topk", "custom-fn", "nograd-part", "emb-scatter", "shared-layers", "mistral",
         "conv-decoder",
         # round 6 (held out, 2026-12-06): MLA + grouped sigmoid routing; Mamba-2's chunked scan
         "deepseek-v3", "mamba2",
         # round 8 (2026-12-07): sparse embedding-bag gradients (fell back before 86a3fce)
         "sparse-bag-dlrm",
         # round 9 (2026-12-07): fine-tuning heads and inputs: a 4-D packed-sequence mask with restarting
         # positions, choices folded into the batch, a gradient for inputs_embeds
         "llama-packed-4d-mask", "bert-multiple-choice", "embeds-need-grad"]


@pytest.mark.parametrize("name", NAMES)
def test_breadth_case_planned_and_exact(name: str) -> None:
    r = run_case(name, "eager")
    assert r["graphs"], f"{name}: nothing partitioned"
    assert not r["fallback_warnings"], r["fallback_warnings"]
    assert r["fxremat_vs_min_cut"][0] == 0.0, r["fxremat_vs_min_cut"]
    assert r["fxremat_vs_eager"][0] <= 1e-5, r["fxremat_vs_eager"]


def test_gradient_error_reads_rounding_noise_of_a_zero_gradient_as_noise() -> None:
    """A gradient zero in exact arithmetic (an attention key's bias) is float32 noise of ~1e-12 that
    differs between kernel orders: relative to its own largest entry it read as an error of order 1
    (HF Swin through Inductor, min-cut and fxremat alike).  It is compared on the model's scale; a
    real difference in a small gradient still shows."""
    from bench.breadth import _error

    eager = (torch.tensor(1.0), {"w": torch.tensor([0.5, -0.2]), "key_bias": torch.tensor([2e-12, -1e-12])})
    noise = (torch.tensor(1.0), {"w": torch.tensor([0.5, -0.2]), "key_bias": torch.tensor([-1e-12, 3e-12])})
    assert _error(noise, eager)[0] < 1e-4  # 4e-12 on a scale of 0.5e-6
    small = (torch.tensor(1.0), {"w": torch.tensor([1e-3, 0.0]), "b": torch.tensor([1e-4, 0.0])})
    wrong = (torch.tensor(1.0), {"w": torch.tensor([1e-3, 0.0]), "b": torch.tensor([0.0, 0.0])})
    assert _error(wrong, small) == (1.0, "b")
