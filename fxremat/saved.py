"""The saved set: complete a plan's values so the backward can run, and never recompute a banned node.

Invariant: after :func:`close_over_bans`, the backward extracted from the joint graph recomputes
no forward node with a recompute ban (random, effectful, mutating, reading a mutated input,
MUST_SAVE): every such value it needs is saved instead, and every input its recomputation reads
is saved too (inputs and parameters are held anyway, so that costs nothing).
"""

from __future__ import annotations

import logging

import torch.fx as fx

from .analysis import JointGraph, Role

__all__ = ["close_over_bans", "unsafe_recomputation"]

log = logging.getLogger("fxremat")


def close_over_bans(jg: JointGraph, saved: list[fx.Node]) -> list[fx.Node]:
    """Complete ``saved`` so the backward can run: add every input its recomputation reads, and
    save (instead of recomputing) every value whose recomputation would go through a banned node."""
    saved_set = dict.fromkeys(saved)
    facts = jg.facts
    position = {n: i for i, n in enumerate(jg.module.graph.nodes)}  # deterministic order
    while True:
        recomputed, inputs_read = _recomputed_nodes(jg, saved_set)
        saved_set.update(dict.fromkeys(sorted(inputs_read, key=position.__getitem__)))
        banned = sorted((n for n in recomputed if facts[n].recompute_ban is not None), key=position.__getitem__)
        if not banned:
            return list(saved_set)
        before = len(saved_set)
        for node in banned:
            if isinstance(node.meta.get("val"), (tuple, list)):  # save its outputs, not the tuple
                saved_set.update(dict.fromkeys(u for u in node.users if facts[u].role is Role.FORWARD))
            else:
                saved_set[node] = None
            log.debug("fxremat: saving %s instead of recomputing it (%s)", node.name, facts[node].recompute_ban)
        if len(saved_set) == before:
            raise RuntimeError(f"cannot avoid recomputing {banned[0].name} ({facts[banned[0]].recompute_ban})")


def _recomputed_nodes(jg: JointGraph, saved: dict[fx.Node, None]) -> tuple[set[fx.Node], set[fx.Node]]:
    """Forward nodes the backward would recompute (reached from backward nodes through unsaved
    values; a banned node is reached but not expanded, it is about to be saved), and the inputs
    that the backward and its recomputation read."""
    facts = jg.facts
    seen: set[fx.Node] = set()
    inputs_read: set[fx.Node] = set()
    backward = [n for n in jg.module.graph.nodes if facts[n].role is Role.BACKWARD]
    read_by_backward = {a for n in backward for a in n.all_input_nodes if a in jg.mutated_inputs}
    if read_by_backward:
        names = sorted(p.name for p in read_by_backward)
        raise NotImplementedError(f"the backward reads {names} after the forward mutated it")
    stack = [a for n in backward for a in n.all_input_nodes]
    while stack:
        node = stack.pop()
        if node in seen or node in saved:
            continue
        if node.op == "placeholder":
            if facts[node].role in (Role.INPUT, Role.STATIC_INPUT):
                inputs_read.add(node)
            continue
        if facts[node].role is not Role.FORWARD:
            continue
        seen.add(node)
        if facts[node].recompute_ban is None:
            stack.extend(node.all_input_nodes)
    return seen, inputs_read


def unsafe_recomputation(mc_bw: fx.GraphModule, jg: JointGraph) -> list[str]:
    """Forward nodes PyTorch's min-cut backward recomputes although they are banned (e.g. a read
    of a buffer the forward then mutates: PyTorch 2.13 returns wrong gradients there)."""
    by_name = {n.name: n for n in jg.module.graph.nodes}
    out = []
    for node in mc_bw.graph.nodes:
        joint_node = by_name.get(node.name)
        if node.op == "call_function" and joint_node is not None:
            fact = jg.facts[joint_node]
            if fact.role is Role.FORWARD and fact.recompute_ban is not None:
                out.append(node.name)
    return out
