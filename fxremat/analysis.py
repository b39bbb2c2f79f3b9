"""Joint-graph analysis: every fact fxremat needs about AOTAutograd's joint graph, computed once.

Invariant: :func:`analyze` walks the joint graph a bounded number of times and returns a frozen
:class:`JointGraph`; every later stage (memory model, linearization, partition) reads facts from
its ``facts`` mapping and never re-derives them.  Nothing is written into the graph: the facts
hold ``StorageWeakRef`` keys, and node ``meta`` rides into the graphs handed to Inductor.

What is decided here:
* each primal's gradient among the outputs (``JointGraph.gradients``; merge.py reads the same
  pairing before analysis, through :func:`primal_gradients`);
* roles: parameters and other static-lifetime primals, other primals, tangents, forward nodes
  (those torch's own ``classify_nodes`` calls required by the forward or unclaimed: computable
  without tangents), backward nodes;
* bytes: the storage each tensor lives in (views share their base's storage, so aliases are
  never double counted) and the bytes a node newly allocates; symbolic sizes use their hints;
* caller visibility: which tensors the caller can reach (inputs, returned outputs, views of
  them) while eager autograd keeps no reference to them (no backward node reads them);
* recomputability: a forward node may not be recomputed if it is random (only on a torch that
  cannot replay its RNG state; see ``_torch.replay_rng``), mutates or reads a
  mutated input, is effectful or a collective, is impure, is a custom (non-aten, non-prims) op
  nobody vouches for (:data:`PURE_CUSTOM_OPS`, ``Options.recomputable_ops``) or a higher-order op
  (whose hidden state or subgraphs we cannot vouch for), is an output of a banned multi-output
  op, or a checkpoint policy says MUST_SAVE.
"""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping

import torch
import torch.fx as fx

from . import _torch
from .fusion import fused_values, readers_fusible
from .timing import flops, graph_seconds

__all__ = ["Role", "NodeFacts", "JointGraph", "analyze", "primal_gradients", "PURE_CUSTOM_OPS"]

# Custom ops known to be pure and deterministic, so that recomputing one gives the value the
# forward computed.  transformers' grouped matmul of MoE experts (``transformers.integrations.moe``:
# ``mm`` into the slices of a zeroed output), which every HF MoE model (Mixtral, Qwen-MoE,
# DeepSeek, GPT-OSS, ...) runs under torch.compile when its expert weights are not bfloat16:
# saved, its outputs held the expert activations of every layer to the backward (HF GPT-OSS,
# 4 layers, sequence 512, through Inductor: 77.3 MiB saved, 58.3 recomputed; per-layer
# checkpointing, which replays it eagerly, 69.9; 2026-12-06).  A user vouches for more with
# ``Options.recomputable_ops``; any other custom op is saved (it may draw random numbers
# without saying so, and a recomputation would then differ from the forward).
PURE_CUSTOM_OPS = frozenset({"transformers::grouped_mm_fallback"})


class Role(enum.Enum):
    STATIC_INPUT = "static_input"  # parameters, buffers: alive for the whole step anyway
    INPUT = "input"  # other primals: held by the caller
    TANGENT = "tangent"  # gradients of the forward outputs, handed to the backward
    FORWARD = "forward"
    BACKWARD = "backward"
    OTHER = "other"  # output node, seeds and offsets


@dataclass(frozen=True)
class NodeFacts:
    """Facts about one node of the joint graph."""

    role: Role
    storages: tuple[object, ...]  # storage keys of the tensors this node's value lives in
    cost: float  # estimated forward cost (FLOPs) of running the node once
    recompute_ban: str | None  # why the node must not be recomputed; None if it may be


@dataclass(frozen=True)
class JointGraph:
    module: fx.GraphModule
    num_fwd_outputs: int
    primals: tuple[fx.Node, ...]
    tangents: tuple[fx.Node, ...]
    static_inputs: frozenset[fx.Node]
    mutated_inputs: frozenset[fx.Node]
    forward: tuple[fx.Node, ...]  # nodes the forward outputs need, in graph order
    backward: tuple[fx.Node, ...]  # nodes that need a tangent, in graph order
    fwd_outputs: tuple[fx.Node, ...]  # the user-visible forward outputs (tensors only)
    # tensors in the storage of a non-static input or a returned output (the caller may edit them
    # before the backward) that no backward node reads directly (eager autograd does not keep them)
    caller_visible: frozenset[fx.Node]
    facts: Mapping[fx.Node, NodeFacts]
    storage_bytes: Mapping[object, int]  # every storage key -> its size in bytes
    storage_owner: Mapping[object, fx.Node]  # the first tensor-valued node that allocates it
    # pointwise values Inductor computes inside their readers' kernels (empty without Inductor)
    fused: frozenset[fx.Node] = frozenset()
    # forward values whose backward readers are all pointwise or reductions: the last of those
    # kernels can write a same-size result into their buffer (Inductor's in-place reuse; empty
    # without Inductor)
    reusable: frozenset[fx.Node] = frozenset()
    inductor: bool = False  # the graphs go to Inductor (its fusion and buffer reuse shape the memory)
    # both graphs run channels-last on the CPU, which changes what a convolution's kernel allocates
    # inside it (memory.scratch_bytes); the partitioner plans each layout of cpu_layouts
    channels_last: bool = False
    # the CPU layouts the pair is planned in (True: channels-last), the default first
    # (_torch.cpu_layouts: Inductor, convolutions on the CPU); (False,) without Inductor
    cpu_layouts: tuple[bool, ...] = (False,)
    # the nodes that run in the backward graph when their stage is recomputed: backward nodes and
    # the forward nodes they depend on (not forward nodes only the loss reads)
    backward_graph: frozenset[fx.Node] = frozenset()
    # each primal's gradient among the joint graph's outputs (None: it gets none); empty when the
    # outputs do not pair one gradient with each primal (:func:`primal_gradients`)
    gradients: Mapping[fx.Node, object] = field(default_factory=lambda: MappingProxyType({}))
    # estimated seconds of recomputing each forward node in the backward, as the target compiler
    # runs it (fxremat.timing: a node Inductor fuses into its readers costs next to nothing); the
    # chain's stage costs (``NodeFacts.cost`` stays the FLOP count cheapness is judged by)
    seconds: Mapping[fx.Node, float] = field(default_factory=lambda: MappingProxyType({}))
    # the caller drops the user outputs once the forward returns (a piece of a layer, whose
    # outputs feed the rest of the layer: the attention weights an eager attention returns and its
    # layer discards); False: the caller holds them through the backward (a whole step's loss and
    # logits; the logits a model broken before its loss returns to its caller, which keeps its
    # outputs).  Saving a returned value then costs its bytes like any other.
    outputs_dropped: bool = False


def _recompute_ban(node: fx.Node, facts: dict[fx.Node, NodeFacts], mutated_storages: set,
                   pure_ops: frozenset[str]) -> str | None:
    if node.op != "call_function":
        return None if node.op == "get_attr" else f"{node.op} node"
    target = node.target
    policy = _torch.checkpoint_policy(node)
    if policy == "must_save":
        return "checkpoint policy MUST_SAVE"
    if isinstance(target, torch._ops.OpOverload):
        if _torch.is_random(node) and not _torch.can_replay_rng():
            return "random op (this torch cannot replay its RNG state)"
        if _torch.is_inductor_seeds(node):
            # its few int64 seeds are saved and the values drawn from them recomputed exactly;
            # replayed, it fails in Inductor's CPU lowering ("Backend not supported" for
            # run_and_save_rng_state) after the partitioner returned, where no fallback can catch
            # it (HF ViTMAE's random masking, 2026-12-04)
            return "Inductor's seeds op (Inductor does not lower a replayed generator state around it)"
        if target.namespace == "_c10d_functional" or target.namespace == "c10d":
            return "collective"
        if target._schema.is_mutable:
            return "mutates an input"
        if target.namespace not in _BUILTIN_NAMESPACES:
            name = target._schema.name  # "namespace::name", as Options.recomputable_ops stores it
            if name not in pure_ops:
                return f"custom op {name} (its purity is unknown; Options.recomputable_ops vouches for one)"
            if _torch.is_random(node) or any(r.alias_info is not None for r in target._schema.returns):
                return f"custom op {name} (listed as recomputable, but its schema says it draws or aliases)"
    elif _torch.is_effectful(node):
        return "effectful op"
    elif isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher-order op {target.name()} (its subgraphs are not inspected)"
    if target is operator.getitem and isinstance(node.args[0], fx.Node) and facts[node.args[0]].recompute_ban:
        return f"output of {node.args[0].name}: {facts[node.args[0]].recompute_ban}"  # saved, never rebuilt
    if target is not operator.getitem and _torch.is_impure(node):
        return "impure op"
    for arg in node.all_input_nodes:  # args come first in graph order: their facts exist
        if any(s in mutated_storages for s in facts[arg].storages):
            return f"reads {arg.name}, an input the forward mutates"
    return None


_BUILTIN_NAMESPACES = frozenset({"aten", "prims"})


def analyze(
    joint: fx.GraphModule,
    *,
    num_fwd_outputs: int,
    static_lifetime_input_indices: list[int] | None = None,
    inductor: bool = False,
    outputs_dropped: bool = False,
    recomputable_ops: Iterable[str] = (),
) -> JointGraph:
    """Compute the :class:`JointGraph` record of ``joint`` (``joint`` itself is left untouched).
    ``inductor``: the graphs go to Inductor, so pointwise values it fuses are never materialized;
    ``outputs_dropped``: the caller drops the user outputs after the forward (``JointGraph.outputs_dropped``);
    ``recomputable_ops``: custom ops (``"namespace::name"``) the user vouches for, besides :data:`PURE_CUSTOM_OPS`."""
    pure_ops = PURE_CUSTOM_OPS | frozenset(recomputable_ops)
    graph = joint.graph
    info = _torch.classify_nodes(joint, static_lifetime_input_indices or [], num_fwd_outputs)
    primals = tuple(n for n in graph.nodes if _torch.is_primal(n))
    tangents = tuple(n for n in graph.nodes if _torch.is_tangent(n))
    static = frozenset(info.static_lifetime_input_nodes)
    mutated = frozenset(_torch.mutated_primals(joint, primals))
    output = graph.find_nodes(op="output")[0]
    fwd_outputs = tuple(
        o for o in output.args[0][:num_fwd_outputs] if isinstance(o, fx.Node) and _torch.tensors_in(o.meta.get("val"))
    )

    mutated_storages = {_torch.storage_key(t) for p in mutated for t in _torch.tensors_in(p.meta.get("val"))}
    facts: dict[fx.Node, NodeFacts] = {}
    storage_bytes: dict[object, int] = {}
    storage_owner: dict[object, fx.Node] = {}
    forward, backward = [], []
    for node in graph.nodes:
        tensors = _torch.tensors_in(node.meta.get("val"))
        keys = tuple(_torch.storage_key(t) for t in tensors)
        for key, t in zip(keys, tensors):
            if key not in storage_bytes:
                storage_bytes[key] = _torch.storage_nbytes(t)
            if key not in storage_owner and isinstance(node.meta.get("val"), torch.Tensor):
                storage_owner[key] = node
        if node.op == "placeholder":
            role = Role.STATIC_INPUT if node in static else Role.TANGENT if node in tangents else (
                Role.INPUT if node in primals else Role.OTHER)
        elif node.op == "output":
            role = Role.OTHER
        elif info.is_required_fw(node):
            role = Role.FORWARD
            forward.append(node)
        elif node in info.unclaimed_nodes:
            role = Role.FORWARD  # needs no tangent, only the backward uses it: forward-computable
        else:
            role = Role.BACKWARD
            backward.append(node)
        ban = _recompute_ban(node, facts, mutated_storages, pure_ops) if role is Role.FORWARD else None
        facts[node] = NodeFacts(role, keys, flops(node) if role is Role.FORWARD else 0.0, ban)
    visible = {key for n in primals if facts[n].role is Role.INPUT for key in facts[n].storages}
    visible.update(key for n in fwd_outputs for key in facts[n].storages)
    # Eager autograd keeps a storage alive (and its version counter checked) where the backward
    # reads any tensor in it: the caller cannot edit such a storage before the backward, so any
    # view of it may be saved; only storages the backward never reads are the caller's to edit.
    read_by_backward = {a for n in backward for a in n.all_input_nodes}
    kept_by_eager = {key for a in read_by_backward if a in facts for key in facts[a].storages}
    caller_visible = frozenset(
        n for n, f in facts.items()
        if f.role in (Role.INPUT, Role.FORWARD) and n not in read_by_backward
        and any(k in visible and k not in kept_by_eager for k in f.storages)
    )
    in_backward = _in_backward_graph(facts)
    fused = _fused_by_inductor(graph, facts, in_backward) if inductor else frozenset()
    reusable = _reusable_by_inductor(graph, facts, forward, in_backward) if inductor else frozenset()
    layouts = _torch.cpu_layouts(joint) if inductor else (False,)
    return JointGraph(
        module=joint,
        num_fwd_outputs=num_fwd_outputs,
        primals=primals,
        tangents=tangents,
        static_inputs=static,
        mutated_inputs=mutated,
        forward=tuple(forward),
        backward=tuple(backward),
        fwd_outputs=fwd_outputs,
        caller_visible=caller_visible,
        facts=MappingProxyType(facts),
        storage_bytes=MappingProxyType(storage_bytes),
        storage_owner=MappingProxyType(storage_owner),
        fused=fused,
        reusable=reusable,
        inductor=inductor,
        outputs_dropped=outputs_dropped,
        channels_last=layouts[0],
        cpu_layouts=layouts,
        backward_graph=in_backward,
        gradients=MappingProxyType(primal_gradients(graph, num_fwd_outputs)),
        seconds=MappingProxyType(graph_seconds(graph, fused, lambda n: facts[n].storages,
                                               nodes=[n for n, f in facts.items() if f.role is Role.FORWARD])),
    )


def primal_gradients(graph: fx.Graph, num_fwd_outputs: int) -> dict[fx.Node, object]:
    """Each primal of a joint graph with its gradient among the graph's outputs (None where it
    gets none), in primal order; ``{}`` when the outputs do not pair one gradient with each primal."""
    primals = [n for n in graph.nodes if _torch.is_primal(n)]
    grads = list(graph.find_nodes(op="output")[0].args[0][num_fwd_outputs:])
    return dict(zip(primals, grads)) if len(grads) == len(primals) else {}


def _in_backward_graph(facts: Mapping[fx.Node, NodeFacts]) -> frozenset[fx.Node]:
    """The nodes that run in the backward graph when their stage is recomputed: backward nodes and
    the forward nodes they depend on (not forward nodes only the loss reads, such as the gather of
    the log-probabilities)."""
    backward = [n for n, f in facts.items() if f.role is Role.BACKWARD]
    out, stack = set(backward), [a for n in backward for a in n.all_input_nodes]
    while stack:
        node = stack.pop()
        if node not in out and facts[node].role is Role.FORWARD:
            out.add(node)
            stack.extend(node.all_input_nodes)
    return frozenset(out)


def _fused_by_inductor(graph: fx.Graph, facts: Mapping[fx.Node, NodeFacts], in_backward: frozenset[fx.Node]) -> frozenset[fx.Node]:
    """Values Inductor computes inside their readers' kernels and never allocates (log-softmax's
    ``x - max`` and ``exp``, GELU's inner terms): :func:`fxremat.fusion.fused_values`, with each
    value's readers counted in the backward graph, where the chain models its stage."""
    return fused_values(graph, lambda n: facts[n].storages, lambda n: sum(u in in_backward for u in n.users))


def _reusable_by_inductor(graph: fx.Graph, facts: Mapping[fx.Node, NodeFacts], forward: list[fx.Node],
                          in_backward: frozenset[fx.Node]) -> frozenset[fx.Node]:
    """Forward values that the backward graph reads only in pointwise ops and reductions: the
    kernel that reads one last can write its result in place into the value's buffer when sizes
    match (the loss gradient into the saved logits)."""
    outputs = set(graph.find_nodes(op="output")[0].all_input_nodes)
    own = lambda n: frozenset(facts[n].storages)  # noqa: E731
    return frozenset(n for n in forward if any(u in in_backward for u in n.users)
                     and readers_fusible(n, own, outputs, among=in_backward.__contains__))
