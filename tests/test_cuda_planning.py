"""fxremat's plans for CUDA joint graphs, checked without a GPU (tests/fake_cuda.py).

On a GPU the partitioner meets what a CPU never shows it: CUDA's memory-efficient attention (a
Philox seed and offset its backward reads) and, for a random op it recomputes outside Inductor's
seeded random numbers (an attention with dropout), torch's graph-safe RNG functionalization, which
adds one generator-state input per random op to each graph; AOTAutograd finds them by name
(``fwd_rng_state_*``) after partitioning and passes them *last*.  Each tiny HF model's first joint
graph as Inductor hands it to its partitioner, traced on the CPU and re-expressed on fake CUDA
tensors, must be planned without a fallback, predicted at or below min-cut's peak, keep those
inputs last and paired, and run on fake tensors to gradients of the primals' shapes.  Needs a CUDA
build of torch, not a GPU (with none, a generator state is a CPU generator's, which only the
graphs' metadata holds).
"""

from __future__ import annotations

import logging

import pytest
import torch
import torch.fx as fx
from fake_cuda import as_cuda, capture_joint, cuda_build

import fxremat

transformers = pytest.importorskip("transformers")
from bench.hf_models import make_hf_case  # noqa: E402 - after the importorskip

pytestmark = [pytest.mark.usefixtures("fresh_compile"),
              pytest.mark.skipif(not cuda_build(), reason="a CPU-only torch build cannot make fake CUDA tensors")]

CASES = {  # test id -> (family, padded attention mask, attention dropout on the GPU)
    "bert-dropout-mask": ("bert", True, None),  # dropout: Inductor's random numbers from seeds
    "llama-mask": ("llama", True, None),  # memory-efficient attention with a mask (bias)
    "llama-attention-dropout": ("llama", True, 0.1),  # a random attention: graph-safe RNG states
    "t5-mask": ("t5", True, None),  # encoder-decoder, a position bias shared by the layers
    "vit": ("vit", False, None),
    "resnet": ("resnet", False, None),  # batch norm, convolutions
}


_graphsafe = torch._prims.rng_prims.graphsafe_run_with_rng_state


def _rng_states(gm: fx.GraphModule, prefix: str) -> tuple[list[int], int]:
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    return [i for i, name in enumerate(names) if name.startswith(prefix)], len(names)


def _run_on_fakes(fw: fx.GraphModule, bw: fx.GraphModule, mode) -> tuple[list, list]:
    """The pair run on fake tensors: the forward on its placeholders' values, the backward on the
    forward's outputs it reads (by name) and its other placeholders' values (tangents, RNG states)."""
    with mode:
        outs = fw(*[p.meta["val"] for p in fw.graph.find_nodes(op="placeholder")])
        produced = dict(zip((a.name if isinstance(a, fx.Node) else None for a in fw.graph.output_node().args[0]), outs))
        args = [produced[p.name] if p.name in produced else p.meta["val"] for p in bw.graph.find_nodes(op="placeholder")]
        return list(outs), list(bw(*args))


@pytest.mark.parametrize("name", list(CASES))
def test_cuda_joint_graph_planned_without_fallback(name: str, caplog: pytest.LogCaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    family, mask, attention_dropout = CASES[name]
    built = make_hf_case(family, "tiny", mask=mask).build()
    joint, joint_inputs, kwargs = capture_joint(built.module, *built.inputs)
    gm, inputs, mode = as_cuda(joint, joint_inputs, attention_dropout)
    if torch.cuda.device_count() == 0:  # no GPU: the graphs' generator states are a CPU generator's
        import torch._functorch.partitioners as partitioners

        for getter in ("get_default_generator", "get_cuda_generator_meta_val"):  # torch >= 2.13, 2.11-2.12
            if hasattr(partitioners, getter):
                monkeypatch.setattr(partitioners, getter, lambda device: torch.Generator())
    fxremat.last_reports(clear=True)
    with caplog.at_level(logging.WARNING, logger="fxremat"), mode:
        fw, bw = fxremat.partition(gm, inputs, **{**kwargs, "compiler": "inductor"})
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    (report,) = fxremat.last_reports()
    assert report.chosen == "fxremat" and report.predicted_peak_bytes <= report.min_cut.peak_bytes

    fw_states, fw_inputs = _rng_states(fw, "fwd_rng_state")
    bw_states, bw_inputs = _rng_states(bw, "bwd_rng_state")
    assert len(fw_states) == len(bw_states)
    assert fw_states == list(range(fw_inputs - len(fw_states), fw_inputs))  # last: AOTAutograd appends them
    assert bw_states == list(range(bw_inputs - len(bw_states), bw_inputs))
    if attention_dropout:  # recomputed, a random attention replays the forward's draws
        assert fw_states and any(n.target is _graphsafe for n in bw.graph.nodes)

    primals = [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder") if n.name.startswith("primals")]
    _, grads = _run_on_fakes(fw, bw, mode)
    assert len(grads) == len(primals)
    for grad, primal in zip(grads, primals):
        if grad is not None:
            assert grad.shape == primal.shape and grad.device.type == "cuda"
