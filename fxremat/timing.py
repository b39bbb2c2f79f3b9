"""Time model: what running a node costs, in estimated seconds, the way Inductor will run it.

Invariant: one per-op rule, :func:`node_seconds`, prices every node, in the joint graph (the
chain's stage costs: what recomputing a stage costs) and in extracted forward/backward graphs (a
plan's whole step, :func:`step_seconds`) alike, so the solver's recomputation cost and a plan's
predicted step time are in one unit.  The rule is a roofline with a launch cost per kernel:

* a value Inductor computes inside its readers' kernels (``fused``) costs only its arithmetic
  (``flops / flop_rate``): its readers read its inputs instead, and pay for the bytes (a matmul
  Inductor runs as the ``addmm`` of its one reader is fused this way and keeps its FLOPs);
* a view, an alias (``getitem``, a placeholder, ``get_attr``) and a node with no tensor (a
  symbolic size) cost nothing;
* every other node is a kernel: ``launch + max(flops / flop_rate, bytes / bandwidth)``, where
  ``bytes`` counts the tensors it writes and the materialized tensors it reads (through fused
  inputs to what they read), and ``flops`` (:func:`flops`) is ``2 m n k`` for a matmul, ``2 x
  output x fan-in`` for a convolution (as much again per gradient its backward writes), ``2 x
  output x k`` for a grouped matmul (MoE experts), ``4 x q x keys`` for attention and one per
  output element otherwise.  A stored pointwise op is thus
  charged its memory traffic, a matmul its FLOPs, a recomputed pointwise op that Inductor fuses
  into its consumer next to nothing.

The rates (:data:`MACHINES`) are nominal, per device type; only their ratio (the machine balance)
and the launch cost decide how plans compare.  CPU: one thread of the 2-core Xeon VM the bench runs
on (measured 2026-12-03: a 1024^3 fp32 matmul at 97 GFLOP/s, a 4-16 MiB pointwise op at 27 GB/s,
reads and writes counted).  CUDA: an H100/H200-class GPU in fp32 without TF32 (~50 TFLOP/s, ~4 TB/s).
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import AbstractSet, Callable, Iterable

import torch
import torch.fx as fx

from . import _torch
from .fusion import is_view
from .memory import fused_in

__all__ = ["Machine", "MACHINES", "flops", "node_seconds", "graph_seconds", "StepEstimate", "step_seconds"]


@dataclass(frozen=True)
class Machine:
    """Nominal rates of one device type."""

    flop_rate: float  # FLOP/s of a large matmul
    bandwidth: float  # bytes/s moved by a large pointwise kernel (reads and writes)
    launch: float  # seconds one kernel costs however small

    def __post_init__(self) -> None:
        for name in ("flop_rate", "bandwidth"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Machine.{name} must be > 0; got {getattr(self, name)!r}")
        if not self.launch >= 0:
            raise ValueError(f"Machine.launch must be >= 0; got {self.launch!r}")


MACHINES = {
    "cpu": Machine(flop_rate=1.0e11, bandwidth=2.5e10, launch=2e-6),
    "cuda": Machine(flop_rate=5.0e13, bandwidth=4.0e12, launch=5e-6),
}


def _value(node: object) -> object:
    return node.meta.get("val") if isinstance(node, fx.Node) else node


# grouped matmuls (MoE experts): each output row is one row of the input times its group's matrix
_GROUPED_MM = frozenset({"aten::_grouped_mm", "transformers::grouped_mm_fallback"})


def flops(node: fx.Node) -> float:
    """A rough FLOP count: matmuls, convolutions and attention by their shapes, everything else
    one per output element."""
    out = list(_torch.tensors_in(node.meta.get("val")))
    numel = sum(_torch.hint(t.numel()) for t in out)
    packet = getattr(node.target, "overloadpacket", None)
    aten = torch.ops.aten
    args = [_value(a) for a in node.args]
    try:
        if packet in (aten.mm, aten.bmm, aten.addmm, aten.baddbmm):
            return 2.0 * numel * _torch.hint(args[-2].shape[-1])
        if packet is aten.convolution and out:  # (input, weight, ...): 2 x output x fan-in
            w = args[1]
            return 2.0 * _torch.hint(out[0].numel()) * _torch.hint(w.numel()) // max(1, _torch.hint(w.shape[0]))
        if packet is aten.convolution_backward:  # (grad_output, input, weight, ...): input and weight grads
            grad_out, w = args[0], args[2]
            forward = 2.0 * _torch.hint(grad_out.numel()) * _torch.hint(w.numel()) // max(1, _torch.hint(w.shape[0]))
            return forward * sum(bool(m) for m in args[-1][:2]) if isinstance(args[-1], (list, tuple)) else 2 * forward
        if getattr(getattr(node.target, "_schema", None), "name", None) in _GROUPED_MM and out:
            return 2.0 * numel * _torch.hint(args[0].shape[-1])  # (tokens, k) rows, each by its group's (k, n)
        if packet is not None and "scaled_dot_product" in packet.__name__:
            q, k = args[0], args[1]
            return 4.0 * _torch.hint(q.numel()) * _torch.hint(k.shape[-2])
    except (AttributeError, IndexError, TypeError):
        pass
    return float(numel)


def machine_of(graph: fx.Graph) -> Machine:
    """The rates of the device the graph's first tensor lives on (CPU rates for any other)."""
    for node in graph.nodes:
        for t in _torch.tensors_in(node.meta.get("val")):
            return MACHINES.get(t.device.type, MACHINES["cpu"])
    return MACHINES["cpu"]


def _nbytes(node: fx.Node) -> int:
    return sum(_torch.hint(t.numel()) * t.element_size() for t in _torch.tensors_in(node.meta.get("val")))


def node_seconds(node: fx.Node, fused: AbstractSet[fx.Node], aliases: Callable[[fx.Node], bool],
                 machine: Machine) -> float:
    """Estimated seconds of running ``node`` once (see the module docstring); ``aliases(node)``:
    whether it is a view of its inputs."""
    if (node.op != "call_function" or node.target is operator.getitem
            or not _torch.tensors_in(node.meta.get("val")) or aliases(node)):
        return 0.0  # not a kernel: a placeholder, an alias, a view, a symbolic size
    if node in fused:  # computed inside its readers' kernels: only its arithmetic is its own
        return flops(node) / machine.flop_rate
    read: dict[fx.Node, None] = {}
    stack = list(node.all_input_nodes)
    while stack:  # a fused input is computed here: read what it reads
        a = stack.pop()
        if a in read:
            continue
        if a in fused:
            stack.extend(a.all_input_nodes)
            continue
        read[a] = None
    moved = _nbytes(node) + sum(_nbytes(a) for a in read)
    return machine.launch + max(flops(node) / machine.flop_rate, moved / machine.bandwidth)


def graph_seconds(graph: fx.Graph, fused: AbstractSet[fx.Node], storages: Callable[[fx.Node], Iterable[object]],
                  machine: Machine | None = None, nodes: Iterable[fx.Node] | None = None) -> dict[fx.Node, float]:
    """:func:`node_seconds` of ``nodes`` (default: every node of ``graph``); ``storages`` gives a
    node's storage keys (a view's are all among its inputs')."""
    machine = machine or machine_of(graph)
    own = functools.cache(lambda n: frozenset(storages(n)))
    return {n: node_seconds(n, fused, lambda v: is_view(v, own), machine)
            for n in (graph.nodes if nodes is None else nodes)}


@dataclass(frozen=True)
class StepEstimate:
    """Estimated seconds of one training step of a forward/backward pair."""

    forward_s: float
    backward_s: float

    @property
    def step_s(self) -> float:
        return self.forward_s + self.backward_s


def step_seconds(fw: fx.GraphModule, bw: fx.GraphModule, inductor: bool) -> StepEstimate:
    """Estimated seconds of running ``fw`` then ``bw`` (``inductor``: with Inductor's fusion, as
    the memory model replays it; otherwise every op is a kernel)."""

    machine = machine_of(fw.graph)

    def total(gm: fx.GraphModule) -> float:
        fused = fused_in(gm.graph) if inductor else frozenset()
        return sum(graph_seconds(gm.graph, fused, _torch.storage_keys, machine).values())

    return StepEstimate(total(fw), total(bw))
