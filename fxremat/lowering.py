"""The backward graph shaped so that Inductor's own passes keep the liveness the plan counts on.

Invariant: each rewrite changes how a value is computed, never what it is: it is an exact
identity of the math (``mm(a, b) == mm(b.t(), a.t()).t()``; ``x + put_acc(zeros, i, v) ==
put_acc(x, i, v)``; floating-point results can differ in the last bits, as with any other
blocking or summation order), every new node carries a ``meta["val"]``, and the graph stays
topologically ordered.  Both run only on backward graphs compiled by Inductor.

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
"""

from __future__ import annotations

import torch
import torch.fx as fx

from . import _torch

__all__ = ["keep_matmuls_in_place", "accumulate_into_addend", "add_reading"]

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
    if rewritten:
        graph.lint()
        gm.recompile()
    return rewritten


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
    if rewritten:
        graph.lint()
        gm.recompile()
    return rewritten


def _is_accumulating_put(node: object) -> bool:
    name = _torch.index_put_name(node)
    if name is None:
        return False
    if name == "_unsafe_masked_index_put_accumulate":
        return True
    accumulate = node.kwargs.get("accumulate", node.args[3] if len(node.args) > 3 else False)
    return accumulate is True


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


def _call(graph: fx.Graph, target, *args) -> fx.Node:
    node = graph.call_function(target, args)
    vals = [a.meta["val"] if isinstance(a, fx.Node) else a for a in args]
    node.meta["val"] = target(*vals)
    return node
