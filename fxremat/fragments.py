"""Whether a Dynamo graph is the step's whole forward or one of several graphs.

Invariant: :func:`fragment_of` names a reason only from what is observable when the graph is
compiled (Dynamo's records, and the Python frames that called the compiled code); it never guesses
from the graph's contents.  A graph it names is followed, before its backward, by other work of
the forward (Python and other graphs) that runs above everything the graph saved; the partitioner
then weighs those bytes (:func:`fxremat.partitioner.fragment_order`).

Two ways a graph is followed by more of the forward:

* it ends at a graph break: the rest of its frame runs after it;
* its frame is called from a module's ``forward`` that runs in Python: Dynamo skipped that frame
  (a graph break inside the loop over layers compiles each layer's frame alone), broke it (a
  break inside a layer compiles the layer's frame alone, its part after the break as a function
  resuming it), or the user compiled only the blocks (per-layer ``torch.compile``, as FSDP2
  recipes do).  The frame a resume function continues is not counted: a frame broken near its
  start runs its whole rest as one resumed graph, followed by nothing.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import torch
import torch.fx as fx

from . import _torch

__all__ = ["Fragment", "fragment_of"]

_SKIPPED = (os.path.dirname(torch.__file__), os.path.dirname(__file__))


@dataclass(frozen=True)
class Fragment:
    """A graph followed by more of the step's forward."""

    reason: str
    # called from a module's forward that runs in Python: a piece of a layer or block, which that
    # forward most likely calls once per layer (False: a top-level frame broken at a graph break,
    # whose rest runs once after it)
    inside_forward: bool

    def __str__(self) -> str:
        return self.reason


def fragment_of(gm: fx.GraphModule) -> Fragment | None:
    """Whether, and why, the Dynamo graph ``gm`` (being compiled by a backend now) is followed by
    more of the step's forward; None where nothing says so."""
    inside = _inside_python_forward(_torch.resumed_frame())
    reason = _torch.graph_break_reason(gm)
    if reason is not None:
        where = f"; {inside}" if inside else ""
        return Fragment(f"it ends at a graph break: {reason}{where}", inside is not None)
    return Fragment(inside, True) if inside is not None else None


def _inside_python_forward(resumed: tuple[str, int] | None) -> str | None:
    """The first module ``forward``, outside torch and fxremat, on the Python stack, but for the
    frame the graph's resume function continues (``resumed``: its function's name and line)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(_SKIPPED):
            if resumed is not None and (code.co_name, frame.f_lineno) == resumed:
                resumed = None  # the broken frame itself: what follows the resumed graph is its return
            elif code.co_name == "forward" and code.co_argcount:
                owner = frame.f_locals.get(code.co_varnames[0])
                if isinstance(owner, torch.nn.Module):
                    return f"it runs inside {type(owner).__name__}.forward, which runs in Python"
        frame = frame.f_back
    return None
