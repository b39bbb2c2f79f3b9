"""Joint graphs traced on the CPU and re-expressed as CUDA joint graphs on fake tensors: what
fxremat's partitioner is handed on a GPU, checkable on a machine without one.

A CUDA joint graph cannot be traced without a GPU (the autograd engine asks the device for its
context), but a fake CUDA tensor can be made by any CUDA *build* of torch.  :func:`as_cuda` copies a
CPU joint graph, gives every node a fake CUDA value of the same shape, strides and dtype, points
every device argument at CUDA, and replaces the CPU's flash attention (forward and backward) by
the memory-efficient attention that float32 SDPA runs on a GPU (it returns a Philox seed and
offset that its backward reads).  Everything else in a CPU joint graph is what a CUDA trace gives.

Invariant: the copy's nodes, in order, compute what the CPU joint graph's nodes compute; only
devices and the attention kernels differ.
"""

from __future__ import annotations

import copy
import functools
import operator
from typing import Any, Callable

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from fxremat import _torch

__all__ = ["cuda_build", "capture_joint", "as_cuda"]

_A = torch.ops.aten
CUDA = torch.device("cuda", 0)


def cuda_build() -> bool:
    """Whether this torch can make fake CUDA tensors (a CUDA build, with or without a GPU)."""
    return torch.backends.cuda.is_built()


class _Captured(Exception):
    """Raised by :class:`_Capture` to stop the compile once the joint graph is in hand."""


class _Capture(_torch.CustomPartitionerFn or object):
    """A partition function that keeps the joint graph Inductor hands it (after Inductor's
    decompositions and joint-graph passes) and stops the compile."""

    def __init__(self) -> None:
        self.seen: tuple[fx.GraphModule, list[Any], dict[str, Any]] | None = None

    def __call__(self, joint: fx.GraphModule, joint_inputs: list[Any], **kwargs: Any):
        with unset_fake_temporarily():
            self.seen = (copy.deepcopy(joint), list(joint_inputs), dict(kwargs))
        raise _Captured

    def uuid(self) -> None:
        return None


def capture_joint(model: torch.nn.Module, *inputs: torch.Tensor) -> tuple[fx.GraphModule, list[Any], dict[str, Any]]:
    """The first joint graph Inductor's pipeline builds for ``model(*inputs)`` and hands its partition
    function (no kernel is compiled), its joint inputs and the keywords it passes."""
    capture = _Capture()

    def backend(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable:
        return _torch.compile_with_inductor(gm, example_inputs, capture)

    torch._dynamo.reset()
    try:
        torch.compile(model, backend=backend)(*inputs)
    except Exception:  # noqa: BLE001 - _Captured, wrapped by Dynamo; anything else shows as nothing seen
        pass
    finally:
        torch._dynamo.reset()
    if capture.seen is None:
        raise AssertionError("no joint graph reached the partitioner")
    return capture.seen


def as_cuda(joint: fx.GraphModule, joint_inputs: list[Any], attention_dropout: float | None = None
            ) -> tuple[fx.GraphModule, list[Any], FakeTensorMode]:
    """``joint`` as a CUDA joint graph (a copy), its inputs as fake CUDA tensors, and the fake mode
    their values live in (partition inside it, as AOTAutograd does).  ``attention_dropout``: the
    dropout probability every attention gets (the CPU's flash attention has none, so a CPU trace
    cannot show the random attention a GPU runs where a model's attention dropout is on)."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)

    def fake(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        with mode:
            out = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=CUDA)
        return out.requires_grad_(value.requires_grad) if value.is_floating_point() else out

    def device(arg: Any) -> Any:
        return CUDA if isinstance(arg, torch.device) and arg.type == "cpu" else arg

    with unset_fake_temporarily():
        gm = copy.deepcopy(joint)
    for node in gm.graph.nodes:
        node.args = fx.node.map_aggregate(node.args, device)
        node.kwargs = fx.node.map_aggregate(node.kwargs, device)
        if "val" in node.meta:
            node.meta["val"] = fx.node.map_aggregate(node.meta["val"], fake)
        if node.op == "get_attr" and isinstance(getattr(gm, node.target, None), torch.Tensor):
            setattr(gm, node.target, fake(getattr(gm, node.target)))
    _efficient_attention(gm.graph, mode, attention_dropout)
    gm.recompile()
    return gm, fx.node.map_aggregate(joint_inputs, fake), mode


def _arg(node: fx.Node, index: int, name: str, default: Any) -> Any:
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _efficient_attention(graph: fx.Graph, mode: FakeTensorMode, dropout: float | None) -> int:
    """CPU flash attention (forward and backward) -> CUDA memory-efficient attention, in place
    (with probability ``dropout`` where it is not None)."""
    seeds: dict[fx.Node, tuple[fx.Node, fx.Node]] = {}
    meta = functools.partial(fx.node.map_aggregate, fn=lambda a: a.meta["val"] if isinstance(a, fx.Node) else a)
    count = 0
    for node in list(graph.nodes):
        if node.target is _A._scaled_dot_product_flash_attention_for_cpu.default:
            q, k, v = node.args[:3]
            p = _arg(node, 3, "dropout_p", 0.0) if dropout is None else dropout
            args = (q, k, v, node.kwargs.get("attn_mask"), True, p, _arg(node, 4, "is_causal", False))
            target = _A._scaled_dot_product_efficient_attention.default
            with graph.inserting_before(node):
                new = graph.call_function(target, args, {"scale": node.kwargs.get("scale")})
                seed, offset = (graph.call_function(operator.getitem, (new, i)) for i in (2, 3))
        elif node.target is _A._scaled_dot_product_flash_attention_for_cpu_backward.default:
            grad, q, k, v, out, lse = node.args[:6]
            seed, offset = seeds[lse.args[0]]
            p = _arg(node, 6, "dropout_p", 0.0) if dropout is None else dropout
            args = (grad, q, k, v, node.kwargs.get("attn_mask"), out, lse, seed, offset, p, [True, True, True, False],
                    _arg(node, 7, "is_causal", False))
            target = _A._scaled_dot_product_efficient_attention_backward.default
            with graph.inserting_before(node):
                new = graph.call_function(target, args, {"scale": node.kwargs.get("scale")})
        else:
            continue
        with mode:
            new.meta["val"] = target(*meta(new.args), **meta(new.kwargs))
        if target is _A._scaled_dot_product_efficient_attention.default:
            seed.meta["val"], offset.meta["val"] = new.meta["val"][2], new.meta["val"][3]
            seeds[new] = (seed, offset)
            count += 1
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    graph.lint()
    return count
