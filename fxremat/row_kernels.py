"""A forward softmax's input stored where its loop nest would split: Inductor's CPU row kernels kept whole.

Invariant: the rewrite changes no value, and it is meant to change no buffer's lifetime: it marks
a value stored (``inductor_force_stride_order``) only where one of the buffers its computation reads
has the same size and dies there, so the stored value takes that buffer's place (Inductor writes it
in place), and only in forward graphs compiled by Inductor for the CPU, after the replay.  That the
peak stays is measured (HF T5, GPT-2 eager, BERT, Swin and the test's model: the same peaks), not
proven: Inductor could have run some forward softmax in place in its split form, as it does in
backward graphs.

A softmax over the last dimension is, for Inductor, three passes over each row: the maximum, the
exponentials and their sum, the division.  Its C++ backend runs the three in one loop over the
rows, with the row's exponentials in a local buffer, only when all three nodes iterate over the
same outer dimensions.  The division and the sum read the stored exponentials, so their outer
dimensions collapse into one (batch x heads x rows); the maximum reads the softmax's input as the
graph computes it, and where that input is computed inline from an operand broadcast over an
outer dimension (an attention mask over the heads, a position bias over the batch), those
dimensions cannot collapse.  The passes then run as separate loop nests: every exponential is
written to memory and read back twice.  HF T5 at sequence 1024 adds its masked position bias to
each layer's scores, (2, 4, 1024, 1024) from a (2, 1024) padding mask and a (1, 4, 1024, 1024)
bias: its encoder's four forward softmaxes took 259.5 ms per step (kernel profile, 2026-12-07),
and the step 1.086x per-layer checkpointing's, whose checkpointed layers read that sum stored;
with the inputs stored, 1.012x (7 interleaved rounds), the peak unchanged (147.27 MiB).

:func:`store_softmax_inputs` stores such an input where the graph computes it: the scores it is
added to (a batched matmul's output, read by nothing else) die there and Inductor computes the sum
in their buffer; the softmax then reads one contiguous input and runs as one row loop, into a
buffer of its own, as it did split.  Not in backward graphs: there Inductor runs a split,
recomputed softmax in place (the exponentials written over the scores they are computed from),
which a stored input prevents (the probabilities need a buffer beside it): HF T5 at sequence 1024
measured 162.1 MiB with backward graphs marked too, against 147.3.
"""

from __future__ import annotations

import logging

import torch
import torch.fx as fx

from . import _torch
from .fusion import fused_values, inline_cone

__all__ = ["store_softmax_inputs", "SOFTMAX_MIN_NUMEL"]

_aten = torch.ops.aten
log = logging.getLogger(__name__)

# Below this many elements (a batch of one 256 x 256 score matrix) a softmax's input is left
# inline: short row loops, where no gain was measured (HF GPT-2 eager at sequence 256, 2 MiB
# softmaxes, stepped alike with and without, 2026-12-07), and the small test models' golden graphs
# stay as they were.
SOFTMAX_MIN_NUMEL = 1 << 16


def store_softmax_inputs(gm: fx.GraphModule, min_numel: int = SOFTMAX_MIN_NUMEL) -> int:
    """Mark stored each CPU floating value that a maximum over its last dimension reads (a
    softmax's first pass), computed inline from an operand broadcast over some of the other
    dimensions and indexed by the rest (a (B, 1, 1, S) mask or a (1, H, S, S) bias of (B, H, S, S) scores), when
    a same-size buffer it reads dies there; returns how many were marked.  Values returned by the
    graph, of symbolic or non-dense layout, under ``min_numel`` elements, or on another device
    are left alone, as is every graph on a torch without the mark op."""
    if _torch.realize_op() is None:
        return 0
    graph = gm.graph
    returned = set(graph.find_nodes(op="output")[0].all_input_nodes)
    inputs = {amax.args[0]: None for amax in graph.find_nodes(op="call_function", target=_aten.amax.default)
              if _row_input(amax.args[0], amax, returned, min_numel)}
    if not inputs:  # most graphs: no whole-graph walk below
        return 0
    own = {n: frozenset(_torch.storage_keys(n)) for n in graph.nodes}.__getitem__
    fused = fused_values(graph, _torch.storage_keys)
    marked = []
    for x in inputs:
        cone, sources = inline_cone(x, fused, own)
        if _broadcast_outer(cone, x) and _dies_here(x, cone, sources, returned):
            marked.append(x)
    for x in marked:
        _torch.insert_realize(graph, x, every_reader=True)
    if marked:
        graph.lint()
        gm.recompile()
        log.debug("fxremat: %d softmax inputs stored where their row loops would split", len(marked))
    return len(marked)


def _row_input(x: object, amax: fx.Node, returned: set[fx.Node], min_numel: int) -> bool:
    """Whether ``x`` is a dense, static, floating CPU value Inductor computes inline (pointwise, not
    returned), of at least ``min_numel`` elements, that ``amax`` reduces over its last dimension."""
    if not (isinstance(x, fx.Node) and x.op == "call_function" and _torch.inductor_pointwise(x)
            and x not in returned and not _torch.is_realize(x)):
        return False
    val = x.meta.get("val")
    if not (isinstance(val, torch.Tensor) and val.device.type == "cpu" and val.is_floating_point() and val.dim() >= 2):
        return False
    if not _torch.static_layout(val) or not val.is_contiguous():
        return False
    dims = amax.args[1] if len(amax.args) > 1 else amax.kwargs.get("dim", ())
    return val.numel() >= min_numel and [d % val.dim() for d in dims] == [val.dim() - 1]


def _broadcast_outer(cone: set[fx.Node], x: fx.Node) -> bool:
    """Whether a node of ``cone`` with ``x``'s shape reads an operand (through an ``expand`` or an
    elementwise op's implicit broadcast) that is broadcast over some of the outer dimensions (all
    but the last) and indexed by others: its index keeps those dimensions from collapsing into one.
    An operand broadcast over every outer dimension (a per-column bias, a scalar) or over none
    leaves them free to collapse."""
    shape = tuple(x.meta["val"].shape)
    outer = [d for d in range(len(shape) - 1) if shape[d] > 1]
    for n in cone:
        val = n.meta.get("val")
        if not isinstance(val, torch.Tensor) or tuple(val.shape) != shape:
            continue
        for a in n.all_input_nodes:
            aval = a.meta.get("val")
            if not isinstance(aval, torch.Tensor) or aval.dim() > len(shape):
                continue
            padded = (1,) * (len(shape) - aval.dim()) + tuple(aval.shape)
            broadcast = sum(padded[d] == 1 for d in outer)
            if 0 < broadcast < len(outer):
                return True
    return False


def _dies_here(x: fx.Node, cone: set[fx.Node], sources: set[fx.Node], returned: set[fx.Node]) -> bool:
    """Whether a computed source of ``x`` (no graph input, not returned) with ``x``'s elements and at
    least its item size is read by nothing outside ``cone``, looking through views: its buffer
    dies where ``x`` is stored."""
    val = x.meta["val"]
    for s in sources:
        sval = s.meta.get("val")
        if (s.op == "call_function" and s not in returned and isinstance(sval, torch.Tensor)
                and sval.numel() == val.numel() and sval.element_size() >= val.element_size()
                and _read_only_into(s, x, cone)):
            return True
    return False


def _read_only_into(s: fx.Node, x: fx.Node, cone: set[fx.Node]) -> bool:
    """Whether every reader of ``s``, and every reader of those up to ``x``, is in ``cone``."""
    seen, stack = {s}, [s]
    while stack:
        for u in stack.pop().users:
            if u not in cone:
                return False
            if u is not x and u not in seen:
                seen.add(u)
                stack.append(u)
    return True
