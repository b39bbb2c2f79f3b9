"""Helpers shared by the test modules (imported as ``from helpers import ...``, like ``zoo``).

* :func:`loss_of`: the plain training loss, :func:`fxremat.profiling.output_loss` (the sum of
  ``.float().sum()`` of every floating output that requires grad), asserting there is one.
* :func:`weighted_loss`: ``sum_i <w_i, o_i>`` with fixed random weights per output position, so a
  gradient routed to the wrong output (or permuted inside one) changes the result.
* :class:`RecordingPartitioner`: wraps a partition function and records every pair it returns.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
import torch.fx as fx
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import CheckpointPolicy

from fxremat.profiling import output_loss

__all__ = ["loss_of", "measured_with_min_cut", "weighted_loss", "Partitioned", "RecordingPartitioner"]

WEIGHT_SEED = 4321


def loss_of(out: Any) -> torch.Tensor:
    """:func:`fxremat.profiling.output_loss`, asserting that some output requires grad."""
    loss = output_loss(out)
    assert loss is not None, "no floating output requires grad"
    return loss


def measured_with_min_cut(model: torch.nn.Module, inputs: tuple, loss_fn: Callable[[Any], torch.Tensor] = loss_of
                          ) -> tuple[dict[str, int], list]:
    """({"min-cut": peak, "fxremat": peak}, fxremat's reports): the measured peak of one training
    step of ``model(*inputs)`` compiled by Inductor behind each partitioner, on one thread."""
    import fxremat
    from fxremat.backend import min_cut_backend
    from fxremat.profiling import peak_of_training_step

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        peaks = {}
        for name, backend in (("min-cut", min_cut_backend(compiler="inductor")), ("fxremat", fxremat.backend)):
            torch._dynamo.reset()
            fxremat.last_reports(clear=True)
            peaks[name] = peak_of_training_step(torch.compile(model, backend=backend), inputs, loss_fn)
        return peaks, fxremat.last_reports(clear=True)
    finally:
        torch.set_num_threads(threads)


def weighted_loss(outputs: Any, *, dtype: torch.dtype | None = torch.float32) -> torch.Tensor | None:
    """Sum of ``<w_i, o_i>`` over the floating tensors in ``outputs`` (nested tuples, lists, dicts)
    that require grad; ``w_i`` is drawn from a generator seeded with :data:`WEIGHT_SEED`, so it is
    the same for every configuration compared.  ``dtype``: the precision of the weights and of the
    products (outputs are cast to it); ``None``: each output's own dtype.  None if no output
    requires grad."""
    gen = torch.Generator().manual_seed(WEIGHT_SEED)
    total = None
    for out in tree_leaves(outputs):
        if isinstance(out, torch.Tensor) and out.requires_grad and out.is_floating_point():
            d = dtype or out.dtype
            w = torch.randn(out.shape, generator=gen, dtype=d)
            term = (out.to(d) * w).sum()
            total = term if total is None else total + term
    return total


class Partitioned(NamedTuple):
    """One call of a partition function, as :class:`RecordingPartitioner` saw it."""

    fw: fx.GraphModule
    bw: fx.GraphModule
    num_fwd_outputs: int
    must_save: list[str]  # joint-graph nodes tagged MUST_SAVE (selective checkpointing) at the call


class RecordingPartitioner:
    """Wraps a partition function (fxremat's, min-cut's, ...) and records every pair it returns."""

    def __init__(self, inner: Callable) -> None:
        self.inner = inner
        self.calls: list[Partitioned] = []

    def __call__(self, joint: fx.GraphModule, joint_inputs: Any, **kwargs: Any):
        must_save = [n.name for n in joint.graph.nodes if n.meta.get("recompute") == CheckpointPolicy.MUST_SAVE]
        fw, bw = self.inner(joint, joint_inputs, **kwargs)
        self.calls.append(Partitioned(fw, bw, kwargs["num_fwd_outputs"], must_save))
        return fw, bw
