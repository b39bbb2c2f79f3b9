"""Whether a Dynamo graph is the step's whole forward or one of several graphs.

Invariant: :func:`fragment_of` names a reason only from what is observable when the graph is
compiled (Dynamo's records, the Python frames that called the compiled code, and the parameters
among the graph's inputs); it never guesses from the graph's operations.  A graph it names is
followed, before its backward, by other work of the forward (Python and other graphs) that runs
above everything the graph saved; the partitioner weighs those bytes, twice for a layer piece and
once for a large part (:func:`fragment_order`).

Two ways a graph is followed by more of the forward:

* it ends at a graph break: the rest of its frame runs after it;
* its frame is called from a module's ``forward`` that runs in Python: Dynamo skipped that frame
  (a graph break inside the loop over layers compiles each layer's frame alone), broke it (a
  break inside a layer compiles the layer's frame alone, its part after the break as a function
  resuming it), or the user compiled only the blocks (per-layer ``torch.compile``, as FSDP2
  recipes do).  The frame a resume function continues is not counted: a frame broken near its
  start runs its whole rest as one resumed graph, followed by nothing.

A fragment is a *layer piece* (most likely called once per layer) where it is called from such a
forward and holds under :data:`LAYER_PIECE_SHARE` of the outermost one's parameters; otherwise it
is a large part of the model, whose rest runs once after it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import torch
import torch.fx as fx

from . import _torch

if TYPE_CHECKING:
    from .memory import Timeline

__all__ = ["Fragment", "fragment_of"]

_SKIPPED = (os.path.dirname(torch.__file__), os.path.dirname(__file__))


# A fragment whose parameters are under this share of the outermost Python forward's module's is a
# piece of a layer (most likely called once per layer); above it, a large part of the model (HF
# WavLM's whole transformer encoder, called from the CTC model's forward), followed by little.
LAYER_PIECE_SHARE = 0.5


# A layer piece (a fragment called from a forward that runs in Python, holding under half of the
# model's parameters: most likely called once per layer, or per expert hit in an MoE loop): every
# byte it holds into its backward (saved values and outputs, the replay's ``held_bytes``) stays
# alive while the later graphs run, so the step's peak is about the held bytes of the graphs before
# plus one graph's own peak.  Its plan is the pair of least own
# peak + FRAGMENT_HELD_WEIGHT x held bytes among the pairs whose own peak is at most
# FRAGMENT_SLACK above the least (its own plans' and min-cut's).  The weight counts held bytes as
# alive through at least one more graph like this one: a judgement, not a measured optimum
# (docs/design.md, "Graph fragments"); recomputing all of a layer can cost ~1.4x its least own
# peak, hence the slack.  A fragment that is a large part of the model (a top-level frame broken
# at a graph break, most of the model called from a wrapper's forward) runs once, followed once by
# the rest: LARGE_PART_RULE weighs its held bytes once, within 1.25x its least own peak.  Measured
# through Inductor (2026-12-06): HF ProphetNet 62.1 MiB against 86.3 planned as a whole graph, HF
# WavLM 40.5 against 39.6, a synthetic 6-layer transformer broken before a 1000-class loss 15.2
# against 15.5 and before a 10-class loss 14.8 against 12.8 (where the rest is light, the held
# bytes matter little and the cap bounds the loss).
FRAGMENT_HELD_WEIGHT = 2
FRAGMENT_SLACK = 0.5
LARGE_PART_RULE = (1, 0.25)  # (held weight, slack) of a fragment that is no layer piece


def fragment_order(least: Timeline, rule: tuple[int, float]) -> Callable[[Timeline], tuple[bool, int, int]]:
    """Sort key of a fragment's pairs, given the pair of least own peak and the fragment's
    ``rule`` (held weight, slack; ``Fragment.rule``): pairs within the slack above that peak first,
    then least own peak + weight x held bytes, then least peak."""
    weight, slack = rule
    limit = (1 + slack) * least.peak_bytes
    return lambda t: (t.peak_bytes > limit, t.peak_bytes + weight * t.held_bytes, t.peak_bytes)


@dataclass(frozen=True)
class Fragment:
    """A graph followed by more of the step's forward."""

    reason: str
    # a piece of a layer: called from a module's forward that runs in Python, with under
    # LAYER_PIECE_SHARE of the outermost such module's parameters, so most likely called once per
    # layer (per expert hit in an MoE loop).  False: a large part of the model (a top-level frame
    # broken at a graph break, or most of the model called from a wrapper's forward), whose rest
    # runs once after it
    layer_piece: bool

    def __str__(self) -> str:
        return self.reason

    @property
    def rule(self) -> tuple[int, float]:
        """(held weight, slack) of this fragment's plan (:func:`fragment_order`)."""
        return (FRAGMENT_HELD_WEIGHT, FRAGMENT_SLACK) if self.layer_piece else LARGE_PART_RULE


def fragment_of(gm: fx.GraphModule, example_inputs: Sequence[Any] = ()) -> Fragment | None:
    """Whether, and why, the Dynamo graph ``gm`` (being compiled by a backend now, with
    ``example_inputs``, which hold its parameters) is followed by more of the step's forward;
    None where nothing says so."""
    inside = _python_forwards(_torch.resumed_frame())
    piece, where = False, ""
    if inside:
        owned = _parameter_bytes(inside[-1].parameters())
        params = [*(t for t in example_inputs if isinstance(t, torch.nn.Parameter)), *gm.parameters()]
        share = _parameter_bytes(params) / owned if owned else 1.0
        piece = share < LAYER_PIECE_SHARE
        where = (f"it runs inside {type(inside[0]).__name__}.forward, which runs in Python (its parameters: "
                 f"{share:.0%} of {type(inside[-1]).__name__}'s)")
    reason = _torch.graph_break_reason(gm)
    if reason is not None:
        return Fragment(f"it ends at a graph break: {reason}" + (f"; {where}" if where else ""), piece)
    return Fragment(where, piece) if inside else None


def _parameter_bytes(params: Iterable[torch.Tensor]) -> int:
    return sum(p.numel() * p.element_size() for p in {id(p): p for p in params}.values())


def _python_forwards(resumed: tuple[str, int] | None) -> list[torch.nn.Module]:
    """The modules whose ``forward`` (outside torch and fxremat) is on the Python stack, innermost
    first, but for the frame the graph's resume function continues (``resumed``: its function's
    name and line): they run in Python and called the compiled code."""
    out: list[torch.nn.Module] = []
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(_SKIPPED):
            if resumed is not None and (code.co_name, frame.f_lineno) == resumed:
                resumed = None  # the broken frame itself: what follows the resumed graph is its return
            elif code.co_name == "forward" and code.co_argcount:
                owner = frame.f_locals.get(code.co_varnames[0])
                if isinstance(owner, torch.nn.Module):
                    out.append(owner)
        frame = frame.f_back
    return out
