"""Placement of recomputation in the backward: segment by segment, right before it is needed.

Invariant: :func:`recompute_just_in_time` adds no node and removes only recomputed nodes nothing
uses; it keeps a topological order, keeps every backward node in its original relative order, and
emits each recomputed forward node right before the first node that needs it.
"""

from __future__ import annotations

import torch.fx as fx

from .analysis import JointGraph, Role

__all__ = ["recompute_just_in_time"]


def recompute_just_in_time(bw: fx.GraphModule, jg: JointGraph) -> fx.GraphModule:
    """Reorder the backward so each recomputed value is computed right before its first use.

    Extraction puts all recomputation first (joint order), which would rebuild every segment at
    once.  Emitting a recomputed node only when a backward node needs it rebuilds one segment
    right before its own backward runs; FX's frees then drop it right after.
    """
    forward_names = {n.name for n, f in jg.facts.items() if f.role is Role.FORWARD}

    def is_recompute(node: fx.Node) -> bool:
        return node.op == "call_function" and node.name in forward_names

    # Recomputation nothing needs is dropped (extraction's DCE keeps dead random ops when
    # Inductor's fallback_random is on; rerunning them would also advance the RNG).
    for node in reversed(list(bw.graph.nodes)):
        if is_recompute(node) and not node.users:
            bw.graph.erase_node(node)

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
