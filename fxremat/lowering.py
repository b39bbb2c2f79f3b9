"""The backward graph shaped so that Inductor's own passes keep the liveness the plan counts on.

Invariant: each rewrite changes how a value is computed, never what it is: it is an exact
identity of the math (``mm(a, b) == mm(b.t(), a.t()).t()``; ``x + put_acc(zeros, i, v) ==
put_acc(x, i, v)``; floating-point results can differ in the last bits, as with any other
blocking or summation order), every new node carries a ``meta["val"]``, and the graph stays
topologically ordered.  They run only on backward graphs compiled by Inductor.

Inductor's post-grad pass turns ``add(mm(a, b), c)`` into one ``addmm(c, a, b)`` placed at the
add.  When ``c`` is computed much later than the matmul (the gradient of an LM head tied to the
embedding: the head's weight gradient is a matmul at the start of the backward, the embedding's
gradient comes at its very end), the matmul then runs at the end and ``a`` and ``b`` stay alive
until then: HF GPT-2 at sequence 512 kept its 32 MiB logits gradient through the whole backward
for an 8 MiB weight gradient.  Computed as the transpose of the transposed product, the matmul is
no longer the add's direct input, runs where the graph puts it, and only its result waits.

The same tied weight, at the very end of the backward: the embedding's gradient is an
accumulating index-put into a fresh buffer of zeros, then added to the head's gradient, so three
weight-sized buffers are alive at the add (zeros written in place, the head's gradient, the sum).
:func:`accumulate_into_addend` accumulates into the head's gradient directly when the add is its
only reader: one buffer (HF Qwen2 at sequence 256: its peak, 8 MiB lower).

A weight tied three ways (BART's and T5's token embedding: the encoder's, the decoder's and the
head's) then accumulates twice into one buffer, and Inductor runs only the first accumulation in
place: the second copies the buffer first (its input is itself an accumulation's output), so two
weight-sized buffers are alive in the backward's last kernel, when every other gradient is too
(HF BART at sequence 256: 8 MiB, its peak).  :func:`merge_accumulating_puts` makes the two one
accumulation of the concatenated rows.

A sum over a batch of 2 (T5's position bias is added to every layer's scores, so its gradient is
each layer's contribution summed over the batch, added up over the layers) is lowered by Inductor
as pointwise and inlined into its readers: the adds too, so all the layers' contributions were
read by one kernel at the end of the backward and stayed alive until then.
:func:`sum_small_dims_by_matmul` computes such sums as matmuls with a row of ones, accumulating
into the earlier sum with ``addmm``: extern kernels, run where the graph puts them.  A bias
expanded to the scores' full size before the layers read it (HF MPNet) has the layers'
contributions added at that size and summed over the batch only then: the sum is distributed over
the adds first, so each contribution is reduced where it is computed.

A parameter used several times (ALBERT's one shared layer applied four times, an unrolled
recurrent cell) gets its bias and normalization gradients as one reduction per use, added up.
Inductor fuses a reduction with the add that reads it, and that kernel with the next add and its
reduction: every use's reductions became one kernel at the last use, and the scheduler's
topological order then ran the layers' recomputations ahead of their backwards, with every
layer's operands alive (HF ALBERT at sequence 512: 53.6 MiB measured for 37.8 predicted).
:func:`accumulate_sums_by_addmm` accumulates each reduction by an ``addmm``: 22.8 MiB.

T5's position bias is an embedding lookup of shape (seq, seq, heads), permuted to (heads, seq,
seq) and read by every layer's softmax.  Inductor stores the lookup in its own layout, and each
of the softmax's three passes in each layer then gathers it with a stride of ``heads`` floats: HF
T5 at sequence 1024 spent 54 ms per layer in that kernel where a contiguous read takes 16.
:func:`store_permuted_fanout` copies such a permuted value once, contiguously, before it fans
out (this one also runs on forward graphs).

A classifier's weight gradient is a matmul of two small operands (the batch's logit gradients and
pooled features) into a large returned value.  Inductor's ``reorder_for_peak_memory`` runs it last,
so in what Inductor ran it was never alive through the rest of the backward, where the graph
order has it from the head's backward on (HF ResNet-50, 128 px: 7.8 MiB predicted that was not
there).  :func:`defer_returned_products` moves such a product to the end of the graph itself, so
the order the plan is replayed in is the order that runs.  It does the same for a convolution's
weight gradient, which no reordering of Inductor's can move: one ``convolution_backward`` kernel
computes it with the input's gradient, so it is split into two calls and the weight's moved.  A
CNN's last stages hold most of its weights on the fewest pixels, and their gradients then are not
alive while the first layers' large activations are (HF ResNet-50, 128 px: 149.6 -> 99.8 MiB
measured, 0.34x min-cut, 2.3 MiB above its weight gradients).  Only at the very end can a deferral
add (the operands wait with every gradient): :func:`deferred_tail` names the moved nodes, so the
partitioner can see a peak that falls among them.

Two rewrites keep Inductor from holding a value across a recomputed segment that the graph
computes next to its readers or before the segment.  A heavy value read twice (a SiLU backward's
``sigmoid(x)``) is stored, and Inductor fuses a stored value into the kernel that computes its
input, which for a recomputed ``x`` is the recomputation: :func:`split_shared_transcendentals`
gives each reader its own copy, which Inductor inlines.  A pointwise value read only by an extern
kernel is computed when that kernel is lowered, after the recomputation that precedes it, with
its inputs alive until then: :func:`store_before_recomputation` marks it stored where it is
(HF EfficientNet-B0: 74.4 -> 69.7 MiB measured, 0.474x min-cut).

A pointwise value that several calls of kernels with layout constraints read (an attention's mask,
read by every layer's attention and its backward) is left a loop by Inductor and copied into a
fresh buffer for each call, computed again every time: :func:`store_extern_fanout` marks it
stored once (this one also runs on forward graphs), within a byte limit the caller gives.

An accumulating index-put into zeros (an embedding's gradient, at the very end of the backward)
reads its values inline, and Inductor computes them inside the scatter's kernel: the buffers their
computation reads (a norm's backward: the residual gradient, the projections' input gradients, the
saved input) are freed after that kernel, the vocabulary-sized zeros allocated before it.
:func:`store_put_values` hands the put a copy of the values (``_torch.stored_copy_op``, which
Inductor cannot fuse through), so the values are computed by a kernel of their own and those
buffers die before the zeros are allocated (a Llama of SmolLM-135M's dimensions: 9 MiB beside the
gradients at the end of the backward, where per-layer checkpointing, whose compile breaks the graph
before the embedding, holds 2.25).
"""

from __future__ import annotations

import contextlib
import operator

import torch
import torch.fx as fx

from . import _torch
from .fusion import fused_values, heavy_on_cpu, inline_cone, is_view

__all__ = ["keep_matmuls_in_place", "accumulate_into_addend", "merge_accumulating_puts", "sum_small_dims_by_matmul",
           "accumulate_sums_by_addmm",
           "store_permuted_fanout", "defer_returned_products", "split_shared_transcendentals",
           "store_before_recomputation", "store_extern_fanout", "store_put_values", "add_reading", "deferred_tail"]

_aten = torch.ops.aten


def keep_matmuls_in_place(gm: fx.GraphModule) -> int:
    """Rewrite each ``mm`` read only by an ``add`` (through views and transposes that Inductor
    removes) whose other operand is computed after the matmul, and whose operands are larger than
    its result (deferring it would hold more than it saves), as ``mm(b.t(), a.t()).t()``; returns
    how many were rewritten."""
    graph = gm.graph
    position = {n: i for i, n in enumerate(graph.nodes)}
    rewritten = 0
    for node in list(graph.nodes):
        user = add_reading(node) if node.target is _aten.mm.default else None
        if user is None:
            continue
        later = [a for a in user.args if isinstance(a, fx.Node) and a not in _chain(node, user) and position[a] > position[node]]
        a, b = node.args
        if not later or _torch.value_nbytes(a) + _torch.value_nbytes(b) <= _torch.value_nbytes(node):
            continue
        with graph.inserting_before(node):
            bt = _call(graph, _aten.permute.default, b, [1, 0])
            at = _call(graph, _aten.permute.default, a, [1, 0])
            product = _call(graph, _aten.mm.default, bt, at)
            out = _call(graph, _aten.permute.default, product, [1, 0])
        for new in (bt, at, product, out):  # in the matmul's place (a later rewrite may read them)
            position[new] = position[node]
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        rewritten += 1
    return _finished(gm, rewritten)


def accumulate_into_addend(gm: fx.GraphModule) -> int:
    """Rewrite ``add(x, put(zeros, indices, values, accumulate))`` as ``put(x, indices, values,
    accumulate)`` when the zeros, the put and ``x`` are each read only there and ``x`` has the sum's
    shape, dtype and strides; returns how many were rewritten.  ``put``: ``index_put`` with
    ``accumulate=True`` or ``_unsafe_masked_index_put_accumulate`` (an embedding's gradient)."""
    graph, rewritten = gm.graph, 0
    position = {n: i for i, n in enumerate(graph.nodes)}
    for add in list(graph.nodes):
        if add.target is not _aten.add.Tensor or len(add.args) != 2 or add.kwargs:
            continue
        for put, x in (add.args, add.args[::-1]):
            if not (_is_accumulating_put(put) and isinstance(x, fx.Node) and len(put.users) == 1
                    and len(x.users) == 1 and position[x] < position[put] and _zeros(put.args[0])
                    and len(put.args[0].users) == 1 and _same_layout(x, add) and _same_layout(put, add)):
                continue
            zeros = put.args[0]
            put.replace_input_with(zeros, x)
            put.meta["val"] = add.meta["val"]
            add.replace_all_uses_with(put)
            graph.erase_node(add)
            graph.erase_node(zeros)
            rewritten += 1
            break
    return _finished(gm, rewritten)


# The merge saves a copy of ``x`` where the outer put runs (the backward's end, for an embedding),
# and costs the concatenated rows from where the inner put ran: Inductor writes the inner rows
# straight into the concatenation's buffer, which then lives across everything between (the
# encoder's backward, for a shared embedding).  HF BART and T5 at sequence 256 (rows 0.08 of the
# 8 MiB table, peak at the end): 48.14 -> 41.49 and 46.53 -> 44.40 MiB; T5 at sequence 1024 (rows
# 0.31 of it, peak inside the encoder's backward): 147.27 -> 149.77 MiB (2026-12-04).
MERGED_ROWS_SHARE = 0.25


def merge_accumulating_puts(gm: fx.GraphModule) -> int:
    """Rewrite ``put(put(x, i1, v1), i2, v2)`` as ``put(x, cat(i1, i2), cat(v1, v2))`` (indices,
    masks and values flattened to rows) when both are the same accumulating put of rows of ``x``
    (one index tensor, along dim 0), the inner one is read only by the outer one, and all the rows
    are at most :data:`MERGED_ROWS_SHARE` of ``x``; returns how many puts were merged away."""
    graph, rewritten = gm.graph, 0
    for outer in list(graph.nodes):
        while True:
            inner = outer.args[0] if _is_accumulating_put(outer) else None
            if not (_is_accumulating_put(inner) and inner.target is outer.target and len(inner.users) == 1):
                break
            rows_in, rows_out = _put_rows(inner), _put_rows(outer)
            if rows_in is None or rows_out is None:
                break
            rows = sum(_torch.value_nbytes(n) for n in (*rows_in, *rows_out) if n is not None)
            if rows > MERGED_ROWS_SHARE * _torch.value_nbytes(inner.args[0]):
                break
            width = list(_shape(inner.args[0])[1:])
            as_rows = ([-1] + [1] * len(width), [-1], [-1] + width)  # the mask's, the index's, the values' shape
            with graph.inserting_before(outer):
                mask, index, values = (
                    None if a is None else _call(graph, _aten.cat.default, [_call(graph, _aten.reshape.default, n, shape) for n in (a, b)])
                    for a, b, shape in zip(rows_in, rows_out, as_rows))
                args = (inner.args[0], [index], values, True) if mask is None else (inner.args[0], mask, [index], values)
                merged = _call(graph, outer.target, *args)
            outer.replace_all_uses_with(merged)
            graph.erase_node(outer)
            graph.erase_node(inner)
            outer, rewritten = merged, rewritten + 1
    return _finished(gm, rewritten)


def _put_rows(put: fx.Node) -> tuple[fx.Node | None, fx.Node, fx.Node] | None:
    """``(mask, index, values)`` of an accumulating put of whole rows of its first argument ``x``
    (``mask`` None for the unmasked puts): one index tensor of shape ``I``, values of shape ``I +
    x.shape[1:]``, a mask of shape ``I + (1,) * (x.dim() - 1)``; else None."""
    operands = _torch.index_put_operands(put)
    if operands is None:
        return None
    mask, indices, values, _ = operands
    if not (isinstance(indices, (list, tuple)) and len(indices) == 1 and isinstance(indices[0], fx.Node)
            and isinstance(values, fx.Node) and (mask is None or isinstance(mask, fx.Node))):
        return None
    x, index = _shape(put.args[0]), _shape(indices[0])
    if not x or _shape(values) != index + x[1:] or (mask is not None and _shape(mask) != index + (1,) * (len(x) - 1)):
        return None
    return mask, indices[0], values


SUM_BY_MATMUL_MIN_BYTES = 1 << 20  # smaller sums stay Inductor's: an extern call costs more than it saves


def sum_small_dims_by_matmul(gm: fx.GraphModule) -> int:
    """Rewrite each ``sum(x, leading dims)`` over at most Inductor's ``unroll_reductions_threshold``
    elements (a batch of 2), of a contiguous ``x`` of at least ``SUM_BY_MATMUL_MIN_BYTES``, as
    ``mm(ones(1, R), x.view(R, N))``, and, when its one reader adds an earlier value ``a`` of the
    sum's shape, the add as ``addmm(a.view(1, N), ones, x.view(R, N))``; returns how many sums were
    rewritten.  Inductor lowers such a sum as pointwise and inlines it into its readers, so a
    gradient accumulated over layers (T5's position bias, shared by every layer: one (batch,
    heads, seq, seq) contribution per layer, summed over the batch and added up) became one kernel
    at the last layer, with every layer's contribution alive until then.  As matmuls, each
    contribution is reduced and accumulated where the graph computes it.

    A sum of a sum (HF MPNet's position bias, computed once at its full (batch, heads, seq, seq)
    size and added to every layer's scores: its gradient is the layers' contributions added up,
    then summed over the batch) is first distributed over the adds
    (:func:`_distribute_small_sums`): ``sum(a + b) == sum(a) + sum(b)``."""
    graph, rewritten = gm.graph, 0
    threshold = _torch.inductor_unroll_reductions_threshold()
    distributed = _distribute_small_sums(graph, threshold)
    before: set[fx.Node] = set()
    for node in list(graph.nodes):
        before.add(node)
        shape = _small_leading_sum(node, threshold)
        if shape is None:
            continue
        x, (r, n) = node.args[0], shape
        add, addend = _accumulating_add(node, before)
        with graph.inserting_before(node):
            rows = _call(graph, _aten.view.default, x, [r, n])
            ones = _ones(graph, rows, r)
            if add is not None:
                acc = _call(graph, _aten.view.default, addend, [1, n])
                total = _call(graph, _aten.addmm.default, acc, ones, rows)
                out, replaced = _call(graph, _aten.view.default, total, list(_shape(add))), add
            else:
                total = _call(graph, _aten.mm.default, ones, rows)
                out, replaced = _call(graph, _aten.view.default, total, list(_shape(node))), node
        before.update((rows, ones, total, out, *([acc] if add is not None else [])))
        replaced.replace_all_uses_with(out)
        graph.erase_node(replaced)
        if replaced is add:
            graph.erase_node(node)
        rewritten += 1
    _finished(gm, rewritten + distributed)
    return rewritten


def _distribute_small_sums(graph: fx.Graph, threshold: int) -> int:
    """Each small leading-dims sum (:func:`_small_leading_sum`) of a tree of adds read by nothing
    else becomes the sum of its terms' sums, each taken right after its term and added to the
    running total there; returns how many sums were distributed.  Inductor inlines the adds into
    the sum's reader, so every term stayed alive until the last one was computed (HF MPNet,
    sequence 512: one 8 MiB contribution per layer, 40 MiB at its peak); distributed, each term
    is reduced where it is computed (and then, by :func:`sum_small_dims_by_matmul`, accumulated
    by an ``addmm``)."""
    distributed = 0
    for node in list(graph.nodes):
        if node.kwargs or _small_leading_sum(node, threshold) is None:
            continue
        tree = _add_tree(node.args[0])
        if tree is None:
            continue
        terms, adds = tree
        position = {n: i for i, n in enumerate(graph.nodes)}
        last_input = max((n for n in graph.nodes if n.op == "placeholder"), key=position.__getitem__, default=None)
        total = None
        for term in sorted(terms, key=position.__getitem__):
            anchor = term if term.op != "placeholder" else (total if total is not None else last_input)
            with graph.inserting_after(anchor):
                part = _call(graph, node.target, term, *node.args[1:])
            if total is None:
                total = part
                continue
            with graph.inserting_after(part):
                total = _call(graph, _aten.add.Tensor, total, part)
        node.replace_all_uses_with(total)
        for dead in [node, *sorted(adds, key=position.__getitem__, reverse=True)]:
            graph.erase_node(dead)
        distributed += 1
    return distributed


def _add_tree(x: fx.Node) -> tuple[list[fx.Node], list[fx.Node]] | None:
    """``(terms, adds)`` when ``x`` is an ``add.Tensor`` (no ``alpha``) of two distinct values of its
    shape and dtype, read only by one node, whose terms may themselves be such adds read only by
    it: the leaves, each contiguous and distinct, and the adds (``x`` first); None otherwise (a
    transposed term's sum would stay Inductor's pointwise one)."""
    if not (_is_sum_of_like(x, x) and len(x.users) == 1):
        return None
    terms, adds, stack = [], [x], list(x.args)
    while stack:
        node = stack.pop()
        if _is_inner_add(node, x):
            adds.append(node)
            stack.extend(node.args)
        else:
            terms.append(node)
    if len(set(terms)) != len(terms):
        return None
    like = x.meta["val"]
    for t in terms:
        val = t.meta.get("val")
        if not (isinstance(val, torch.Tensor) and val.shape == like.shape and val.dtype == like.dtype and val.is_contiguous()):
            return None
    return terms, adds


def _is_inner_add(node: object, root: fx.Node) -> bool:
    return isinstance(node, fx.Node) and node is not root and len(node.users) == 1 and _is_sum_of_like(node, root)


def _is_sum_of_like(node: fx.Node, like: fx.Node) -> bool:
    """``node`` is ``add.Tensor(a, b)`` of two distinct nodes, no ``alpha``, of ``like``'s shape and dtype."""
    if node.op != "call_function" or node.target is not _aten.add.Tensor or node.kwargs or len(node.args) != 2:
        return False
    a, b = node.args
    if not (isinstance(a, fx.Node) and isinstance(b, fx.Node)) or a is b:
        return False
    val, ref = node.meta.get("val"), like.meta.get("val")
    return (isinstance(val, torch.Tensor) and isinstance(ref, torch.Tensor) and val.shape == ref.shape
            and val.dtype == ref.dtype)


def accumulate_sums_by_addmm(gm: fx.GraphModule) -> int:
    """Rewrite each ``add(a, s)`` that accumulates a returned gradient, where ``s`` is a reduction
    (``sum``, through single-reader views and small pointwise ops: :func:`_reduced`) read only by
    the add and ``a`` is computed before it, as
    ``addmm(a.view(1, N), ones(1, 1), s.view(1, N))``; returns how many adds were rewritten.  A
    parameter used by several layers (ALBERT's one shared layer, an unrolled recurrent cell) gets
    its bias and normalization gradients as one reduction per use, added up; Inductor fuses each
    reduction with the add that reads it and then the next add with the next reduction, so all the
    uses' reductions become one kernel at the last use, and every use's gradient operands are alive
    until then (and everything the kernel's position pulls along: ALBERT at sequence 512 ran the
    next layer's recomputation ahead of the last one's backward).  Accumulated by an extern
    ``addmm`` (``1.0 * s`` is exact, one rounding as in the add), each reduction is a kernel of its
    own where its use computes it."""
    graph, rewritten = gm.graph, 0
    position = {n: i for i, n in enumerate(graph.nodes)}
    for add in list(graph.nodes):
        if not (_is_sum_of_like(add, add) and _accumulates_to_output(add)):
            continue
        val = add.meta["val"]
        if not (val.is_floating_point() and val.is_contiguous() and val.ndim >= 1
                and all(isinstance(d, int) for d in val.shape)):
            continue
        n = int(val.numel())
        found = [t for t in add.args if _reduced(t, n) is not None]
        if not found:
            continue
        s = max(found, key=position.__getitem__)  # the later term is the one to keep in place
        a = add.args[1] if add.args[0] is s else add.args[0]
        va, vs = a.meta.get("val"), s.meta.get("val")
        if not (position[a] < position[s] and all(isinstance(v, torch.Tensor) and v.is_contiguous()
                                                     and v.shape == val.shape and v.dtype == val.dtype for v in (va, vs))):
            continue  # no broadcast, no type promotion: addmm takes neither
        with graph.inserting_before(add):
            acc = _call(graph, _aten.view.default, a, [1, n])
            term = _call(graph, _aten.view.default, s, [1, n])
            total = _call(graph, _aten.addmm.default, acc, _ones(graph, term, 1), term)
            out = _call(graph, _aten.view.default, total, list(val.shape))
        position[out] = position[add]  # the next add of the chain may read it
        add.replace_all_uses_with(out)
        graph.erase_node(add)
        rewritten += 1
    return _finished(gm, rewritten)


def _reduced(node: object, numel: int, depth: int = 4) -> fx.Node | None:
    """The ``sum`` of ``numel`` elements that ``node`` is or computes from through at most
    ``depth`` views and pointwise ops of at most ``numel`` elements (a batch norm's weight
    gradient: its sum times the inverse standard deviation; the sum is read by the input gradient
    too); else None."""
    stack = [(node, 0)]
    while stack:
        n, hops = stack.pop()
        if not (isinstance(n, fx.Node) and n.op == "call_function"):
            continue
        if n.target is _aten.sum.dim_IntList:
            if _torch.value_numel(n) == numel:  # the term's own size: a parameter's gradient, not a broadcast row sum
                return n
            continue
        if hops < depth and (n.target in _VIEWS or _torch.inductor_pointwise(n)) and _torch.value_numel(n) <= numel:
            stack.extend((a, hops + 1) for a in n.all_input_nodes)
    return None


def _accumulates_to_output(add: fx.Node) -> bool:
    """Whether ``add``'s value reaches the graph's output only through single-reader adds and views
    (a gradient being accumulated; an add inside a layer's backward is left alone)."""
    node = add
    while len(node.users) == 1:
        (user,) = node.users
        if user.op == "output":
            return True
        if user.op != "call_function" or not (user.target in _VIEWS or user.target is _aten.add.Tensor):
            return False
        node = user
    return False


def store_permuted_fanout(gm: fx.GraphModule) -> int:
    """Insert ``clone(v, contiguous)`` between ``v`` and its readers when ``v`` is a non-contiguous
    view (permuted, through single-reader views) of a pointwise value Inductor computes, with as
    many elements, read by two or more ops and by no graph output; returns how many were inserted.
    The pointwise value is then computed into the copy (its one reader), so the bytes stored are
    the same, in the layout the readers read."""
    graph, rewritten = gm.graph, 0
    for node in list(graph.nodes):
        if len(node.users) != 1 or not _torch.inductor_pointwise(node):
            continue
        end = node
        while len(end.users) == 1 and next(iter(end.users)).target in _LAYOUT_VIEWS:
            end = next(iter(end.users))
        val, src = end.meta.get("val"), node.meta.get("val")
        if (end is node or len(end.users) < 2 or any(u.op != "call_function" for u in end.users)
                or not isinstance(val, torch.Tensor) or not isinstance(src, torch.Tensor)
                or not _torch.static_layout(val) or val.is_contiguous()
                or val.numel() != src.numel()):
            continue
        readers = list(end.users)
        with graph.inserting_after(end):
            copy = graph.call_function(_aten.clone.default, (end,), {"memory_format": torch.contiguous_format})
        mode = getattr(val, "fake_mode", None)
        with mode if mode is not None else contextlib.nullcontext():
            copy.meta["val"] = _aten.clone.default(val, memory_format=torch.contiguous_format)
        for reader in readers:
            reader.replace_input_with(end, copy)
        rewritten += 1
    return _finished(gm, rewritten)


# A returned product is moved to the graph's end only where the operands it then holds longer are
# at most this share of its own bytes: from where it was computed to the end, at least half its
# bytes are no longer alive, and at the end, where every gradient is, at most half are added while
# it waits (HF ResNet-50's classifier weight gradient: 7.8 MiB from 0.1 MiB of operands; its last
# stage's 1x1 convolutions: 4 MiB from 1.25).  Offline on 18 suite rows (2026-12-05), a quarter
# and a half differ on four: ResNet-50 160 px 160.6 -> 150.4 MiB predicted, Swin 51.8 -> 46.0,
# EfficientNet-B0 67.6 -> 66.4, ResNet-50 128 px (see docs/results.md); no language model.
DEFERRED_OPERANDS_SHARE = 0.5
DEFERRED = "fxremat_deferred"  # node.meta key of the nodes defer_returned_products moved
_PRODUCTS = (_aten.mm.default, _aten.addmm.default, _aten.bmm.default)


def defer_returned_products(gm: fx.GraphModule, inputs: frozenset[str] = frozenset()) -> int:
    """Move each product whose result is only returned (directly or through views), with the
    views that return it, to just before the graph's output, when its operands' storages (other
    than returned values' and those of ``inputs``, the names of placeholders the caller holds
    anyway: parameters and the step's inputs) are at most :data:`DEFERRED_OPERANDS_SHARE` of its
    bytes; returns how many were moved.  A product is a matmul, or a convolution's weight
    gradient: a ``convolution_backward`` that also computes its input's (or bias') gradient is
    split in two, the weight gradient's own call moved.

    Inductor's own ``reorder_for_peak_memory`` schedules such a matmul last (HF ResNet-50's
    classifier weight gradient, 7.8 MiB, computed at the end of the backward from two 8 x 2048
    and 8 x 1000 operands), so the graph order the plan is judged on is then the order Inductor
    runs; the bytes it frees in between are what Inductor measured (ResNet-50 at 128 px: 157.8
    MiB predicted, 149.5 measured before this pass).  A convolution's backward is one extern
    kernel for both gradients, which no reordering splits: the late layers of a CNN hold most of
    its weights on the fewest pixels (ResNet-50's last stage: 57 of its 97.5 MiB of weight
    gradients), and deferred, those are not alive while the early layers' large activations are."""
    graph, rewritten = gm.graph, 0
    output = graph.find_nodes(op="output")[0]
    returned = {key for n in output.all_input_nodes for key in _torch.storage_keys(n)}
    held_anyway = returned | {key for n in graph.find_nodes(op="placeholder") if n.name in inputs
                              for key in _torch.storage_keys(n)}
    position = {n: i for i, n in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if node.target in _PRODUCTS:
            product, operands = node, node.all_input_nodes
        elif node.target is _aten.convolution_backward.default:
            product, operands = _weight_gradient(node), node.args[:3]  # grad_output, input, weight
        else:
            continue
        group = _returned_through_views(product, output) if product is not None else None
        if group is None or _last_before(output, group):
            continue
        # Deferred, the product holds each operand's whole storage to the end, wherever its
        # other readers are (a returned value's is alive there anyway).
        held = {key: _torch.storage_nbytes(t) for a in operands if isinstance(a, fx.Node)
                for t in _torch.tensors_in(a.meta.get("val")) if (key := _torch.storage_key(t)) not in held_anyway}
        if sum(held.values()) > DEFERRED_OPERANDS_SHARE * _torch.value_nbytes(product):
            continue
        whole = product is node or len(node.users) == 1  # else the convolution's other gradients stay
        if whole and any(_computed_for(a, node) for a in node.all_input_nodes):
            continue  # Inductor would compute that operand at the product's new place, from its inputs
        if product is not node:
            group = [node if whole else _split_weight_gradient(graph, node, product)] + group
        for moved in sorted(group, key=lambda n: position.get(n, -1)):
            output.prepend(moved)
            moved.meta[DEFERRED] = True
        rewritten += 1
    return _finished(gm, rewritten)


def deferred_tail(gm: fx.GraphModule) -> frozenset[str]:
    """Names of the nodes :func:`defer_returned_products` moved to the end of ``gm``: the only
    place where a deferral can raise the bytes alive (between a product's old place and the end,
    its operands, at most half its bytes, are alive instead of it)."""
    return frozenset(n.name for n in gm.graph.nodes if n.meta.get(DEFERRED))


def _weight_gradient(conv_backward: fx.Node) -> fx.Node | None:
    """The ``getitem`` of ``conv_backward``'s weight gradient, if it computes one."""
    mask = conv_backward.args[10] if len(conv_backward.args) > 10 else None
    if not isinstance(mask, (list, tuple)) or not mask[1]:
        return None
    items = [u for u in conv_backward.users if u.target is operator.getitem and u.args[1] == 1]
    only_items = all(u.target is operator.getitem for u in conv_backward.users)
    return items[0] if len(items) == 1 and items[0].users and only_items else None


def _split_weight_gradient(graph: fx.Graph, conv_backward: fx.Node, item: fx.Node) -> fx.Node:
    """Give ``conv_backward``'s weight gradient ``item`` a call of its own (output mask: the
    weight only), inserted after ``conv_backward`` and then moved by the caller; the original call
    no longer computes it.  Returns the new call (``item`` now reads it)."""
    mask = list(conv_backward.args[10])
    with graph.inserting_after(conv_backward):
        alone = graph.call_function(conv_backward.target, (*conv_backward.args[:10], [False, True, False]))
    alone.meta = dict(conv_backward.meta)
    val = conv_backward.meta.get("val")
    if isinstance(val, (list, tuple)):
        alone.meta["val"] = type(val)(v if i == 1 else None for i, v in enumerate(val))
        conv_backward.meta["val"] = type(val)(None if i == 1 else v for i, v in enumerate(val))
    conv_backward.args = (*conv_backward.args[:10], [mask[0], False, mask[2]])
    item.args = (alone, 1)
    return alone


def split_shared_transcendentals(gm: fx.GraphModule) -> int:
    """Give each reader of a CPU value that Inductor would store for being heavy and read twice
    (``sigmoid``, ``exp``, ``tanh``, ...: :func:`fxremat.fusion.heavy_on_cpu`) its own copy, when
    every reader is pointwise; returns how many values were split.

    Stored, such a value is a kernel's output, and Inductor fuses it into the kernel of the value
    it is computed from, wherever the graph computes it: HF EfficientNet-B0's SiLU backward reads
    ``sigmoid(x)`` twice, and where ``x`` is a batch norm recomputed in the backward, the recomputing
    kernel stored the sigmoid too, alive from the recomputation to the SiLU's backward (4.5 MiB at
    the measured peak).  Each copy has one pointwise reader, so Inductor computes it inside that
    reader's kernel (once per kernel: the readers of a SiLU's backward are one kernel)."""
    graph, rewritten = gm.graph, 0
    output = graph.find_nodes(op="output")[0]
    for node in list(graph.nodes):
        val = node.meta.get("val")
        if (not isinstance(val, torch.Tensor) or val.device.type != "cpu" or not heavy_on_cpu(node)
                or not _torch.inductor_pointwise(node) or len(node.users) < 2 or output in node.users
                or not all(_torch.inductor_pointwise(u) for u in node.users)):
            continue
        for reader in list(node.users)[1:]:
            with graph.inserting_before(reader):
                copy_ = graph.call_function(node.target, node.args, node.kwargs)
            copy_.meta.update(node.meta)
            reader.replace_input_with(node, copy_)
        rewritten += 1
    return _finished(gm, rewritten)


def store_before_recomputation(gm: fx.GraphModule, channels_last: bool = False) -> int:
    """Mark each pointwise value read only by an extern kernel (a convolution's backward, a
    matmul) stored where the graph computes it (``inductor_force_stride_order``, in the layout the
    pair runs in: ``channels_last`` for 4-d values), when an extern kernel runs between it and its
    reader (a recomputation) and the buffers that die once it is computed outweigh it; returns
    how many were marked.  A torch without the op gets none.

    Unmarked, Inductor computes such a value when it lowers its extern reader, after the
    recomputation, so everything the value reads stays alive through it: HF EfficientNet-B0's
    batch-norm input gradient (12 MiB) before its expand convolution's backward kept the SiLU's
    gradient and the convolution's output (12 MiB each) alive through the recomputed stem."""
    if _torch.realize_op() is None:
        return 0
    graph, rewritten = gm.graph, 0
    nodes = list(graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    returned = set(graph.find_nodes(op="output")[0].all_input_nodes)
    reduction = getattr(torch.Tag, "reduction", None)

    def extern(node: fx.Node) -> bool:
        return (node.op == "call_function" and not _torch.inductor_pointwise(node) and not _torch.is_realize(node)
                and reduction not in getattr(node.target, "tags", ()) and node.target is not operator.getitem
                and node.target not in _LAYOUT_VIEWS)

    externs_before = [0]  # externs_before[i]: extern kernels among nodes[:i]
    for node in nodes:
        externs_before.append(externs_before[-1] + extern(node))
    for reader in nodes:
        if not extern(reader):
            continue
        for value in reader.all_input_nodes:
            val = value.meta.get("val")
            if (value.op != "call_function" or not _torch.inductor_pointwise(value) or len(value.users) != 1
                    or value in returned or not isinstance(val, torch.Tensor) or not val.is_floating_point()
                    or not all(isinstance(d, int) for d in val.shape)  # symbolic: the strides are Inductor's
                    or externs_before[position[reader]] == externs_before[position[value] + 1]
                    or _bytes_read_alone(value, position) <= _torch.value_nbytes(value)):
                continue
            strides = _torch.dense_strides(val.shape, channels_last and val.dim() == 4)
            reader.replace_input_with(value, _torch.insert_realize(graph, value, strides))
            rewritten += 1
    return _finished(gm, rewritten)


def store_extern_fanout(gm: fx.GraphModule, channels_last: bool = False, limit: int | None = None) -> int:
    """Mark each pointwise value that two or more calls of extern kernels with layout constraints
    read directly (an attention's mask, read by every layer's attention and its backward) stored
    once where the graph computes it (``inductor_force_stride_order``, dense in the layout the pair
    runs in: ``channels_last`` for 4-d values), every reader reading the mark; returns how many
    were marked.  A torch without the op, or a value of symbolic or non-dense layout, gets none;
    with ``limit``, the smallest values first, as many as fit in ``limit`` bytes together.

    Unmarked, Inductor leaves such a value a loop (it stores a pointwise value read several times
    only where its loop is long) and each constrained call (``_torch.copies_operands``) copies it
    into a fresh buffer of its own, computing it again: HF GPT-2 with sdpa attention and a padded
    batch (sequence 512) built its 2 MiB mask from the padding mask 24 times in fxremat's backward
    (13 ms of a 780 ms backward) where per-layer checkpointing's backward reads it saved.  The
    replay already counts such a value as one buffer, alive from where the graph computes it to its
    last reader: the mark makes Inductor run what the plan was chosen for."""
    if _torch.realize_op() is None:
        return 0
    graph, rewritten = gm.graph, 0
    returned = set(graph.find_nodes(op="output")[0].all_input_nodes)
    values = [v for v in graph.nodes if v.op == "call_function" and _torch.inductor_pointwise(v) and v not in returned
              and isinstance(val := v.meta.get("val"), torch.Tensor)
              and _torch.static_layout(val) and val.is_contiguous()
              and sum(map(_torch.copies_operands, v.users)) >= 2]
    room = limit
    for value in sorted(values, key=_torch.value_nbytes):
        val = value.meta["val"]
        if room is not None:
            if _torch.value_nbytes(value) > room:
                break
            room -= _torch.value_nbytes(value)
        _torch.insert_realize(graph, value, _torch.dense_strides(val.shape, channels_last and val.dim() == 4), every_reader=True)
        rewritten += 1
    return _finished(gm, rewritten)


def _bytes_read_alone(value: fx.Node, position: dict[fx.Node, int]) -> int:
    """Bytes of the stored buffers ``value`` reads (through the pointwise values only it reads)
    that no later node reads: what dies once ``value`` is computed."""
    cone, stack, sources = {value}, list(value.all_input_nodes), set()
    while stack:
        arg = stack.pop()
        if arg in cone or arg in sources:
            continue
        if arg.op == "call_function" and _torch.inductor_pointwise(arg) and all(u in cone for u in arg.users):
            cone.add(arg)
            stack.extend(arg.all_input_nodes)
        else:
            sources.add(arg)
    done = position[value]
    alone = {key: _torch.storage_nbytes(t) for a in sources if all(u in cone or position.get(u, done) < done for u in a.users)
             for t in _torch.tensors_in(a.meta.get("val")) if (key := _torch.storage_key(t))}
    return sum(alone.values())


def _last_before(output: fx.Node, group: list[fx.Node]) -> bool:
    """Whether the nodes just before ``output`` are ``group`` (nothing left to move past)."""
    node, members = output.prev, set(group)
    while node in members:
        members.discard(node)
        node = node.prev
    return not members


def _computed_for(operand: fx.Node, product: fx.Node) -> bool:
    """Whether ``operand`` is, through single-reader views, a pointwise value read only by ``product``."""
    while operand.op == "call_function" and operand.target in _LAYOUT_VIEWS:
        if len(operand.users) != 1:
            return False
        operand = operand.args[0]
    return (operand.op == "call_function" and _torch.inductor_pointwise(operand)
            and all(u is product or u.target in _LAYOUT_VIEWS for u in operand.users))


def _returned_through_views(node: fx.Node, output: fx.Node) -> list[fx.Node] | None:
    """``node`` and the view nodes between it and the output, in graph order, when every reader
    of each is the output or one of those views; None otherwise."""
    group, stack = [node], [node]
    while stack:
        for user in stack.pop().users:
            if user is output:
                continue
            if user.op != "call_function" or user.target not in _LAYOUT_VIEWS:
                return None
            group.append(user)
            stack.append(user)
    return group


def _small_leading_sum(node: fx.Node, threshold: int) -> tuple[int, int] | None:
    """(R, N) when ``node`` sums a contiguous floating ``x`` over its leading dims, R <= threshold
    elements in all (at least 2), x large enough; else None."""
    if node.op != "call_function" or node.target is not _aten.sum.dim_IntList or node.kwargs.get("dtype") is not None:
        return None
    x = node.args[0]
    val = x.meta.get("val") if isinstance(x, fx.Node) else None
    if not isinstance(val, torch.Tensor) or not val.is_floating_point() or not val.is_contiguous() or val.ndim < 2:
        return None
    if not all(isinstance(d, int) for d in val.shape):  # symbolic sizes: left to Inductor
        return None
    if _torch.value_nbytes(x) < SUM_BY_MATMUL_MIN_BYTES:
        return None
    dims = sorted(d % val.ndim for d in node.args[1])
    if dims != list(range(len(dims))) or not dims or len(dims) == val.ndim:
        return None
    r = int(torch.Size(val.shape[: len(dims)]).numel())
    if not 2 <= r <= threshold:
        return None
    return r, int(val.numel()) // r


def _accumulating_add(node: fx.Node, before: set[fx.Node]) -> tuple[fx.Node | None, fx.Node | None]:
    """``(add, a)`` when ``node``'s one reader is ``add(a, node)`` (either order) with ``a`` computed
    before ``node``, contiguous and of the add's shape and dtype; else ``(None, None)``."""
    if len(node.users) != 1:
        return None, None
    (add,) = node.users
    if add.target is not _aten.add.Tensor or len(add.args) != 2 or add.kwargs or add.args[0] is add.args[1]:
        return None, None
    a = add.args[1] if add.args[0] is node else add.args[0]
    va, vadd = (a.meta.get("val") if isinstance(a, fx.Node) else None), add.meta.get("val")
    if not (a in before and isinstance(va, torch.Tensor) and isinstance(vadd, torch.Tensor) and va.is_contiguous()
            and va.shape == vadd.shape and va.dtype == vadd.dtype == node.meta["val"].dtype
            and _shape(node) == tuple(vadd.shape)):
        return None, None
    return add, a


def _is_accumulating_put(node: object) -> bool:
    operands = _torch.index_put_operands(node)
    return operands is not None and operands[3]


def _zeros(node: object) -> bool:
    """A fresh buffer of zeros (``full``/``zeros`` of 0, no other reader checked here)."""
    if not isinstance(node, fx.Node) or node.op != "call_function":
        return False
    if node.target is _aten.full.default:
        return node.args[1] == 0
    return node.target in (_aten.zeros.default, _aten.new_zeros.default)


def _same_layout(a: fx.Node, b: fx.Node) -> bool:
    va, vb = a.meta.get("val"), b.meta.get("val")
    return (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor) and va.shape == vb.shape
            and va.dtype == vb.dtype and va.stride() == vb.stride() and va.device == vb.device)


_VIEWS = (_aten.view.default, _aten.reshape.default, _aten._unsafe_view.default)
_LAYOUT_VIEWS = (_aten.permute.default, _aten.transpose.int, _aten.t.default, _aten.unsqueeze.default,
                 _aten.squeeze.dim, _aten.squeeze.default, *_VIEWS)


def add_reading(mm: fx.Node) -> fx.Node | None:
    """The add that reads ``mm`` as Inductor will see it: through a chain of single-reader views
    that keep its shape and transposes that cancel out (Inductor removes both), else None."""
    node, flipped = mm, False
    while len(node.users) == 1:
        (user,) = node.users
        if user.target is _aten.add.Tensor:
            return None if flipped else user
        if user.target is _aten.t.default or (user.target is _aten.permute.default and list(user.args[1]) == [1, 0]):
            flipped = not flipped
        elif not (user.target in _VIEWS and _shape(user) == _shape(node)):
            return None
        node = user
    return None


def _chain(mm: fx.Node, add: fx.Node) -> set[fx.Node]:
    """``mm`` and the views between it and ``add``."""
    out, node = {mm}, mm
    while node is not add:
        (node,) = node.users
        out.add(node)
    return out


def _shape(node: fx.Node) -> tuple:
    val = node.meta.get("val")
    return tuple(val.shape) if isinstance(val, torch.Tensor) else ()


def _finished(gm: fx.GraphModule, rewritten: int) -> int:
    """Lint and recompile ``gm`` if a rewrite changed it; returns ``rewritten``."""
    if rewritten:
        gm.graph.lint()
        gm.recompile()
    return rewritten


def _ones(graph: fx.Graph, like: fx.Node, r: int) -> fx.Node:
    """A (1, r) tensor of ones with ``like``'s dtype and device (its value made in ``like``'s fake mode)."""
    val = like.meta["val"]
    node = graph.call_function(_aten.full.default, ([1, r], 1.0), {"dtype": val.dtype, "device": val.device, "pin_memory": False})
    mode = getattr(val, "fake_mode", None)
    with mode if mode is not None else contextlib.nullcontext():
        node.meta["val"] = _aten.full.default([1, r], 1.0, dtype=val.dtype, device=val.device, pin_memory=False)
    return node


def _call(graph: fx.Graph, target, *args) -> fx.Node:
    node = graph.call_function(target, args)
    node.meta["val"] = target(*fx.node.map_arg(args, lambda a: a.meta["val"]))
    return node


def store_put_values(gm: fx.GraphModule) -> int:
    """Give each accumulating index-put into a fresh buffer of zeros a stored copy of the values it
    reads inline (:func:`_torch.stored_copy_op`), where the buffers computed in this graph that the
    values' inlined computation reads, read by nothing else (they die at the put), outweigh the
    values, and the zeros do too: the values' kernel then runs, and those buffers die, before the
    zeros are allocated, where the scatter's kernel kept them alive beside the zeros; other puts of
    the same values read the same copy.  "Read by nothing else" looks at a buffer's direct readers
    (through views): one of them computed inline into a kernel after the put would keep it alive
    longer than counted (at the end of a backward nothing runs after the put).  Returns how many
    copies were made; a torch without the op leaves the graph alone."""
    copy = _torch.stored_copy_op()
    if copy is None:
        return 0
    graph = gm.graph
    puts = {}  # put -> the values it computes inline
    for n in graph.nodes:
        if _is_accumulating_put(n) and _zeros(n.args[0]):
            values = _torch.index_put_operands(n)[2]
            if isinstance(values, fx.Node) and _torch.inductor_pointwise(values) and values in _torch.scatter_inlined_operands(n):
                puts[n] = values
    if not puts:  # most graphs: no whole-graph walk below
        return 0
    returned = set(graph.find_nodes(op="output")[0].all_input_nodes)
    own = {n: frozenset(_torch.storage_keys(n)) for n in graph.nodes}.__getitem__
    fused = fused_values(graph, _torch.storage_keys)
    copies: dict[fx.Node, fx.Node] = {}  # values read by several puts (BERT's three embeddings): one copy
    for put, values in puts.items():
        if values in copies:
            put.replace_input_with(values, copies[values])
            continue
        if values not in fused:
            continue
        cone, sources = inline_cone(values, fused, own)
        readers = cone | {put}
        dying = sum(_torch.value_nbytes(s) for s in sources
                    if s.op == "call_function" and s not in returned and _only_read_by(s, readers, own))
        size = _torch.value_nbytes(values)
        if dying > size and _torch.value_nbytes(put.args[0]) > size:
            with graph.inserting_after(values):
                copies[values] = _call(graph, copy, values)
            put.replace_input_with(values, copies[values])
    return _finished(gm, len(copies))


def _only_read_by(node: fx.Node, readers: set[fx.Node], own) -> bool:
    """Whether every reader of ``node``, looking through views, is among ``readers``."""
    return all(user in readers or (is_view(user, own) and _only_read_by(user, readers, own)) for user in node.users)
