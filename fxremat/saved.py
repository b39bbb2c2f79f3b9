"""The saved set: complete a plan's values so the backward can run, safely.

Invariants, after :func:`close_over_bans`:

* the backward recomputes no forward node with a recompute ban (effectful, mutating, reading a
  mutated input, MUST_SAVE, random where the RNG state cannot be replayed, Inductor's seeds op:
  ``analysis.NodeFacts.recompute_ban``): every such value it needs is saved instead;
* fxremat keeps a reference to a *caller-visible* tensor (one living in the storage of a user
  input or of a returned output) only where eager autograd keeps one too: where a backward node
  of the joint graph reads it directly (the others are ``JointGraph.caller_visible``).  The caller may edit such a tensor between forward and
  backward (legal in eager when autograd did not save it), so recomputation never starts from
  one: where it would, the first recomputed value past it is saved instead;
* every other input that the backward or its recomputation reads is saved (parameters and
  inputs are held anyway, so that costs nothing).
* with ``redraw=False`` no random op is recomputed either: its values are saved.

:func:`private_copies` offers the alternative for caller-visible inputs: the forward reads a
clone of the input, which the backward's recomputation may read (the caller's edits never reach it).
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import torch
import torch.fx as fx

from . import _torch
from .analysis import JointGraph, Role

__all__ = ["PrivateCopies", "close_over_bans", "min_cut_hazards", "private_copies"]

log = logging.getLogger("fxremat")


def close_over_bans(jg: JointGraph, saved: list[fx.Node], *, redraw: bool = True) -> list[fx.Node]:
    """Complete ``saved`` so the backward can run: add every input its recomputation reads, save
    (instead of recomputing) every value whose recomputation would go through a banned node, and
    save the first recomputed value past a caller-visible tensor rather than that tensor.
    ``redraw=False`` bans random ops too: their values are saved, never drawn again with a replayed
    generator state (which Inductor on CPU does not lower around its own seeds op)."""
    read_after_mutation = sorted({a.name for n in jg.backward for a in n.all_input_nodes if a in jg.mutated_inputs})
    if read_after_mutation:
        raise NotImplementedError(f"the backward reads {read_after_mutation} after the forward mutated it")
    exposed = jg.caller_visible
    dropped = [n for n in saved if n in exposed]
    if dropped:
        log.debug("fxremat: not saving caller-visible %s", ", ".join(n.name for n in dropped))
    saved_set = dict.fromkeys(n for n in saved if n not in exposed)
    position = {n: i for i, n in enumerate(jg.module.graph.nodes)}  # deterministic order
    while True:
        walk = _walk(jg, saved_set, position, redraw)
        saved_set.update(dict.fromkeys(sorted(walk.inputs_read, key=position.__getitem__)))
        to_save = sorted(walk.must_save, key=position.__getitem__)
        if not to_save:
            return list(saved_set)
        before = len(saved_set)
        for node in to_save:
            if isinstance(node.meta.get("val"), (tuple, list)):  # save its outputs, not the tuple
                outs = [u for u in node.users if jg.facts[u].role is Role.FORWARD and u not in exposed]
                saved_set.update(dict.fromkeys(outs))
            else:
                saved_set[node] = None
            log.debug("fxremat: saving %s instead of recomputing it (%s)", node.name, walk.why[node])
        if len(saved_set) == before:
            raise RuntimeError(f"cannot plan the backward's need for {to_save[0].name} ({walk.why[to_save[0]]})")


class _Walk:
    """What the backward would recompute given a saved set, and what that set still lacks."""

    def __init__(self) -> None:
        self.recomputed: list[fx.Node] = []  # forward nodes to recompute, in discovery order
        self.inputs_read: set[fx.Node] = set()  # inputs to save (not caller-visible)
        self.blocked: set[fx.Node] = set()  # values the backward can neither keep nor rebuild
        self.must_save: set[fx.Node] = set()
        self.why: dict[fx.Node, str] = {}


def _walk(jg: JointGraph, saved: dict[fx.Node, None], position: dict[fx.Node, int], redraw: bool) -> _Walk:
    """Walk from the backward through unsaved forward values.  A banned value is not expanded: it
    must be saved, or, if caller-visible, is *blocked*; a caller-visible input is blocked; a
    caller-visible value rebuilt from a blocked one is blocked.  A recomputed value that is not
    caller-visible and reads a blocked one must be saved."""
    facts, exposed = jg.facts, jg.caller_visible
    w = _Walk()
    seen: set[fx.Node] = set()
    stack = [a for n in jg.backward for a in n.all_input_nodes]
    while stack:
        node = stack.pop()
        if node in seen or node in saved:
            continue
        seen.add(node)
        role = facts[node].role
        if node.op == "placeholder":
            if role is Role.STATIC_INPUT or (role is Role.INPUT and node not in exposed):
                w.inputs_read.add(node)
            elif role is Role.INPUT:
                w.blocked.add(node)
            continue
        if role is not Role.FORWARD:
            continue
        ban = facts[node].recompute_ban
        if ban is None and not redraw and _torch.is_random(node):
            ban = "random op (its values are saved, not drawn again)"
        if ban is not None:
            if node in exposed:
                w.blocked.add(node)
            else:
                w.must_save.add(node)
                w.why[node] = ban
            continue
        w.recomputed.append(node)
        stack.extend(node.all_input_nodes)
    for node in sorted(w.recomputed, key=position.__getitem__):  # inputs before readers
        reads_blocked = [a for a in node.all_input_nodes if a in w.blocked]
        if not reads_blocked:
            continue
        if node in exposed:
            w.blocked.add(node)
        else:
            w.must_save.add(node)
            w.why[node] = f"it reads caller-visible {reads_blocked[0].name}"
    return w


def min_cut_hazards(mc_fw: fx.GraphModule, mc_bw: fx.GraphModule, jg: JointGraph) -> list[str]:
    """Why PyTorch's min-cut pair must not run, one phrase per finding (empty: it is safe).

    * its backward recomputes a banned node (e.g. a read of a buffer the forward then mutates:
      PyTorch 2.13 returns wrong gradients there);
    * its backward recomputes a random op: min-cut (without its RNG functionalization, off by
      default) draws it afresh, so a dropout mask differs from the forward's (it does so under an
      ``activation_memory_budget`` below 1);
    * its forward saves a caller-visible tensor that eager autograd does not keep (see the module
      docstring): an edit by the caller between forward and backward would leak into the grads.
    """
    by_name = {n.name: n for n in jg.module.graph.nodes}
    out = []
    for node in mc_bw.graph.nodes:
        joint_node = by_name.get(node.name)
        if node.op == "call_function" and joint_node is not None:
            fact = jg.facts[joint_node]
            if fact.role is Role.FORWARD and _torch.is_random(node):  # first: what min-cut itself gets wrong
                out.append(f"would recompute random {node.name} (min-cut does not replay its RNG state)")
            elif fact.role is Role.FORWARD and fact.recompute_ban is not None:
                out.append(f"would recompute {node.name} ({fact.recompute_ban})")
    exposed = jg.caller_visible
    fw_output = mc_fw.graph.find_nodes(op="output")[0].args[0]
    for value in fw_output[jg.num_fwd_outputs:]:
        joint_node = by_name.get(value.name) if isinstance(value, fx.Node) else None
        if joint_node in exposed:
            out.append(f"would save caller-visible {value.name} (eager does not keep it)")
    return out


class PrivateCopies(NamedTuple):
    joint: fx.GraphModule  # a copy of the joint graph whose forward reads the clones
    inputs: list[str]  # the caller-visible inputs cloned
    clones: dict[str, int]  # each clone's node name -> its bytes


def private_copies(jg: JointGraph) -> PrivateCopies | None:
    """A copy of ``jg``'s joint graph in which the forward reads every caller-visible input a
    recomputation would start from through a private clone of it (None if there is none).  Where
    such an input blocks recomputation, the saved set otherwise holds the values computed from it
    (an additive attention mask passed to each layer: the masked scores, heads x batch x the
    mask's bytes); the clone is immune to the caller's edits, as
    eager's backward is (it never reads the input), and costs the input's bytes.  Values and
    gradients are unchanged: the clone equals the input, and no backward node reads the input
    (else it would not be caller-visible)."""
    walk = _walk(jg, {}, {n: i for i, n in enumerate(jg.module.graph.nodes)}, redraw=True)
    blocked = [p for p in jg.primals if p in walk.blocked and jg.facts[p].role is Role.INPUT]
    if not blocked:
        return None
    joint = _torch.copy_joint(jg.module)
    by_name = {n.name: n for n in joint.graph.nodes}
    forward = {by_name[n.name] for n in jg.forward}
    last_placeholder = [n for n in joint.graph.nodes if n.op == "placeholder"][-1]
    clones = {}
    for p in blocked:
        node = by_name[p.name]
        readers = [u for u in node.users if u in forward]
        with joint.graph.inserting_after(last_placeholder):
            clone = joint.graph.call_function(torch.ops.aten.clone.default, (node,))
        clone.meta["val"] = node.meta["val"].clone()
        clones[clone.name] = _torch.value_nbytes(clone)
        for u in readers:
            u.replace_input_with(node, clone)
    joint.recompile()
    return PrivateCopies(joint, [p.name for p in blocked], clones)
