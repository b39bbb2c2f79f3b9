"""Min-cut's pairs as the partitioner's rivals and candidates, memoized per joint graph.

PyTorch's min-cut partitioner is fxremat's base plan and comparison (:mod:`fxremat.partitioner`
returns its pair wherever it predicts no higher), and with a budget fraction its pairs at
``activation_memory_budget`` = every fraction of :data:`RIVAL_GRID` are budget candidates.

Invariants:
* every partition call on one joint graph shares one :class:`Memo` (min-cut's pairs by fraction,
  torch's max-flow answers, the pairs extracted for fxremat's plans); it is keyed by the graph
  object and dies with it;
* nothing memoized is ever handed out: :func:`handed_out` copies a pair, since AOTAutograd and
  Inductor edit the graphs they are given;
* a rival never raises: a min-cut run that fails is logged and is no candidate, and an unsafe pair
  (:func:`~fxremat.saved.min_cut_hazards`) is replaced by fxremat's pair for its saved set, made safe.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, Callable, NamedTuple

import torch.fx as fx

from . import _torch
from .analysis import JointGraph
from .lowering import defer_returned_products, deferred_tail
from .memory import Timeline, replay_pair
from .options import Options
from .saved import min_cut_hazards
from .timing import StepEstimate, step_seconds

__all__ = ["Extracted", "Memo", "Rebuild", "Rival", "RIVAL_GRID", "defer_products", "deferred", "handed_out",
           "memo_for", "min_cut_pair", "min_cut_rivals", "peak_in_deferred_tail"]

log = logging.getLogger("fxremat")


def handed_out(fw: fx.GraphModule, bw: fx.GraphModule) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Copies of a memoized pair: AOTAutograd and Inductor edit the graphs they are given, and a
    later partition call on the same joint graph may hand the same pair out again."""
    return _torch.copy_joint(fw), _torch.copy_joint(bw)


class Extracted(NamedTuple):
    """One plan's saved set (names), extracted pair and predicted timeline."""

    saved: tuple[str, ...]
    fw: fx.GraphModule
    bw: fx.GraphModule
    timeline: Timeline
    step: StepEstimate


class Memo:
    """What every partition call on one joint graph shares: min-cut's pairs by fraction and the
    pairs extracted for fxremat's plans.  AOTAutograd partitions a joint graph once; a budget sweep
    partitions it many times, and each min-cut run or extraction costs a second on a
    small transformer.  Keyed by the graph object (entries die with it) and by the arguments that
    change a result (an AOTAutograd joint graph is not edited after it is partitioned); what leaves
    the memo is a copy (:func:`handed_out`), so nothing in it is ever edited."""

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.min_cuts: dict[float | None, tuple[fx.GraphModule, fx.GraphModule]] = {}
        self.solves: dict = {}  # torch's max-flow answers, shared by min-cut's runs (_torch.shared_solves)
        self.rivals: dict[float, Rival | None] = {}
        self.extracted: dict[tuple[str, tuple], Extracted] = {}  # by plan (chain, checkpoints) or saved names
        self.layouts: dict[bool, Memo] = {}

    def for_layout(self, channels_last: bool) -> "Memo":
        """The memo of one CPU layout's planning: min-cut's pairs are shared, their replays and
        fxremat's extracted pairs (whose timelines depend on the layout's scratch) are not."""
        if channels_last not in self.layouts:
            child = self.layouts[channels_last] = Memo(self.key)
            child.min_cuts = self.min_cuts
            child.solves = self.solves
        return self.layouts[channels_last]

    def min_cut(self, joint: fx.GraphModule, joint_inputs: Any, pkw: dict[str, Any],
                fraction: float | None) -> tuple[fx.GraphModule, fx.GraphModule]:
        """Min-cut's pair at ``activation_memory_budget`` = ``fraction`` (None: whatever the caller's
        context sets); failures are not memoized: they raise again."""
        if fraction not in self.min_cuts:
            with _torch.activation_memory_budget(fraction), _torch.shared_solves(self.solves):
                self.min_cuts[fraction] = _torch.min_cut(joint, joint_inputs, **pkw)
        return self.min_cuts[fraction]


_MEMOS: weakref.WeakKeyDictionary[fx.GraphModule, Memo] = weakref.WeakKeyDictionary()


def memo_for(joint: fx.GraphModule, pkw: dict[str, Any]) -> Memo:
    key = (pkw["num_fwd_outputs"], tuple(pkw.get("static_lifetime_input_indices") or ()), pkw.get("compiler"))
    memo = _MEMOS.get(joint)
    if memo is None or memo.key != key:
        memo = _MEMOS[joint] = Memo(key)
    return memo


def min_cut_pair(joint: fx.GraphModule, joint_inputs: Any, fraction: float, **kwargs: Any
                 ) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Min-cut's pair for ``joint`` at ``activation_memory_budget=fraction``, memoized as the
    partition function's own budget candidates are (tests compare against it without paying for
    min-cut twice).  ``kwargs``: what AOTAutograd passes the partitioner."""
    return handed_out(*memo_for(joint, kwargs).min_cut(joint, joint_inputs, kwargs, fraction))


class Rival(NamedTuple):
    """Min-cut's pair at ``activation_memory_budget`` = a fraction: a budget candidate (``rebuilt``:
    the pair fxremat extracted for min-cut's saved set, made safe, because min-cut's own is not)."""

    fw: fx.GraphModule
    bw: fx.GraphModule
    timeline: Timeline
    step: StepEstimate
    fraction: float
    rebuilt: str | None = None  # why min-cut's own pair could not run (None: it is min-cut's own)

    @property
    def reason(self) -> str:
        if self.rebuilt:
            return f"min-cut's saved set at activation_memory_budget={self.fraction!r}, made safe (min-cut {self.rebuilt})"
        return f"min-cut's pair at activation_memory_budget={self.fraction!r}"


# fxremat's pair for a saved set given by name (None: not one fxremat can extract): see _min_cut_pair.
Rebuild = Callable[[list[str]], "tuple[fx.GraphModule, fx.GraphModule, Timeline, StepEstimate] | None"]


# Min-cut's fractions tried as budget candidates beside the user's own: every budget has every
# pair of the grid, so a lower fraction's leaner pair can run at a higher fraction when it is as
# fast, and a lower budget (capped by the one above) never predicts a higher peak.
RIVAL_GRID = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)


def min_cut_rivals(joint: fx.GraphModule, joint_inputs: Any, pkw: dict[str, Any], jg: JointGraph,
                         options: Options, memo: Memo, rebuild: Rebuild) -> list[Rival]:
    """With ``memory_budget`` a fraction ``f`` below 1: min-cut's pairs at
    ``activation_memory_budget`` = ``f`` and at every fraction of :data:`RIVAL_GRID` (each made
    safe where it is not, see :func:`_min_cut_pair`), highest fraction first; empty otherwise
    (never raises).

    The two fractions measure different things (fxremat's: of the activation chain's peak without
    recomputation; min-cut's: of its saved bytes), so a user comparing the knobs at one value could
    find min-cut's lower or faster: its pairs are candidates like fxremat's own plans.  The grid
    keeps budgets monotone: without it, min-cut's pair at 0.4 could be chosen at 0.4 and be missing
    at 0.3 (a transformer predicted 2.75 MiB at 0.4 and 2.88 at 0.3, 2026-12-02).  The fractions
    below ``f`` count because min-cut's low budgets can be its fastest pairs as well as its leanest
    (on CPU CNNs: ConvNeXt 160 px at 0.2, 2026-12-03), so a user's high fraction should not miss
    them; the price is up to ten min-cut runs per graph at any fraction."""
    fraction = options.memory_budget
    if not isinstance(fraction, float) or fraction >= 1.0:
        return []
    out = []
    for f in sorted({fraction, *RIVAL_GRID}, reverse=True):
        if f not in memo.rivals:
            memo.rivals[f] = _min_cut_pair(joint, joint_inputs, pkw, jg, f, memo, rebuild)
        if memo.rivals[f] is not None:
            out.append(memo.rivals[f])
    return out


def _min_cut_pair(joint: fx.GraphModule, joint_inputs: Any, pkw: dict[str, Any], jg: JointGraph,
                  fraction: float, memo: Memo, rebuild: Rebuild) -> Rival | None:
    """Min-cut's pair at ``fraction`` as a candidate.  Where :func:`~fxremat.saved.min_cut_hazards`
    finds anything (it would save a caller-visible input, recompute a random op without replaying
    its RNG state, or recompute a banned node), the candidate is fxremat's own pair for min-cut's
    saved set instead, completed as every plan of fxremat's is (``rebuild``: the first value past a
    caller-visible one saved instead of it, random ops replayed, banned values saved).  min-cut's
    budget pairs keep the layers' cheap values out of the saved set, which fxremat's curve, built
    on min-cut's default saved set, does not: on HF BERT and ConvNeXt every one of them is unsafe
    for one caller-visible input alone, and made safe they predict less than fxremat's plans at
    the same fraction for no more time (ConvNeXt 160 px at 0.8: 72.3 MiB against 99.8).  A safe
    pair runs as min-cut made it, but for Inductor with its returned products deferred as in every
    backward fxremat extracts (:func:`deferred`; HF RegNet at 0.8: 103.4 -> 94.0 MiB predicted),
    unless its replayed peak falls among the moved products and the pair without them is lower."""
    try:
        fw, bw = memo.min_cut(joint, joint_inputs, pkw, fraction)
        why = min_cut_hazards(fw, bw, jg)
        if not why:
            later = deferred(bw, jg) if jg.inductor else bw
            timeline = replay_pair(jg, fw, later)
            if later is not bw and peak_in_deferred_tail(timeline, later):
                plain = replay_pair(jg, fw, bw)
                later, timeline = (bw, plain) if plain.peak_bytes < timeline.peak_bytes else (later, timeline)
            return Rival(fw, later, timeline, step_seconds(fw, later, jg.inductor), fraction)
        names = [name for name in _torch.saved_names(fw, jg.num_fwd_outputs) if not _torch.is_saved_rng_state(fw, name)]
        rebuilt = rebuild(names)
        if rebuilt is None:
            log.info("fxremat: min-cut at activation_memory_budget=%r is not a candidate: %s", fraction, why[0])
            return None
        log.debug("fxremat: min-cut at activation_memory_budget=%r %s: its saved set made safe is the candidate",
                  fraction, why[0])
        return Rival(*rebuilt, fraction, why[0])
    except Exception as exc:  # noqa: BLE001 - an optional candidate: its failure changes nothing
        log.info("fxremat: min-cut at activation_memory_budget=%r failed (%s: %s): not a candidate",
                 fraction, type(exc).__name__, exc)
        return None


def deferred(bw: fx.GraphModule, jg: JointGraph) -> fx.GraphModule:
    """min-cut's backward with its returned products run last (as in every backward fxremat
    extracts for Inductor), on a copy: the memo keeps min-cut's own pair."""
    out = _torch.copy_joint(bw)
    return out if defer_products(out, jg) else bw


def defer_products(bw: fx.GraphModule, jg: JointGraph) -> int:
    """:func:`defer_returned_products` on ``bw``, counting the joint graph's primals (parameters
    and the step's inputs, which the caller holds) as no operand's cost."""
    return defer_returned_products(bw, frozenset(p.name for p in jg.primals))


def peak_in_deferred_tail(timeline: Timeline, bw: fx.GraphModule) -> bool:
    """Whether the replayed peak falls among the products moved to ``bw``'s end, the only place a
    deferral can raise it: there the pair without the move may replay lower."""
    return timeline.labels[timeline.peak_step] in deferred_tail(bw)
