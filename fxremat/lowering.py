"""The backward graph shaped so that Inductor's own passes keep the liveness the plan counts on.

Invariant: :func:`keep_matmuls_in_place` changes how a value is computed, never what it is: each
rewrite is an exact identity of the math (``mm(a, b) == mm(b.t(), a.t()).t()``; floating-point
results can differ in the last bits, as any other matmul blocking), every new node carries a
``meta["val"]``, and the graph stays topologically ordered.

Inductor's post-grad pass turns ``add(mm(a, b), c)`` into one ``addmm(c, a, b)`` placed at the
add.  When ``c`` is computed much later than the matmul (the gradient of an LM head tied to the
embedding: the head's weight gradient is a matmul at the start of the backward, the embedding's
gradient comes at its very end), the matmul then runs at the end and ``a`` and ``b`` stay alive
until then: HF GPT-2 at sequence 512 kept its 32 MiB logits gradient through the whole backward
for an 8 MiB weight gradient.  Computed as the transpose of the transposed product, the matmul is
no longer the add's direct input, runs where the graph puts it, and only its result waits.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from . import _torch

__all__ = ["keep_matmuls_in_place", "add_reading"]

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
