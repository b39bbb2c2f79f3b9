"""What Inductor materializes: the values of a graph it computes inside their readers' kernels.

Invariant: one rule, used by the joint-graph analysis (the chain model's stage transients) and by
the memory model's replay of extracted graphs alike.  A value is *fused* (never allocated; its
readers read its inputs instead, so those stay alive like a view's base) when Inductor's lowering
leaves it unrealized:

* it is pointwise (``_torch.inductor_pointwise``), no graph output, and every reader, looking
  through views, is pointwise or a reduction (an extern kernel such as a matmul, a convolution or
  attention needs its operand in memory; a pointwise reader returned by the graph stores it; a
  returned reduction, such as a batch norm's bias gradient, computes it inside its own kernel), or
  a scatter Inductor generates, which reads its index and source inline
  (``_torch.scatter_inlined_operands``: an index-put such as an embedding's backward, and a
  scatter-add such as a gather's backward on one CPU thread or on CUDA);
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

Two more facts of Inductor's allocation, used by the replay only (:mod:`fxremat.memory`): which
kernel writes each piece of a CPU concatenation (:func:`concat_writers`: the buffer is alive from
the first), and which nodes run in one C++ call on the CPU (:func:`kernel_ends`: buffers dying
inside a call are freed after it)."""

from __future__ import annotations

import operator
from typing import Callable, Collection, Iterable

import torch
import torch.fx as fx

from . import _torch

__all__ = ["fused_values", "readers_fusible", "is_view", "inline_cone", "heavy_on_cpu", "concat_writers", "kernel_ends"]

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
        if node in _torch.scatter_inlined_operands(user) and user.args[0] is not node:
            continue  # a generated scatter reads its index and source inline
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


# aten ops without the pointwise or reduction tag that Inductor computes in generated kernels (it
# decomposes them into reductions and pointwise loops, or lowers them to windowed loads): a copy of
# one of their inputs fuses into their kernels like into a reduction's, and on the CPU they join
# the C++ call of the kernels around them.
_GENERATED = frozenset({
    "_low_memory_max_pool_with_offsets", "_low_memory_max_pool_offsets_to_indices", "max_pool2d_with_indices",
    "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward",
    "_native_batch_norm_legit_functional", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "native_batch_norm", "native_batch_norm_backward", "native_layer_norm", "native_layer_norm_backward",
    "native_group_norm", "native_group_norm_backward", "_softmax", "_log_softmax", "_softmax_backward_data",
    "_log_softmax_backward_data",
})


def _generated_scatter(node: fx.Node) -> bool:
    """An index-put Inductor generates (:func:`fxremat._torch.scatter_inlined_operands`) into a
    buffer that is no other index-put's: a kernel of the C++ call around it, not an extern call
    that ends one (HF BERT's three embedding gradients and its layer norm's backward are one
    kernel).  Not a put on another put's output: in a chain Inductor may write each into the last
    one's buffer (a bicubic interpolation's backward, 16 puts: one buffer, measured) or copy it
    (BART's tied embedding, 2026-12-04), and the replay, which counts a copy per put, would hold
    every copy to the call's end; nor a generated scatter-add (not measured)."""
    return _torch.starts_put_chain(node) and bool(_torch.scatter_inlined_operands(node))


def _kernel_reader(node: fx.Node) -> bool:
    """Whether Inductor computes ``node`` in a generated kernel (pointwise or a reduction), which
    a pointwise copy of one of its inputs can join."""
    if node.op != "call_function":
        return False
    if _torch.inductor_pointwise(node) or getattr(torch.Tag, "reduction", None) in getattr(node.target, "tags", ()):
        return True
    return _torch.op_name(node) in _GENERATED


# Extern kernels Inductor calls with an ``out=`` buffer it chooses: a concatenation can be that buffer.
_OUT_KERNELS = frozenset({"mm", "addmm", "bmm", "baddbmm"})


def _computed_in_place(node: fx.Node) -> bool:
    """Whether Inductor can compute ``node`` straight into a slice of a concatenation: a pointwise
    kernel, or a matmul called with an ``out=`` buffer (not a convolution or other fallback, which
    allocates its own output)."""
    if _torch.inductor_pointwise(node):
        return True
    return _torch.op_name(node) in _OUT_KERNELS


def _cpu_concat(node: fx.Node) -> bool:
    """A concatenation that Inductor's CPU lowering runs as a ``ConcatKernel`` (several inputs, no
    8-bit dtype, which falls back to aten)."""
    if node.op != "call_function" or node.target is not torch.ops.aten.cat.default:
        return False
    pieces = node.args[0] if node.args else ()
    val = node.meta.get("val")
    return (isinstance(pieces, (list, tuple)) and len(pieces) > 1 and all(isinstance(p, fx.Node) for p in pieces)
            and isinstance(val, torch.Tensor) and val.device.type == "cpu" and val.dtype not in (torch.int8, torch.uint8))


def concat_writers(nodes: list[fx.Node], own: Callable[[fx.Node], frozenset],
                   returned: Collection[fx.Node]) -> dict[fx.Node, dict[fx.Node, fx.Node]]:
    """Where Inductor writes each piece of a concatenation, for the CPU ``cat`` nodes of ``nodes``
    (in the order they run): ``{cat: {piece: writer}}``.  Inductor allocates the concatenation's
    buffer and writes every piece into its slice of it (``ConcatKernel``), so the buffer is alive
    from the piece written first, which can be long before the ``cat`` runs.

    * A piece whose layout is still free (no graph output, read before the cat only by generated
      kernels) is computed straight into its slice, with no buffer of its own: a matmul (called with
      its slice as ``out=``) or a pointwise value read at least twice before the cat (realized where
      the graph computes it) is its own writer; any other pointwise piece stays unrealized until
      the cat is lowered (its writer is the cat; the replay still charges it a buffer of its own).
    * Any other piece (a graph input, a convolution's output, a view, a value already placed) is
      copied in by a pointwise copy, which the scheduler fuses into the first generated kernel that
      reads the piece or horizontally with its copies into other concatenations: the writer is
      that reader, the first ``cat`` reading the piece, or the cat itself.  In a dense block the
      block input is copied into every concatenation of the block by the block's first kernel.

    Read from Inductor's generated code (torch 2.13 CPU): a 3-layer dense block, the zoo U-Net in
    both layouts, a matmul's ``out=`` a slice, a ReLU computed into its slice."""
    position = {n: i for i, n in enumerate(nodes)}
    out: dict[fx.Node, dict[fx.Node, fx.Node]] = {}
    for cat in nodes:
        if not _cpu_concat(cat):
            continue
        writers: dict[fx.Node, fx.Node] = {}
        for piece in dict.fromkeys(cat.args[0]):
            earlier = sorted((u for u in piece.users if u in position and position[u] < position[cat]), key=position.get)
            if (_computed_in_place(piece) and piece not in returned and not is_view(piece, own)
                    and all(_kernel_reader(u) for u in earlier)):
                # realized where the graph computes it (a matmul; a pointwise value read twice before
                # the cat), straight into its slice; else computed into it when the cat is lowered
                early = not _torch.inductor_pointwise(piece) or len(earlier) >= 2
                writers[piece] = piece if early else cat
                continue
            writers[piece] = next((u for u in earlier if _kernel_reader(u) or _cpu_concat(u)), cat)
        out[cat] = writers
    return out


def _on_cpu(node: fx.Node) -> bool:
    tensors = _torch.tensors_in(node.meta.get("val"))
    return bool(tensors) and all(t.device.type == "cpu" for t in tensors)


def kernel_ends(nodes: list[fx.Node], fused: Collection[fx.Node], own: Callable[[fx.Node], frozenset]) -> dict[fx.Node, fx.Node]:
    """For each node of ``nodes`` (in the order they run) that Inductor computes in a generated CPU
    kernel, the last node of the C++ call that runs it.  Inductor's CPU backend emits every kernel
    it schedules between two extern calls (a matmul, a convolution, a fallback) into one C++
    function (``CppScheduling``'s kernel group, flushed at an extern kernel): the buffers the call
    writes are allocated before it and those that die in it are freed after it, so a value whose
    last reader is early in the call stays alive while the rest of its outputs are written.

    A call is modelled as one run of generated-kernel nodes (pointwise ops, reductions, pooling, the
    normalizations Inductor decomposes, concatenations, the index-puts it generates); views, ``getitem`` and nodes of no tensor
    (symbolic sizes) neither join nor end a run, any other op ends it.  Measured on a dense block's
    backward (torch 2.13): a batch norm's backward and the recomputation of the layer before it
    ran as one call, which kept the convolution's input gradient and the saved concatenation alive
    while it wrote the recomputed values, 200 KB above the node-by-node replay.  On a GPU every
    kernel is its own launch: no node of a CUDA tensor joins a run."""
    out: dict[fx.Node, fx.Node] = {}
    run: list[fx.Node] = []
    for node in [*nodes, None]:
        if node is not None and (node.op != "call_function" or node.target is operator.getitem or is_view(node, own)
                                 or not _torch.tensors_in(node.meta.get("val"))):
            continue
        if node is not None and (node in fused or _kernel_reader(node) or _cpu_concat(node) or _generated_scatter(node)) \
                and _on_cpu(node):
            run.append(node)
        elif run:
            out.update(dict.fromkeys(run, run[-1]))
            run = []
    return out


def inline_cone(x: fx.Node, fused: frozenset[fx.Node], own) -> tuple[set[fx.Node], set[fx.Node]]:
    """The nodes Inductor computes inside ``x``'s kernel (``x``, the unrealized pointwise values it
    reads and the views between), and the stored values they read."""
    cone, sources, stack = {x}, set(), list(x.all_input_nodes)
    while stack:
        a = stack.pop()
        if a in cone or a in sources:
            continue
        if a in fused or is_view(a, own):
            cone.add(a)
            stack.extend(a.all_input_nodes)
        else:
            sources.add(a)
    return cone, sources
