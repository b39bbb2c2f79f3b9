"""Duplicates: attention masks computed once per graph, not once per layer (merged, and under
Inductor stored once rather than recomputed inside every layer's kernels), and the backward's own
copies of saved forward values read from the saved value.

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

One mask can still be computed many times: Inductor inlines a cheap pointwise value into every
kernel that reads it.  HF GPT-2 with eager attention builds its causal mask once (a gather of the
padding mask, a comparison of position ranges, a ``where``) and adds it to every layer's scores;
Inductor recomputed it inside each layer's softmax, whose broadcast index then split the kernel's
loops so that it could no longer keep a row of ``exp`` in a local buffer: 11.7 ms per layer instead
of 4.7 (2026-12-03), where per-layer checkpointing hands each layer a stored mask.
:func:`store_shared` stores each such value once (``prims.inductor_force_stride_order`` with its
own strides realizes it and returns it unchanged; :mod:`fxremat.fusion` counts it as stored).

Invariant of :func:`store_shared`: it only inserts that identity after a data-only floating-point
pointwise value read by two or more ops (through views), every one a pointwise op or a reduction,
so it changes no value, no gradient and no plan's saved set; it runs only on joint graphs compiled
by Inductor.  Integer and boolean values (position ids, boolean masks) are left to Inductor:
marked, HF BART's at sequence 1024 measured 74.1 MiB instead of 69.6 (2026-12-03); a value an
extern kernel reads (an SDPA mask) is stored by Inductor anyway.

Invariant of :func:`reading_saved_twins`: for one extraction, a backward node (or a forward node
only the backward needs) that reads a forward value's copy reads the value itself instead, only
where the value is saved and both are the same pure, deterministic call on the same (or twin)
arguments (:func:`forward_twins`); the joint graph is left as it was on exit.  The chain model and
the forward graph are unchanged; the backward recomputes less and saves what min-cut's plan saves.
"""

from __future__ import annotations

import contextlib
import logging
import operator
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import torch
import torch.fx as fx

from . import _torch
from .analysis import JointGraph, Role, primal_gradients
from .fusion import readers_fusible

__all__ = ["merge_duplicates", "store_shared", "Twin", "forward_twins", "reading_saved_twins"]

log = logging.getLogger(__name__)


def merge_duplicates(gm: fx.GraphModule, num_fwd_outputs: int, static_inputs: frozenset[fx.Node] = frozenset()) -> int:
    """Merge each data-only node of the joint graph ``gm`` into the first earlier node with the
    same target and arguments; returns how many nodes were erased.  Data-only inputs: primals
    that get no gradient and are not in ``static_inputs`` (parameters, buffers).  A joint graph
    whose outputs do not pair one gradient with each primal is left untouched."""
    graph = gm.graph
    data_only = _data_only(graph, num_fwd_outputs, static_inputs)
    if data_only is None:
        return 0
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


def store_shared(gm: fx.GraphModule, num_fwd_outputs: int, static_inputs: frozenset[fx.Node] = frozenset()) -> int:
    """Insert ``inductor_force_stride_order(v, v.stride())`` after each data-only value ``v`` (as
    :func:`merge_duplicates` defines them, constants and scalars aside) that Inductor computes as
    pointwise and two or more ops read (looking through views), all pointwise ops or reductions
    (:func:`fxremat.fusion.readers_fusible`, the rule the memory model fuses by), and let its
    readers read that instead; returns how many were inserted.  A torch without the op gets none."""
    data_only = _data_only(gm.graph, num_fwd_outputs, static_inputs)
    if _torch.realize_op() is None or not data_only:
        return 0
    graph, stored = gm.graph, 0
    returned = set(graph.find_nodes(op="output")[0].all_input_nodes)
    own = lambda n: frozenset(_torch.storage_keys(n))  # noqa: E731
    for node in list(graph.nodes):
        val = node.meta.get("val")
        if (node.op == "placeholder" or node not in data_only or not _torch.inductor_pointwise(node)
                or not node.all_input_nodes  # a constant (full, arange): Inductor folds it into its readers
                or not isinstance(val, torch.Tensor) or not val.is_floating_point() or val.numel() <= 1
                or _readers(node) < 2
                or not readers_fusible(node, own, returned)):  # an extern reader (SDPA) has Inductor store it anyway
            continue
        _torch.insert_realize(graph, node, every_reader=True)  # the same tensor: Inductor stores ``node`` once and reads it
        stored += 1
    if stored:
        graph.lint()
        gm.recompile()
        log.debug("fxremat: %d data-only values stored once for their readers", stored)
    return stored


@dataclass(frozen=True)
class Twin:
    """A forward value the joint graph's backward computes again: ``copy`` computes what ``of``
    computes; ``readers`` are the copy's readers outside the forward (the forward keeps its own)."""

    copy: fx.Node
    of: fx.Node
    readers: tuple[fx.Node, ...]


def forward_twins(jg: JointGraph) -> tuple[Twin, ...]:
    """Each forward node of the joint graph that computes what an earlier forward node computes
    (the same pure, deterministic call, or ``getitem``, on the same or twin arguments) and that a
    node outside the forward reads.  Nothing is merged here: see :func:`reading_saved_twins`."""
    canon: dict[fx.Node, fx.Node] = {}
    first: dict[Any, fx.Node] = {}
    for node in jg.module.graph.nodes:
        if jg.facts[node].role is not Role.FORWARD or _torch.is_random(node) or not (
                node.target is operator.getitem or _mergeable(node)):
            continue
        key = _key(node, canon)
        if key is not None and first.setdefault(key, node) is not node:
            canon[node] = first[key]
    forward = set(jg.forward)
    twins = ((copy, of, tuple(u for u in copy.users if u not in forward)) for copy, of in canon.items())
    return tuple(Twin(copy, of, readers) for copy, of, readers in twins if readers)


@contextlib.contextmanager
def reading_saved_twins(twins: Iterable[Twin], saved: Iterable[fx.Node]):
    """While open, each twin's readers (:func:`forward_twins`) read the forward's value instead
    of the copy where that value is in ``saved``; on exit every edited node reads what it read
    before.  Extract a pair inside it.

    The joint graph's backward recomputes forward values of its own: Inductor's layer-norm
    backward normalizes its input again, ``(x - mean) * rstd``.  PyTorch's min-cut merges such
    copies into the forward's by CSE before it partitions; fxremat plans on a copy that keeps them
    (merging them all changed the chain model: HF ViT at budget 0.6 ran 6% slower, 2026-12-03).
    With the forward's normalized value saved, extraction would save it for nothing and rebuild
    the copy from the layer's input and statistics (its ``addmm`` and ``var_mean``): HF BERT at
    sequence 512 with nothing recomputed re-ran 13 ``var_mean`` and 12 ``addmm`` (2026-12-03).
    Readers computed in the forward keep their copy (the forward the chain model counts)."""
    saved = set(saved)
    edited: dict[fx.Node, tuple[Any, Any]] = {}
    try:
        for twin in twins:
            if twin.of in saved:
                for user in twin.readers:
                    edited.setdefault(user, (user.args, user.kwargs))
                    user.replace_input_with(twin.copy, twin.of)
        yield len(edited)
    finally:
        for user, (args, kwargs) in edited.items():
            user.args, user.kwargs = args, kwargs


def _readers(node: fx.Node) -> int:
    """How many ops read ``node``, looking through views (an output counts as none)."""
    return sum(_readers(u) if getattr(u.target, "is_view", False) else int(u.op == "call_function")
               for u in node.users)


def _data_only(graph: fx.Graph, num_fwd_outputs: int, static_inputs: frozenset[fx.Node]) -> set[fx.Node] | None:
    """Primals that get no gradient and are not in ``static_inputs``, and the pure aten or prims
    calls all of whose inputs are among them; None when the outputs do not pair one gradient with
    each primal."""
    gradients = primal_gradients(graph, num_fwd_outputs)
    if not gradients:
        return None
    data_only = {p for p, g in gradients.items() if g is None and p not in static_inputs}
    for node in graph.nodes:
        if node.op != "placeholder" and _mergeable(node) and all(a in data_only for a in node.all_input_nodes):
            data_only.add(node)
    return data_only


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


def _key(node: fx.Node, canon: Mapping[fx.Node, fx.Node] = MappingProxyType({})) -> Any:
    """A hashable identity of the call, reading each argument as ``canon`` maps it (``None``: an
    argument that cannot be compared safely)."""
    try:
        key = (node.target, _frozen(node.args, canon), _frozen(tuple(sorted(node.kwargs.items())), canon))
        hash(key)
    except TypeError:
        return None
    return key


def _frozen(value: Any, canon: Mapping[fx.Node, fx.Node]) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_frozen(v, canon) for v in value))
    if isinstance(value, fx.Node):
        return ("node", canon.get(value, value))
    if isinstance(value, float) and value != value:  # NaN never equals itself
        return ("nan",)
    if isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise TypeError("not compared by value")
    return (type(value).__name__, value)
