"""What Inductor materializes: the values of a graph it computes inside their readers' kernels.

Invariant: one rule, used by the joint-graph analysis (the chain model's stage transients) and by
the memory model's replay of extracted graphs alike.  A value is *fused* (never allocated; its
readers read its inputs instead, so those stay alive like a view's base) when Inductor's lowering
leaves it unrealized:

* it is pointwise (``_torch.inductor_pointwise``), no graph output, and every reader, looking
  through views, is pointwise or a reduction (an extern kernel such as a matmul, a convolution or
  attention needs its operand in memory; a pointwise reader returned by the graph stores it; a
  returned reduction, such as a batch norm's bias gradient, computes it inside its own kernel);
* and Inductor does not realize it on reuse: a value read by more than one node is stored once
  instead of recomputed in each reader when its inlined computation (the value and the unrealized
  pointwise values it reads) is heavy on the CPU (``exp``, ``log``, ``sigmoid``, ``tanh`` and the
  ops built on them: SiLU's ``x * sigmoid(x)`` read by the forward and the backward is stored)
  or has more ops than the opcount threshold or reads more buffers than
  ``realize_reads_threshold`` (a batch norm's output, which reads the input, mean, inverse
  standard deviation, weight and bias: read by the next op and by its own backward, it is stored
  once; uncounted, MobileNetV2's plan at budget 0.5 replayed 80.5 MiB and measured 101.8); and a
  pointwise value whose inlined computation reads more buffers than the accumulated-reads
  threshold is realized whatever its readers.

A value :func:`fxremat.merge.store_shared` marks (``_torch.realize_op``) is stored, and the mark
is an alias of it.  A view of a fused value is fused with it.  Thresholds are read from ``torch._inductor.config``
when it has them (``_torch.inductor_realize_thresholds``).
"""

from __future__ import annotations

import operator
from typing import Callable, Collection, Iterable

import torch
import torch.fx as fx

from . import _torch

__all__ = ["fused_values", "readers_fusible", "is_view", "heavy_on_cpu"]

# aten ops whose Inductor lowering uses exp, log, log10, log1p, log2, sigmoid or tanh: the ops
# Inductor's CPU heuristic realizes rather than recompute in every reader.
_HEAVY_ON_CPU = frozenset({
    "exp", "log", "log10", "log1p", "log2", "sigmoid", "tanh", "silu", "silu_backward", "softplus",
    "softplus_backward", "mish", "mish_backward", "logit", "logit_backward", "xlogy", "special_xlog1py",
})


def _heavy(node: fx.Node, cpu: bool) -> bool:
    return cpu and heavy_on_cpu(node)


def heavy_on_cpu(node: fx.Node) -> bool:
    """Whether Inductor's CPU heuristic counts ``node`` heavy (stores it rather than recompute it
    in each of several readers)."""
    packet = getattr(node.target, "overloadpacket", None)
    name = getattr(packet, "__name__", "")
    if name == "gelu":
        return node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none") == "tanh"
    return name in _HEAVY_ON_CPU


def is_view(node: fx.Node, own: Callable[[fx.Node], frozenset]) -> bool:
    """Whether ``node`` has no storage of its own: every storage it lives in is an input's."""
    return (node.op == "call_function" and node.target is not operator.getitem and bool(own(node))
            and own(node) <= {key for a in node.all_input_nodes for key in own(a)})


def readers_fusible(node: fx.Node, own: Callable[[fx.Node], frozenset], returned: set[fx.Node],
                    among: Callable[[fx.Node], bool] | None = None) -> bool:
    """Every reader of ``node`` (looking through views; only readers ``among`` accepts, if given)
    is a pointwise op that is no graph output, or a reduction (returned or not: until 2026-12-04
    a returned one was refused, and the replay stored each batch norm's input gradient at its
    graph position, where Inductor computes it inside the bias gradient's sum and the kernels
    after it: HF MobileNetV2's replay was 9 MiB under the measured peak, a small residual batch-norm
    network's 12%)."""
    reduction = getattr(torch.Tag, "reduction", None)
    for user in node.users:
        if among is not None and not among(user) and not is_view(user, own):
            continue
        if user.op != "call_function" or _torch.is_realize(user):
            return False
        if reduction in getattr(user.target, "tags", ()):
            continue
        if user in returned:
            return False
        if _torch.inductor_pointwise(user):
            continue
        if not (is_view(user, own) and readers_fusible(user, own, returned, among)):
            return False
    return True


def fused_values(graph: fx.Graph, storages: Callable[[fx.Node], Iterable[object]],
                 readers: Callable[[fx.Node], int] | None = None,
                 stored: Collection[fx.Node] = ()) -> frozenset[fx.Node]:
    """The values of ``graph`` Inductor never allocates (see the module docstring); ``storages``
    gives a node's storage keys (a view's are all among its inputs'); ``readers`` the number of
    its readers that run in the same compiled graph (default: all of them); ``stored``: values
    Inductor allocates whatever their readers (an add it runs as an ``addmm``)."""
    readers = readers or (lambda node: len(node.users))
    returned = set(graph.find_nodes(op="output")[0].all_input_nodes)
    own = {n: frozenset(storages(n)) for n in graph.nodes}.__getitem__
    thresholds = {cpu: _torch.inductor_realize_thresholds(cpu) for cpu in (True, False)}
    view = lambda node: is_view(node, own)  # noqa: E731

    fused: set[fx.Node] = set()
    # The inlined computation of each unrealized value: (heavy on the CPU, op count, buffers read).
    cone: dict[fx.Node, tuple[bool, int, frozenset[fx.Node]]] = {}
    for n in graph.nodes:
        if n in returned or n in stored or not _torch.inductor_pointwise(n) or not readers_fusible(n, own, returned):
            continue
        cpu = all(t.device.type == "cpu" for t in _torch.tensors_in(n.meta.get("val")))
        heavy, ops, reads = _heavy(n, cpu), 1, set()
        for a in n.all_input_nodes:
            base = _through_views(a, view, fused)
            if base in cone:
                h, o, r = cone[base]
                heavy, ops, reads = heavy or h, ops + o, reads | r
            else:
                reads.add(base)
        opcount_threshold, acc_reads_threshold, reads_threshold = thresholds[cpu]
        if len(reads) > acc_reads_threshold:
            continue
        if readers(n) > 1 and (heavy or ops > opcount_threshold or len(reads) > reads_threshold):
            continue
        fused.add(n)
        cone[n] = (heavy, ops, frozenset(reads))
    for n in graph.nodes:  # a view of a fused value has no buffer of its own to alias
        if n not in fused and n not in returned and view(n) and any(a in fused for a in n.all_input_nodes):
            fused.add(n)
    return frozenset(fused)


def _through_views(node: fx.Node, is_view: Callable[[fx.Node], bool], fused: set[fx.Node]) -> fx.Node:
    """The value a chain of views of ``node`` reads (a view of a fused value reads that value)."""
    while node not in fused and is_view(node) and len(node.all_input_nodes) == 1:
        node = node.all_input_nodes[0]
    return node
