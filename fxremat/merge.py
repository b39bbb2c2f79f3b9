"""Duplicate attention masks merged before planning: one mask per graph, not one per layer.

HF models convert one boolean attention mask into a float mask inside every layer (eight
identical ``where(mask, 0, -inf)`` nodes for eight layers) and hand each to SDPA.  Inductor's SDPA
lowering materializes the mask argument of each call in a buffer of its own, and fuses the eight
identical conversions (they read the same boolean mask) into one kernel at the first layer: HF
Llama at sequence 2048 had eight (2, 1, 2048, 2048) float masks, 256 MiB, alive from the first
layer on (a forward peak of 293 MiB where the plan counted 177).  Merged, the mask is one value
that the planner saves or rebuilds like any other (measured 240.7 MiB, 201.1 with the backward
compiled as :mod:`fxremat.backend` says).  PyTorch's min-cut merges all duplicates (its CSE).

Invariant: :func:`merge_duplicates` only merges *data-only* nodes that an SDPA call reads as its
mask, and their data-only ancestors: pure, deterministic aten or prims calls whose every ancestor
is a user input that gets no gradient (nor is a parameter or a buffer) or a constant (``arange``,
``scalar_tensor``, ``full``), each into the first earlier node with the same target and the same
arguments.  Such a value carries no gradient and depends on the inputs alone, so merging changes
no value and no gradient.  Other duplicates are left alone: merging every data-only duplicate
made HF T5 at sequence 1024 measure 298 MiB instead of 233 (2026-12-02), and torch's whole-graph
CSE 312.  The graph it rewrites is the caller's copy; the survivors keep their names.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.fx as fx

from . import _torch
from .analysis import primal_gradients

__all__ = ["merge_duplicates"]

log = logging.getLogger(__name__)


def merge_duplicates(gm: fx.GraphModule, num_fwd_outputs: int, static_inputs: frozenset[fx.Node] = frozenset()) -> int:
    """Merge each data-only node of the joint graph ``gm`` into the first earlier node with the
    same target and arguments; returns how many nodes were erased.  Data-only inputs: primals
    that get no gradient and are not in ``static_inputs`` (parameters, buffers).  A joint graph
    whose outputs do not pair one gradient with each primal is left untouched."""
    graph = gm.graph
    gradients = primal_gradients(graph, num_fwd_outputs)
    if not gradients:
        return 0
    data_only = {p for p, g in gradients.items() if g is None and p not in static_inputs}
    for node in graph.nodes:
        if node.op != "placeholder" and _mergeable(node) and all(a in data_only for a in node.all_input_nodes):
            data_only.add(node)
    masks = _attention_masks(graph, data_only)
    seen: dict[Any, fx.Node] = {}
    merged = 0
    for node in list(graph.nodes):
        if node not in masks or node.op == "placeholder":
            continue
        key = _key(node)
        if key is None:
            continue
        first = seen.setdefault(key, node)
        if first is not node:
            log.debug("fxremat: %s merged into %s (%s)", node.name, first.name, node.target)
            node.replace_all_uses_with(first)
            graph.erase_node(node)
            merged += 1
    if merged:
        graph.lint()
        gm.recompile()
        log.debug("fxremat: merged %d duplicate data-only nodes", merged)
    return merged


def _attention_masks(graph: fx.Graph, data_only: set[fx.Node]) -> set[fx.Node]:
    """The data-only nodes an SDPA call reads as its mask, and their data-only ancestors."""
    out: set[fx.Node] = set()
    for node in reversed(graph.nodes):
        if node in data_only and any(u in out or _reads_as_mask(u, node) for u in node.users):
            out.add(node)
    return out


def _reads_as_mask(user: fx.Node, value: fx.Node) -> bool:
    name = getattr(user.target, "__name__", "")
    if user.op != "call_function" or "scaled_dot_product" not in name:
        return False
    return user.kwargs.get("attn_mask") is value or value in user.args[3:]


def _mergeable(node: fx.Node) -> bool:
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return target.namespace in ("aten", "prims") and not _torch.is_impure(node)


def _key(node: fx.Node) -> Any:
    """A hashable identity of the call (``None``: an argument that cannot be compared safely)."""
    try:
        key = (node.target, _frozen(node.args), _frozen(tuple(sorted(node.kwargs.items()))))
        hash(key)
    except TypeError:
        return None
    return key


def _frozen(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_frozen(v) for v in value))
    if isinstance(value, fx.Node):
        return ("node", value)
    if isinstance(value, float) and value != value:  # NaN never equals itself
        return ("nan",)
    if isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise TypeError("not compared by value")
    return (type(value).__name__, value)
