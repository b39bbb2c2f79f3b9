"""Placement of recomputation in the backward: segment by segment, right before it is needed,
and inside a recomputed segment only what the base plan would save is held.

Invariants:

* :func:`recompute_just_in_time` adds no node except the duplicates below and removes only
  recomputed nodes nothing uses; it keeps a topological order, keeps every backward node in its
  original relative order, and emits each recomputed forward node right before the first node
  that needs it;
* with ``held`` (the base plan's saved values), a recomputed value that the base plan does not
  save is never kept from a segment's recomputation to its backward: the backward nodes read a
  duplicate computed from held values right before they need it, as the base plan's own backward
  would.  Only values the base plan can rebuild cheaply are duplicated (no random op, no banned
  op, no matmul, convolution or attention), so the duplicates cost what the base plan's backward
  already pays, and Inductor fuses them into their readers' kernels.
"""

from __future__ import annotations

import operator
from typing import Iterable

import torch.fx as fx

from . import _torch
from .analysis import JointGraph, Role

__all__ = ["recompute_just_in_time"]


def recompute_just_in_time(bw: fx.GraphModule, jg: JointGraph, held: Iterable[str] | None = None) -> fx.GraphModule:
    """Reorder the backward so each recomputed value is computed right before its first use.

    Extraction puts all recomputation first (joint order), which would rebuild every segment at
    once.  Emitting a recomputed node only when a backward node needs it rebuilds one segment
    right before its own backward runs; FX's frees then drop it right after.  With ``held``, the
    backward reads cheap values the base plan does not save from just-in-time duplicates
    (:func:`_rebuild_near_use`), so a recomputed segment holds what the base plan saves, no more.
    """
    forward_names = {n.name for n, f in jg.facts.items() if f.role is Role.FORWARD}
    duplicates: set[fx.Node] = set()

    def is_recompute(node: fx.Node) -> bool:
        return node.op == "call_function" and (node.name in forward_names or node in duplicates)

    # Recomputation nothing needs is dropped (extraction's DCE keeps dead random ops when
    # Inductor's fallback_random is on; rerunning them would also advance the RNG).
    for node in reversed(list(bw.graph.nodes)):
        if is_recompute(node) and not node.users:
            bw.graph.erase_node(node)
    if held is not None:
        duplicates = _rebuild_near_use(bw, jg, set(held), forward_names)

    order: list[fx.Node] = []
    emitted = {n for n in bw.graph.nodes if n.op == "placeholder"}

    def emit(root: fx.Node) -> None:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in emitted:
                continue
            if expanded:
                emitted.add(node)
                order.append(node)
                continue
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.all_input_nodes) if a not in emitted)

    output = bw.graph.find_nodes(op="output")[0]
    for node in list(bw.graph.nodes):
        if node.op == "placeholder" or is_recompute(node):
            continue
        for root in output.all_input_nodes if node is output else (node,):
            emit(root)
    for node in order:
        output.prepend(node)
    bw.graph.lint()
    bw.recompile()
    return bw


def _rebuild_near_use(bw: fx.GraphModule, jg: JointGraph, held: set[str], forward_names: set[str]) -> set[fx.Node]:
    """Give the backward nodes their own copies of recomputed values the base plan does not hold.

    A recomputed value ``r`` that other recomputed values read (so it is computed early, with its
    segment) and that backward nodes also read (late) would stay alive in between.  If the base
    plan does not save ``r`` and it is cheap, the backward nodes read ``dup(r)`` instead: ``r``
    with every argument that is itself such a value replaced by its duplicate, and held values,
    saved values and inputs read as they are.  Returns the duplicates.
    """
    by_name = {n.name: n for n in jg.module.graph.nodes}
    recomputed = [n for n in bw.graph.nodes if n.op == "call_function" and n.name in forward_names]
    is_recomputed = set(recomputed)
    dup: dict[fx.Node, fx.Node] = {}

    def cheap(node: fx.Node) -> bool:
        joint = by_name.get(node.name)
        if joint is None or node.name in held or _torch.is_random(node) or jg.facts[joint].recompute_ban:
            return False
        if node.target is operator.getitem:
            parent = node.args[0]
            return isinstance(parent, fx.Node) and parent in is_recomputed and cheap(parent)
        return jg.facts[joint].cost <= _numel(node)  # not a matmul, convolution or attention

    def duplicate(node: fx.Node) -> fx.Node:
        stack = [node]
        while stack:
            top = stack[-1]
            if top in dup:
                stack.pop()
                continue
            pending = [a for a in top.all_input_nodes if a in is_recomputed and a not in dup and cheap(a)]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            with bw.graph.inserting_before(top.next):
                copy = bw.graph.node_copy(top, lambda a: dup.get(a, a))
            copy.meta = dict(top.meta)
            copy._rename(f"{top.name}_rebuilt")  # never the name of another joint-graph node
            dup[top] = copy
        return dup[node]

    for node in recomputed:
        late = [u for u in node.users if u not in is_recomputed and u.op != "output"]
        early = [u for u in node.users if u in is_recomputed]
        if late and early and cheap(node):
            copy = duplicate(node)
            for user in late:
                user.replace_input_with(node, copy)
    return set(dup.values())


def _numel(node: fx.Node) -> int:
    return sum(_torch.hint(t.numel()) for t in _torch.tensors_in(node.meta.get("val")))
