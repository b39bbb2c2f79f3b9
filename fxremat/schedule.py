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
  already pays, and Inductor fuses them into their readers' kernels;
* planned for Inductor, a cheap recomputed value that the recomputations of several layers read
  is copied once per layer (:func:`_one_copy_per_segment`), with the cheap recomputed values it
  is computed from: each copy is the same ops on the same saved values and inputs, read only by
  that layer's readers, inserted before the first of them.
"""

from __future__ import annotations

import itertools
import operator
from typing import Iterable

import torch.fx as fx

from . import _torch
from .analysis import JointGraph, Role
from .fusion import is_view

__all__ = ["recompute_just_in_time"]


def recompute_just_in_time(bw: fx.GraphModule, jg: JointGraph, held: Iterable[str] | None = None) -> fx.GraphModule:
    """Reorder the backward so each recomputed value is computed right before its first use.

    Extraction puts all recomputation first (joint order), which would rebuild every segment at
    once.  Emitting a recomputed node only when a backward node needs it rebuilds one segment
    right before its own backward runs; FX's frees then drop it right after.  With ``held``, the
    backward reads cheap values the base plan does not save from just-in-time duplicates
    (:func:`_rebuild_near_use`), so a recomputed segment holds what the base plan saves, no more.
    """
    joint_of = {n.name: n for n in jg.module.graph.nodes}  # a backward node's joint-graph node, by name
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
        duplicates = _rebuild_near_use(bw, jg, set(held), forward_names, joint_of)

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
    if jg.inductor:
        _one_copy_per_segment(bw, jg, forward_names, joint_of)
    bw.graph.lint()
    bw.recompile()
    return bw


SHARED_COPY_MIN_BYTES = 1 << 20  # smaller shared values: a fused kernel across layers holds little
SHARED_COPY_MAX_NODES = 64  # a longer chain to copy is left shared
SHARED_COPY_MAX_COST = 8  # nor one costing more than this many operations per element of the value


def _one_copy_per_segment(bw: fx.GraphModule, jg: JointGraph, forward_names: set[str],
                          joint_of: dict[str, fx.Node]) -> int:
    """Give each segment its own copy of a cheap recomputed value that several segments read.

    A value that one recomputation produces and the recomputations of several layers read (HF
    MPNet's position bias: an embedding lookup added to a mask, read by every layer's scores) is a
    producer Inductor fuses into each of its readers' kernels: once it is fused with the first
    layer's softmax, the next layer's softmax depends on that kernel too and joins it, and so on,
    so every layer's recomputed scores (the kernel's other inputs) are computed, and alive, before
    the first layer's backward (MPNet, sequence 512: four 8 MiB score buffers at once).  Readers
    are grouped in backward order, a new group wherever a matmul, convolution or attention op lies
    between two readers; where two groups or more hold a recomputed reader that Inductor can fuse
    the value into and move up to it (``hoistable``, ``independent_groups``), every group after the
    first reads its own copy of the value and of the
    cheap recomputed values it is computed from (saved values and inputs are read as they are),
    inserted before the group's first reader.  Only values of at least
    :data:`SHARED_COPY_MIN_BYTES` whose copied chain has at most :data:`SHARED_COPY_MAX_NODES`
    nodes and costs at most :data:`SHARED_COPY_MAX_COST` operations per element of the value
    (MPNet's: 25 nodes, the relative-position buckets computed from ``arange``, 3.1 per element);
    returns how many copies were made."""
    position: dict[fx.Node, int] = {}
    heavy: set[fx.Node] = set()
    heavy_before: dict[fx.Node, int] = {}

    def index() -> None:  # positions, and heavy ops up to each node (again after each copy)
        position.clear(), heavy.clear(), heavy_before.clear()
        for i, n in enumerate(bw.graph.nodes):
            joint = joint_of.get(n.name) if n.op == "call_function" else None
            if joint is not None and jg.facts[joint].cost > _torch.value_numel(n):
                heavy.add(n)
            position[n], heavy_before[n] = i, len(heavy)

    def cheap(node: fx.Node) -> bool:
        joint = joint_of.get(node.name) if node.op == "call_function" and node.name in forward_names else None
        return joint is not None and node.target is not operator.getitem and _cheap(node, jg, joint)

    def own(node: fx.Node) -> frozenset:  # the storages of a node's value (its joint-graph facts)
        joint = joint_of.get(node.name)
        return frozenset(jg.facts[joint].storages) if joint is not None else frozenset()

    def chain(node: fx.Node) -> list[fx.Node] | None:
        """``node`` and its cheap recomputed ancestors, ancestors first; None if too many."""
        seen, stack = {node}, [node]
        while stack:
            for a in stack.pop().all_input_nodes:
                if a not in seen and cheap(a):
                    seen.add(a)
                    stack.append(a)
                    if len(seen) > SHARED_COPY_MAX_NODES:
                        return None
        if sum(jg.facts[joint_of[n.name]].cost for n in seen) > SHARED_COPY_MAX_COST * _torch.value_numel(node):
            return None
        return sorted(seen, key=position.__getitem__)

    def hoistable(reader: fx.Node) -> bool:
        """``reader`` (through views) is a recomputed op Inductor can fuse a producer into: one that
        needs no gradient, so fusion can move it up to the producer (a matmul or convolution
        reads a stored value and fuses with nothing; a backward op waits for its gradients)."""
        stack = [reader]
        while stack:
            n = stack.pop()
            if n.op != "call_function" or n.name not in forward_names or n in heavy:
                continue
            if is_view(n, own):
                stack.extend(n.users)
            else:
                return True
        return False

    def independent_groups(value: fx.Node, groups: list[list[fx.Node]]) -> int:
        """Groups holding a :func:`hoistable` reader which, after the first group, computes from
        a recomputed matmul, convolution or attention op of its own (one after the previous
        group) and from no reader of an earlier group: another layer's recomputation, which fusion
        would move up with its heavy work; not the rest of one layer's (a squeeze-excite's
        product waits for its pooled branch) nor a backward's cheap tangent-free part."""
        count, earlier, floor = 0, set(), position[value]
        for group in groups:
            own_heavy = {n for n in heavy if n.name in forward_names and position[n] > floor}
            if any(hoistable(u) and (not count or reads_any(u, own_heavy, floor))
                   and not reads_any(u, earlier, position[value]) for u in group):
                count += 1
            earlier.update(group)
            floor = position[group[-1]]
        return count

    def reads_any(node: fx.Node, targets: set[fx.Node], floor: int) -> bool:
        """Whether ``node`` computes from a node of ``targets`` (looking no further up than ``floor``)."""
        seen, stack = set(), [node]
        while stack:
            for a in stack.pop().all_input_nodes:
                if a in targets:
                    return True
                if a not in seen and position[a] > floor:
                    seen.add(a)
                    stack.append(a)
        return False

    copies = 0
    index()
    for node in list(bw.graph.nodes):
        if not cheap(node) or _torch.value_nbytes(node) < SHARED_COPY_MIN_BYTES:
            continue
        readers = sorted((u for u in node.users if u.op != "output"), key=position.__getitem__)
        if len(readers) < 2:
            continue
        groups = [readers[:1]]
        for prev, user in itertools.pairwise(readers):
            if heavy_before[user] > heavy_before[prev]:
                groups.append([])
            groups[-1].append(user)
        if independent_groups(node, groups) < 2 or (to_copy := chain(node)) is None:
            continue
        for g, group in enumerate(groups[1:], start=1):
            copied: dict[fx.Node, fx.Node] = {}
            for original in to_copy:
                with bw.graph.inserting_before(group[0]):
                    dup = bw.graph.node_copy(original, lambda a, c=copied: c.get(a, a))
                dup.meta = dict(original.meta)
                dup._rename(f"{original.name}_segment{g}")  # never the name of another joint-graph node
                copied[original] = dup
            for user in group:
                user.replace_input_with(node, copied[node])
            copies += 1
        index()
    return copies


def _rebuild_near_use(bw: fx.GraphModule, jg: JointGraph, held: set[str], forward_names: set[str],
                      joint_of: dict[str, fx.Node]) -> set[fx.Node]:
    """Give the backward nodes their own copies of recomputed values the base plan does not hold.

    A recomputed value ``r`` that other recomputed values read (so it is computed early, with its
    segment) and that backward nodes also read (late) would stay alive in between.  If the base
    plan does not save ``r`` and it is cheap, the backward nodes read ``dup(r)`` instead: ``r``
    with every argument that is itself such a value replaced by its duplicate, and held values,
    saved values and inputs read as they are.  Returns the duplicates.
    """
    recomputed = [n for n in bw.graph.nodes if n.op == "call_function" and n.name in forward_names]
    is_recomputed = set(recomputed)
    dup: dict[fx.Node, fx.Node] = {}

    def cheap(node: fx.Node) -> bool:
        joint = joint_of.get(node.name)
        if joint is None or node.name in held:
            return False
        if node.target is operator.getitem:
            parent = node.args[0]
            return isinstance(parent, fx.Node) and parent in is_recomputed and cheap(parent)
        return _cheap(node, jg, joint)

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


def _cheap(node: fx.Node, jg: JointGraph, joint: fx.Node) -> bool:
    """``node`` (the backward's instance of ``joint``) is cheap to compute again: not random, not
    banned, not a matmul, convolution or attention (no more operations than elements)."""
    facts = jg.facts[joint]
    return not _torch.is_random(node) and not facts.recompute_ban and facts.cost <= _torch.value_numel(node)
