"""A few of bench/breadth_models.py's third-party-style cases through the eager compiler: each is
planned without a fallback warning, and its gradients equal min-cut's exactly (same pipeline, no
Inductor: partitioning only chooses what is saved and what recomputed) and eager's to 1e-5 of each
gradient's largest entry.  The whole set, and Inductor peaks: ``python -m bench.breadth [--inductor]``."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
from bench.breadth import run_case  # noqa: E402 - after the importorskip

pytestmark = pytest.mark.usefixtures("fresh_compile")

NAMES = ["meta-llama-complex", "moe-topk", "custom-fn", "nograd-part", "emb-scatter", "shared-layers", "mistral",
         "conv-decoder",
         # round 6 (held out, 2026-12-06): MLA + grouped sigmoid routing; Mamba-2's chunked scan
         "deepseek-v3", "mamba2",
         # round 8 (2026-12-07): sparse embedding-bag gradients (fell back before 86a3fce)
         "sparse-bag-dlrm"]


@pytest.mark.parametrize("name", NAMES)
def test_breadth_case_planned_and_exact(name: str) -> None:
    r = run_case(name, "eager")
    assert r["graphs"], f"{name}: nothing partitioned"
    assert not r["fallback_warnings"], r["fallback_warnings"]
    assert r["fxremat_vs_min_cut"][0] == 0.0, r["fxremat_vs_min_cut"]
    assert r["fxremat_vs_eager"][0] <= 1e-5, r["fxremat_vs_eager"]
