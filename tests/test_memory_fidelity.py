"""Predicted vs measured memory: fxremat's memory model (:func:`fxremat.memory.simulate`) against
the CPU allocator, through ``make_backend(compiler="eager")`` (plain FX code, frees at last use).

Three levels:

* ``test_predicted_peak_within_10_percent``: the report's predicted peak of the chosen pair is
  within 10% of ``peak_of_training_step``'s measured peak (second step, after a warm-up step).
  Models that genuinely miss are ``xfail(strict=True)`` with their numbers; see KNOWN_GAPS.
* ``test_predicted_peak_matches_op_boundaries``: the same step measured only where the model
  looks (at the end of each aten op of the compiled graphs: outputs allocated, inputs not yet
  freed; scratch memory *inside* an op is invisible to the model by design).  Within 1%.
* ``test_simulate_never_frees_before_last_use``: an invariant of the model itself, replayed by hand
  from the graphs: at every node, everything that node reads and writes, the caller's user
  outputs (during the backward) and every gradient produced so far are counted.
"""

from __future__ import annotations

import bisect
from typing import Any

import pytest
import torch
import torch._dynamo
import torch.fx as fx
from torch.profiler import ProfilerActivity, profile
from helpers import RecordingPartitioner, loss_of
from zoo import ZOO, ZooCase

import fxremat
from fxremat import _torch
from fxremat.backend import min_cut_backend
from fxremat.memory import Timeline, simulate
from fxremat.profiling import _ALLOC, _allocation_events, allocation_levels, peak_of_training_step

pytestmark = pytest.mark.usefixtures("fresh_compile")

REL_TOL = 0.10  # |measured - predicted| <= 10% of measured
OP_BOUNDARY_TOL = 0.01

# Kernels' in-op scratch (convolution, batch norm backward) is part of the model
# (memory.scratch_bytes: operand reorders; on AVX512, channels off oneDNN's block of 16 padded).
# Before that padding was modelled (2026-12-06) the U-Net and the DenseNet, built from 3- and
# 8-channel convolutions, measured 12-17% above their predictions on AVX512 processors (U-Net:
# predicted 874,380 B, measured 1,049,428; DenseNet 671,368 / 786,672), their peaks inside a
# convolution backward; on AVX2 they were within 10% without it.  Every model is within 10%
# (torch 2.13, CPU, AVX2 and AVX512).
KNOWN_GAPS: dict[str, str] = {}
OP_BOUNDARY_GAPS: dict[str, str] = {}


def _params(gaps: dict[str, str]) -> list:
    return [pytest.param(n, marks=pytest.mark.xfail(raises=AssertionError, strict=True, reason=gaps[n])) if n in gaps
            else n for n in ZOO]


def compiled_and_warm(case: ZooCase) -> tuple[torch.nn.Module, fxremat.PartitionReport]:
    """Compile with fxremat (no Inductor), run one warm-up step, return the module and its report."""
    for idx, dim in case.dynamic_dims:
        torch._dynamo.mark_dynamic(case.inputs[idx], dim)
    model = torch.compile(case.model, backend=fxremat.make_backend(compiler="eager"))
    loss_of(model(*case.inputs)).backward()
    reports = fxremat.last_reports()
    assert len(reports) == 1, f"{case.name}: expected one partitioned graph, got {len(reports)}"
    return model, reports[-1]


# ------------------------------------------------------------------ predicted vs measured


@pytest.mark.parametrize("name", _params(KNOWN_GAPS))
def test_predicted_peak_within_10_percent(name: str) -> None:
    case = ZOO[name]()
    model, report = compiled_and_warm(case)
    predicted = report.predicted_peak_bytes
    measured = peak_of_training_step(model, case.inputs)
    assert measured > 0
    assert abs(measured - predicted) <= REL_TOL * measured, (
        f"{name}: predicted {predicted} B ({report.chosen}), measured {measured} B, "
        f"off by {(predicted - measured) / measured:+.1%}")


_COMPILED = ("CompiledFunction", "CompiledFunctionBackward")  # AOTAutograd's autograd.Function


def op_boundary_peak(model: torch.nn.Module, inputs: tuple) -> tuple[int, int]:
    """(peak at the ends of the compiled graphs' ops, overall peak) of one training step, in bytes
    above the level at its start: the allocator levels of :func:`fxremat.profiling.measure_peak`
    (``allocation_levels``), read at the end time of every op the profiler saw under AOTAutograd's
    Function.  The output is held through the backward, as ``peak_of_training_step`` holds it."""
    model.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        sentinel = torch.empty(1, dtype=torch.uint8)
        sentinel_ptr = sentinel.data_ptr()
        out = model(*inputs)
        loss_of(out).backward()
        del sentinel
    times, levels, _ = allocation_levels(_allocation_events(prof), sentinel_ptr)
    op_ends = []
    stack = [(node, None) for node in prof.profiler.kineto_results.experimental_event_tree()]
    while stack:
        node, parent = stack.pop()
        if node.tag == _ALLOC:
            continue
        if parent in _COMPILED:
            op_ends.append(node.end_time_ns)
        stack.extend((child, node.name) for child in node.children)
    assert op_ends, f"no op under {_COMPILED} in the profile: did torch rename AOTAutograd's Function?"
    at_op_ends = [levels[i] for i in (bisect.bisect_right(times, t) - 1 for t in op_ends) if i >= 0]
    return max(at_op_ends), max(levels)


@pytest.mark.parametrize("name", _params(OP_BOUNDARY_GAPS))
def test_predicted_peak_matches_op_boundaries(name: str) -> None:
    case = ZOO[name]()
    model, report = compiled_and_warm(case)
    predicted = (report.fxremat if report.chosen == "fxremat" else report.min_cut).between_ops_peak_bytes
    at_boundaries, overall = op_boundary_peak(model, case.inputs)
    assert at_boundaries <= overall
    assert abs(at_boundaries - predicted) <= OP_BOUNDARY_TOL * predicted, (
        f"{name}: predicted {predicted} B, measured at op boundaries {at_boundaries} B "
        f"(overall peak {overall} B)")


# ---------------------------------------------------------------- the model's invariant


def _storages(nodes) -> dict[object, int]:
    out = {}
    for node in nodes:
        for t in _torch.tensors_in(node.meta.get("val")):
            out[_torch.storage_key(t)] = _torch.storage_nbytes(t)
    return out


def _is_mutation_output(desc: Any) -> bool:
    return type(desc).__name__ == "InputMutationAOTOutput"


def check_never_freed_early(fw: fx.GraphModule, bw: fx.GraphModule, num_fwd_outputs: int, tl: Timeline) -> None:
    """Lower bounds on ``tl.bytes_alive`` that hold for any correct replay (storages, not tensors,
    so views are never counted twice; the forward's placeholders belong to the caller)."""
    fw_nodes = [n for n in fw.graph.nodes if n.op != "output"]
    bw_nodes = [n for n in bw.graph.nodes if n.op != "output"]
    assert tl.labels == tuple(n.name for n in fw_nodes + bw_nodes)
    assert tl.forward_steps == len(fw_nodes)
    assert len(tl.bytes_alive) == len(tl.labels) and min(tl.bytes_alive) >= 0
    external = set(_storages(n for n in fw_nodes if n.op == "placeholder"))

    def counted(storages: dict[object, int]) -> int:
        return sum(b for k, b in storages.items() if k not in external)

    fw_output = fw.graph.find_nodes(op="output")[0]
    fw_outs = list(fw_output.args[0])
    descs = fw_output.meta.get("desc") or [None] * len(fw_outs)
    user_outputs = [o for o, d in zip(fw_outs[:num_fwd_outputs], descs)
                    if isinstance(o, fx.Node) and not _is_mutation_output(d)]

    for i, node in enumerate(fw_nodes):  # a node's inputs are alive while it runs
        need = _storages([node, *node.all_input_nodes])
        assert tl.bytes_alive[i] >= counted(need), (node.name, tl.bytes_alive[i], counted(need))
    everything_returned = _storages(o for o in fw_outs if isinstance(o, fx.Node))
    assert tl.bytes_alive[len(fw_nodes) - 1] >= counted(everything_returned), "forward outputs freed early"

    held = _storages(user_outputs)  # the caller holds its outputs through the backward
    grads = set(a for a in bw.graph.find_nodes(op="output")[0].all_input_nodes)
    produced: dict[object, int] = {}  # gradients live to the end of the backward
    for j, node in enumerate(bw_nodes):
        if node in grads:
            produced.update(_storages([node]))
        need = {**held, **produced, **_storages([node, *node.all_input_nodes])}
        alive = tl.bytes_alive[len(fw_nodes) + j]
        assert alive >= counted(need), (node.name, alive, counted(need))


INVARIANT_MODELS = ["mlp", "resnet_bn", "transformer", "multi_output", "inplace_input", "unet", "densenet"]


@pytest.mark.parametrize("partitioner", ["fxremat", "min-cut"])
@pytest.mark.parametrize("name", INVARIANT_MODELS)
def test_simulate_never_frees_before_last_use(name: str, partitioner: str) -> None:
    be = fxremat.make_backend(compiler="eager") if partitioner == "fxremat" else min_cut_backend(compiler="eager")
    be.partitioner = recording = RecordingPartitioner(be.partitioner)
    case = ZOO[name]()
    torch.compile(case.model, backend=be)(*case.inputs)  # partitioning happens at forward compile
    assert len(recording.calls) == 1
    fw, bw, num_fwd_outputs, _ = recording.calls[0]
    tl = simulate(fw, bw, num_fwd_outputs)
    check_never_freed_early(fw, bw, num_fwd_outputs, tl)
    if partitioner == "fxremat":  # the report describes the pair actually returned
        (report,) = fxremat.last_reports()
        assert tl.peak_bytes == report.predicted_peak_bytes
        assert tl.bytes_alive == (report.fxremat if report.chosen == "fxremat" else report.min_cut).bytes_alive
    # The checker is not vacuous: a replay that frees too early is caught.
    freed_early = Timeline(tl.labels, tuple(b // 2 for b in tl.bytes_alive), tl.forward_steps)
    with pytest.raises(AssertionError):
        check_never_freed_early(fw, bw, num_fwd_outputs, freed_early)
