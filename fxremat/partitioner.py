"""The partition function: joint graph in, forward and backward graphs with a liveness-optimal
saved set out, recomputation placed segment by segment.

Pipeline (each step its own module): :func:`~fxremat.analysis.analyze` the joint graph,
:func:`~fxremat.linearize.linearize` its forward into a chain, solve the chain, map the plan back
to saved values, close that set over values that must never be recomputed, extract the two
graphs with torch's own helper, reorder the backward, and measure both fxremat's pair and
PyTorch's min-cut pair with :func:`~fxremat.memory.replay_pair`.

Invariants:
* never worse than min-cut on predicted memory (for a graph fragment, :mod:`fxremat.fragments`:
  on its own peak + weighted bytes held into its backward, :func:`~fxremat.fragments.fragment_order`):
  if min-cut's pair has the lower (or equal) predicted peak and is safe
  (:func:`~fxremat.saved.min_cut_hazards` finds nothing: it recomputes no banned node and no random
  op, and keeps no caller-visible tensor that eager does not), min-cut's pair is returned;
* never a silently wrong plan: any failure inside planning falls back to min-cut's pair with one
  warning naming the reason (to ``default_partition``, which saves instead of recomputing, when
  min-cut's pair is unsafe); only user errors (a budget no plan meets, with ``strict_budget``)
  propagate;
* budgets are monotone: with a budget in bytes the pair run is the one of least predicted peak
  among min-cut's (if safe) and the solver's plans from no recomputation down to its plan for the
  budget (:func:`~fxremat.solvers.curve`), so a lower budget, which only adds plans, never predicts
  a higher peak; a budget no plan meets is best effort (every plan of the curve and the least-peak
  plans are candidates, and min-cut's pairs below) with one warning, unless ``strict_budget``;
* with a fraction ``f`` below 1, min-cut's pairs at ``activation_memory_budget=f`` and at every
  fraction of ``RIVAL_GRID`` (above and below ``f``) are candidates too, each replaced, where it is
  unsafe, by fxremat's pair for its saved set made safe; where ``f`` is met, the pair run is the
  *fastest* (the time model; estimates within ``CLEARLY_FASTER`` count as ties, won by the lower
  peak) of the candidates predicted within the budget (in replayed bytes) and no higher than
  min-cut's least pair at ``f`` or above; the grid fractions above ``f`` are decided first, each
  capping the next, so a lower fraction never predicts a higher peak (monotone on the grid);
* partition calls on one joint graph (a budget sweep) share a memo of min-cut's
  pairs and of the pairs extracted for fxremat's plans, which dies with the graph
  (:mod:`fxremat.rivals`); every pair returned is a copy, so nothing memoized is ever edited by
  AOTAutograd or Inductor;
* PyTorch's min-cut, the base plan and the comparison, always runs at torch's default
  ``activation_memory_budget`` of 1.0: a global value set for min-cut is ignored (one INFO line);
* a node banned from recomputation (effectful, mutating, reading a mutated input, MUST_SAVE;
  random only where torch cannot replay its RNG state) is never recomputed: its value is saved
  instead; a random op the backward recomputes replays the forward's RNG state (``_torch.replay_rng``),
  and with Inductor's ``fallback_random`` the forward's draws run in program order (``_torch.order_random_ops``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable, NamedTuple

import torch.fx as fx

from . import _torch
from .analysis import JointGraph, analyze
from .chain import Chain
from .fragments import Fragment, fragment_order
from .linearize import Linearization, linearizations, linearize
from .lowering import (
    accumulate_into_addend,
    accumulate_sums_by_addmm,
    keep_matmuls_in_place,
    merge_accumulating_puts,
    split_shared_transcendentals,
    store_before_recomputation,
    store_extern_fanout,
    store_permuted_fanout,
    store_put_values,
    sum_small_dims_by_matmul,
)
from .memory import Timeline, replay_pair
from .merge import Twin, forward_twins, merge_duplicates, reading_saved_twins, store_shared
from .options import Options
from .rivals import (
    RIVAL_GRID,
    Extracted,
    Memo,
    Rebuild,
    Rival,
    defer_products,
    handed_out,
    memo_for,
    min_cut_rivals,
    peak_in_deferred_tail,
)
from .row_kernels import store_softmax_inputs
from .saved import close_over_bans, min_cut_hazards, private_copies
from .schedule import recompute_just_in_time
from .solvers import Plan, curve, get_solver
from .solvers.dominant import discount_dominant, spare_dominant
from .solvers.least_held import least_held
from .solvers.plan import make_plan
from .timing import StepEstimate, step_seconds

__all__ = ["partition", "PartitionReport", "BudgetError", "last_reports"]

log = logging.getLogger("fxremat")


class BudgetError(ValueError):
    """The memory budget is below the smallest peak any plan reaches (a user error)."""

    @staticmethod
    def behind(exc: BaseException | None) -> BudgetError | None:
        """The :class:`BudgetError` in ``exc``'s chain, if any (Dynamo wraps backend errors in
        ``BackendCompilerFailed``: its ``inner_exception``, ``__cause__`` or ``__context__``)."""
        seen: set[int] = set()
        while exc is not None and id(exc) not in seen:
            if isinstance(exc, BudgetError):
                return exc
            seen.add(id(exc))
            exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
        return None


# A plan counts as faster on the time model's estimate alone when its step is estimated at most
# this share of the other's (the estimate misorders plans closer than a few percent).
CLEARLY_FASTER = 0.97


@dataclass(frozen=True)
class PartitionReport:
    """What the partitioner decided for one graph (read by :mod:`fxremat.report`)."""

    chosen: str  # "fxremat" or "min-cut"
    reason: str
    stages: int
    plan: Plan | None
    chain_no_recompute_peak: int
    fxremat: Timeline | None
    min_cut: Timeline
    saved: tuple[str, ...]
    forward_cost: float
    seconds: float
    budget_bytes: int | None = None  # this graph's budget on the chain model (None: no budget)
    budget_met: bool | None = None  # False: no plan meets it and the least-peak plan ran (None: no budget)
    chain: Chain | None = None  # the chain model the solver and the budget work on (its frontier: fxremat.report)
    step: StepEstimate | None = None  # fxremat's pair, estimated by fxremat.timing (None: not estimated)
    min_cut_step: StepEstimate | None = None  # min-cut's pair, likewise
    # the CPU layout fxremat's backends compile the pair in, where planning chose it (a CPU
    # convolution network: both layouts planned, :func:`_pick_layout`); None: no choice to make
    channels_last: bool | None = None
    fragment: str | None = None  # why the graph is one of several of the step's forward (None: not known to be)

    @property
    def predicted_step_s(self) -> float | None:
        """The estimated step time (:mod:`fxremat.timing`) of the pair that runs."""
        chosen = self.step if self.chosen == "fxremat" else self.min_cut_step
        return chosen.step_s if chosen is not None else None

    @property
    def timeline(self) -> Timeline:
        """The predicted timeline of the pair that runs (fxremat's or min-cut's)."""
        return self.fxremat if self.chosen == "fxremat" and self.fxremat is not None else self.min_cut

    @property
    def predicted_peak_bytes(self) -> int:
        return self.timeline.peak_bytes


# Rebuilt copies inside recomputed segments (schedule._rebuild_near_use) lower the replayed peak but
# measured higher under Inductor on 2 of 3 HF models (2026-12-01: Llama s1024 118.9 -> 128.9 MiB,
# BERT s512 98.4 -> 107.9, GPT-2 s512 padded 107.4 -> 103.4): off until the replay explains why.
REBUILD_NEAR_USE = False
DISCOUNTS = (0.5, 0.0)  # shares of a dominant stage's excess kept in the extra least-peak candidates
# The chain's runner-up long-lived choice runs only where its plan replays below this share of the
# chain's best (a near-tie follows the chain's ranking: the replay is no finer than a few percent)
RUNNER_UP_SHARE = 0.99
# The chain that pins nothing runs only where its plan replays below this share of the chain's
# best: HF T5 s256 padded, its unpinned plan replayed 1.1% under the best (44.40 MiB against
# 44.90) and measured 6% over it (47.02 against 44.40, 2026-12-06); the zoo U-Net's, which it is
# there for, replayed 6% under.
UNPINNED_SHARE = 0.98

MAX_REPORTS = 256
_REPORTS: deque[PartitionReport] = deque(maxlen=MAX_REPORTS)


def last_reports(clear: bool = False) -> list[PartitionReport]:
    """Reports of the last graphs partitioned in this process (newest last).

    At most the last ``MAX_REPORTS`` (256) are kept: older ones are dropped as new graphs are
    planned, so a long-running process that recompiles does not grow without bound.  ``clear``
    empties the list after reading it.
    """
    out = list(_REPORTS)
    if clear:
        _REPORTS.clear()
    return out


def partition(
    joint_module: fx.GraphModule,
    joint_inputs: Any,
    *,
    num_fwd_outputs: int,
    static_lifetime_input_indices: list[int] | None = None,
    options: Options | None = None,
    fragment: Fragment | None = None,
    **kwargs: Any,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """AOTAutograd ``partition_fn`` with the signature of ``min_cut_rematerialization_partition``.
    ``fragment``: whether and why the graph is followed by more of the step's forward
    (:func:`fxremat.fragments.fragment_of`); a fragment, without a budget, is planned for its own
    peak and the bytes it holds into its backward (:func:`~fxremat.fragments.fragment_order`, ``Fragment.rule``)."""
    options = options or Options()
    start = time.perf_counter()
    # Everything AOTAutograd passed; each of torch's partitioners gets the part it accepts
    # (default_partition takes no ``compiler``).
    pkw = {"num_fwd_outputs": num_fwd_outputs, "static_lifetime_input_indices": static_lifetime_input_indices, **kwargs}
    memo = memo_for(joint_module, pkw)
    try:
        with _default_min_cut_budget():
            mc_fw, mc_bw = memo.min_cut(joint_module, joint_inputs, pkw, None)
    except Exception as exc:  # noqa: BLE001 - min-cut (or the copy it runs on) failed: save, never recompute
        log.warning(
            "fxremat: falling back to PyTorch's default_partition (min-cut failed): %s: %s", type(exc).__name__, exc
        )
        return _torch.default_partition_of(joint_module, joint_inputs, **pkw)
    unsafe: list[str] | None = None  # None: not known (analysis failed)
    try:
        _torch.check_supported()
        joint = _merged_copy(joint_module, num_fwd_outputs, static_lifetime_input_indices,
                             kwargs.get("compiler") == "inductor")
        jg = analyze(joint, num_fwd_outputs=num_fwd_outputs, static_lifetime_input_indices=static_lifetime_input_indices,
                     inductor=kwargs.get("compiler") == "inductor", outputs_dropped=fragment is not None and fragment.layer_piece,
                     recomputable_ops=options.recomputable_ops)
        unsafe = min_cut_hazards(mc_fw, mc_bw, jg)
        planned = []
        for channels_last in jg.cpu_layouts:
            if planned and not _other_layout_may_win(planned[0][2], jg.cpu_layouts):
                break
            jgl, sub = replace(jg, channels_last=channels_last), memo.for_layout(channels_last)
            rival = functools.partial(min_cut_rivals, joint_module, joint_inputs, pkw, jgl, options, sub)
            mc_timeline = replay_pair(jgl, mc_fw, mc_bw)
            planned.append(_plan(jgl, options, mc_fw, mc_timeline, unsafe, rival, sub, fragment))
        fw, bw, report = _pick_layout(planned, jg.cpu_layouts)
        if fragment is not None and options.memory_budget is None and len(jg.cpu_layouts) == 1:
            fw, bw, report = _with_private_copies(jg, (fw, bw, report), options, mc_fw, unsafe, memo.key, fragment,
                                                  static_lifetime_input_indices)
        report = replace(report, seconds=time.perf_counter() - start, min_cut_step=step_seconds(mc_fw, mc_bw, jg.inductor))
        _log_report(report)
    except BudgetError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure must fall back, loudly
        if not unsafe:  # min-cut's pair is safe, or nothing is known: what PyTorch itself would run
            log.warning("fxremat: falling back to PyTorch's min-cut partitioner: %s: %s", type(exc).__name__, exc)
            return handed_out(mc_fw, mc_bw)
        log.warning(
            "fxremat: falling back to PyTorch's default_partition (min-cut %s): %s: %s",
            unsafe[0], type(exc).__name__, exc,
        )
        return _torch.default_partition_of(joint_module, joint_inputs, **pkw)
    _REPORTS.append(report)
    fw, bw = handed_out(mc_fw, mc_bw) if report.chosen == "min-cut" else handed_out(fw, bw)
    if jg.inductor and _torch.inductor_fallback_random():
        try:
            chained = _torch.order_random_ops(fw)
        except Exception as exc:  # noqa: BLE001 - the pair is right as it is; only eager's order of draws is at stake
            log.warning("fxremat: could not chain the forward's random draws (fallback_random): %s: %s",
                        type(exc).__name__, exc)
        else:
            if chained:
                log.info("fxremat: the forward's %d random draws chained in program order (fallback_random)", chained)
    if report.chosen == "min-cut":  # compiled as the default compile does (no fxremat patch)
        fw.meta[_torch.INDUCTOR_DEFAULTS_MARK] = True
    elif report.channels_last is not None:
        fw.meta[_torch.CPU_LAYOUT_MARK] = report.channels_last  # read when the pair is compiled
    return fw, bw


# A private copy of a caller-visible input costs its bytes where the caller drops the input after
# the forward (a layer's input: HF JetMoE's expert graphs save a copy of their 0.5 MiB input instead
# of the 1 MiB of rows gathered from it) and doubles them where the caller holds the input through
# the backward (HF ProphetNet's loss graph reads the logits the model returns: a copy at a tie of
# held bytes, 16.00 MiB against 16.01, measured 86.3 MiB against 62.1).  Which one it is is not
# known when the graph is compiled; each counts half (a judgement).
PRIVATE_COPY_EXTRA = 0.5


def _with_private_copies(jg: JointGraph, planned: tuple[fx.GraphModule, fx.GraphModule, PartitionReport],
                         options: Options, mc_fw: fx.GraphModule, unsafe: list[str], key: tuple, fragment: Fragment,
                         static_indices: list[int] | None) -> tuple[fx.GraphModule, fx.GraphModule, PartitionReport]:
    """A fragment's plan, or its plan on the joint graph whose forward reads private copies of the
    caller-visible inputs a recomputation would start from (:func:`~fxremat.saved.private_copies`),
    whichever :func:`~fxremat.fragments.fragment_order` puts first, the copies it saves counted
    ``1 + PRIVATE_COPY_EXTRA`` times (:data:`PRIVATE_COPY_EXTRA`)."""
    try:
        copies = private_copies(jg)
        if copies is None:
            return planned
        jg2 = replace(analyze(copies.joint, num_fwd_outputs=jg.num_fwd_outputs, static_lifetime_input_indices=static_indices,
                              inductor=jg.inductor, outputs_dropped=jg.outputs_dropped,
                              recomputable_ops=options.recomputable_ops), channels_last=jg.channels_last)
        other = _plan(jg2, options, mc_fw, planned[2].min_cut, unsafe, lambda rebuild: [], Memo(key), fragment)
    except Exception as exc:  # noqa: BLE001 - an extra candidate: its failure leaves the plan made
        log.info("fxremat: no plan with private copies of caller-visible inputs: %s: %s", type(exc).__name__, exc)
        return planned
    ours = planned[2].timeline
    order = fragment_order(min((planned[2].min_cut, ours, other[2].timeline), key=lambda t: t.peak_bytes), fragment.rule)
    extra = int(PRIVATE_COPY_EXTRA * sum(b for name, b in copies.clones.items() if name in other[2].saved))
    if order(replace(other[2].timeline, held_bytes=other[2].timeline.held_bytes + extra)) < order(ours):
        log.info("fxremat: a graph fragment's plan reads private copies of %s (caller-visible inputs): %s held, "
                 "%s own peak, against %s and %s", ", ".join(copies.inputs), _size(other[2].timeline.held_bytes),
                 _size(other[2].timeline.peak_bytes), _size(ours.held_bytes), _size(ours.peak_bytes))
        return other
    return planned


# A CPU convolution network is planned in both layouts and runs in its default one (channels-last
# with a depthwise convolution or a channels-last input, contiguous otherwise) unless the other
# layout's pair predicts at most a share of the default pair's peak.
#
# Channels-last by default: oneDNN's depthwise kernels are far faster so (25-30% of HF ConvNeXt's
# and MobileNetV2's step, 2026-12-03), but channels-last, a depthwise backward with a kernel larger
# than 3x3 allocates 256 bytes of scratch per weight byte, whatever the batch: 28 MiB for HF
# EfficientNet-B0's last 5x5 stage (1152 channels), where the activations are 4x4 pixels (least
# peak at 128 px, batch 8: 88.2 MiB predicted channels-last, 73.9 contiguous; measured 84.1 and
# 74.3, 2026-12-04).  Contiguous where it predicts at most this share:
CONTIGUOUS_PEAK_SHARE = 0.95
# Contiguous by default (HF ResNet-50 160 px, 2026-12-03: 183.3 MiB contiguous against 205.8
# channels-last, the input's channels-last copy adding), but contiguous, oneDNN reorders a
# convolution's operands inside its backward (two input-sized buffers), and where the peak is at
# such a backward channels-last is far lower (a small spatial transformer, 2026-12-05: 0.81 of the
# contiguous pair predicted, 1.26 MiB contiguous against min-cut's 1.23 in Inductor's own layouts,
# 0.88 channels-last).  The model overstates channels-last's advantage on a dense network with
# grouped convolutions (HF RegNetY 128 px: 0.89 of the contiguous pair predicted, 0.96 measured,
# 92.2 MiB against 96.1, at the same step time, 1.087x and 1.104x min-cut's interleaved; its
# channels-last backward converts grouped convolutions' operands, 2.4 MiB copies the model does not
# charge), so channels-last only where it predicts at most this share.  Predicted / measured
# channels-last : contiguous through Inductor (AVX512, 2026-12-06 16:00, after the replay learned
# concatenations' early buffers and their channels-last copies, and the CPU's C++ calls): the zoo
# U-Net 0.89 / 1.10 (980,532 B against 895,316), the zoo DenseNet 0.99 / 0.99, the breadth
# Inception 0.92 / 0.95, the spatial transformer 0.81 / 0.86 (0.78 the day before, when the replay
# charged channels-last pairs 7-23% under their measured peaks):
CHANNELS_LAST_PEAK_SHARE = 0.85


def _pick_layout(planned: list[tuple[fx.GraphModule, fx.GraphModule, PartitionReport]], layouts: tuple[bool, ...]
                 ) -> tuple[fx.GraphModule, fx.GraphModule, PartitionReport]:
    """Of the pairs planned in ``layouts`` (True: channels-last; the default first), the default's
    where it meets the budget; otherwise (no budget, or one it misses) the other layout's where that
    pair meets the budget or predicts at most :data:`CONTIGUOUS_PEAK_SHARE` (the other is contiguous)
    or :data:`CHANNELS_LAST_PEAK_SHARE` (it is channels-last) of the default's peak.  The report
    says which layout (``channels_last``; None where only one layout was possible)."""
    if len(planned) == 1:
        fw, bw, report = planned[0]
        return fw, bw, replace(report, channels_last=layouts[0]) if len(layouts) > 1 else report
    (fw, bw, default), (other_fw, other_bw, other) = planned
    share = CHANNELS_LAST_PEAK_SHARE if layouts[1] else CONTIGUOUS_PEAK_SHARE
    lower = other.predicted_peak_bytes <= share * default.predicted_peak_bytes
    switch = (default.budget_met is False and other.budget_met is True) or (default.budget_met is not True and lower)
    mib = 2**20
    if switch:
        log.info("fxremat: %s layout: its pair predicts %.2f MiB, the %s pair %.2f MiB",
                 _layout_name(layouts[1]), other.predicted_peak_bytes / mib, _layout_name(layouts[0]),
                 default.predicted_peak_bytes / mib)
        return other_fw, other_bw, replace(other, channels_last=layouts[1])
    return fw, bw, replace(default, channels_last=layouts[0])


def _other_layout_may_win(default: PartitionReport, layouts: tuple[bool, ...]) -> bool:
    """Whether to plan the second layout too, given the default layout's report: not where the
    default meets the budget (:func:`_pick_layout` keeps it then), nor, for a dense network, where
    convolution scratch is under ``1 - CHANNELS_LAST_PEAK_SHARE`` of the default pair's peak bytes
    at its peak (channels-last saves a dense network little but that scratch: HF ResNet-50 128 px,
    peak at the end of the backward among the parameter gradients; planning both layouts took 11 s
    against 8)."""
    if default.budget_met is True:
        return False
    if layouts[0]:
        return True
    timeline = default.timeline
    if not timeline.scratch:
        return True
    step = timeline.peak_step
    return timeline.scratch[step] > (1 - CHANNELS_LAST_PEAK_SHARE) * timeline.bytes_alive[step]


def _layout_name(channels_last: bool) -> str:
    return "channels-last" if channels_last else "contiguous"


def _merged_copy(joint: fx.GraphModule, num_fwd_outputs: int, static_indices: list[int] | None,
                 inductor: bool) -> fx.GraphModule:
    """The joint graph fxremat plans: a copy with duplicate attention masks merged and, under
    Inductor, shared ones stored once (:mod:`fxremat.merge`); ``joint`` itself is what min-cut and
    the fallbacks run on."""
    copy = _torch.copy_joint(joint)
    primals = [n for n in copy.graph.nodes if n.op == "placeholder" and _torch.is_primal(n)]
    static = frozenset(primals[i] for i in (static_indices or []) if i < len(primals))
    merge_duplicates(copy, num_fwd_outputs, static)
    if inductor:
        store_shared(copy, num_fwd_outputs, static)
    return copy



def _plan(jg: JointGraph, options: Options, mc_fw: fx.GraphModule, mc_timeline: Timeline, unsafe: list[str],
          rivals_of: Callable[[Rebuild], list[Rival]], memo: Memo, fragment: Fragment | None = None):
    """The pair to run and its report.  ``rivals_of(rebuild)``: min-cut's budget candidates, asked
    for only once a strict budget is known to be met (each of its min-cut runs costs seconds)."""
    joint, num_fwd_outputs = jg.module, jg.num_fwd_outputs
    by_name = {n.name: n for n in joint.graph.nodes}
    # Min-cut's saved values are the base plan.  The generator states its own RNG functionalization
    # adds are not joint-graph values (fxremat replays random ops itself); any other name missing
    # from the joint graph would silently drop a value the backward needs, so it fails (and falls back).
    base_names = [name for name in _torch.saved_names(mc_fw, num_fwd_outputs)
                  if name in by_name or not _torch.is_saved_rng_state(mc_fw, name)]
    missing = [name for name in base_names if name not in by_name]
    if missing:
        raise RuntimeError(f"min-cut saves {missing}, which are not nodes of the joint graph")
    base = [by_name[name] for name in base_names]
    base_tensors = [n for n in base if not _torch.is_sym_node(n)]
    sym = list(dict.fromkeys([n for n in jg.forward if _torch.is_sym_node(n)] + [n for n in base if _torch.is_sym_node(n)]))
    closed = close_over_bans(jg, [])  # what a plan recomputing everything saves
    always = [n for n in closed if not _torch.is_sym_node(n)]  # saved by every plan
    convolutions = bool(_torch.convolutions(joint))
    twins = forward_twins(jg)  # the backward's own copies of forward values (min-cut CSEs them)
    rule = fragment.rule if fragment else None  # (held weight, slack) of a fragment; None: not one

    # The chain that counts the always-saved values in every segment is the faithful one (and the
    # only one a budget is checked against).  The least-peak candidates also include the plan of
    # the chain that counts them only in the last segment: both are models of the real schedule
    # and neither is always closer, so the memory model's replay of the extracted pairs decides.
    solve = get_solver(options.solver)
    least = lambda chain: solve(chain).peak_bytes  # noqa: E731 - how linearize compares its options
    # The long-lived choice whose chain the solver brings lowest, and the runner-up: the choice
    # moves the stage boundaries, and the replay of the two least-peak plans can order them the
    # other way (a tiny HF ViTDet: two residual values pinned, 22 stages, 0.87 MiB replayed; the
    # runner-up, none pinned, 7 stages, 0.84; 2026-12-06).
    lin, *others = linearizations(jg, base_tensors, always, score=least)
    # A budget constrains activations: the chain without the parameter gradients, which are
    # alive whatever the plan (docs/usage.md); least peak is planned on the whole chain.
    budget_chain = lin.activation_chain or lin.chain
    budget = options.budget_bytes(budget_chain.no_recompute_peak())

    def evaluate(lin_: Linearization, plan: Plan, chain: Chain | None = None, label: str | None = None) -> _Candidate:
        key = (label or ("always" if lin_ is lin else "last"), plan.checkpoints)  # the same on every call (memo)
        if key not in memo.extracted:
            saved = close_over_bans(jg, lin_.saved_values(plan.checkpoints, base_tensors))
            memo.extracted[key] = _extract(jg, saved, sym, twins, base_tensors)
        return _Candidate(chain or lin_.chain, plan, *memo.extracted[key])

    def rebuild(names: list[str]) -> tuple[fx.GraphModule, fx.GraphModule, Timeline, StepEstimate] | None:
        if any(name not in by_name for name in names):  # a value of the joint graph fxremat merged away
            return None
        tensors = [by_name[name] for name in names if not _torch.is_sym_node(by_name[name])]
        key = ("saved", tuple(names))
        if key not in memo.extracted:
            # Under Inductor the random values it would draw again are saved: Inductor does not
            # lower a replayed generator state on CPU (HF BERT with dropout, min-cut's saved set
            # at 0.5: "Backend not supported" for run_and_save_rng_state).
            saved = close_over_bans(jg, tensors, redraw=not jg.inductor)
            memo.extracted[key] = _extract(jg, saved, sym, twins, base_tensors)
        return memo.extracted[key][1:5]

    def least_peak_plan(chain: Chain) -> Plan:
        # Least peak, then the least level of the stages that do not force it (a loss head must
        # not let every layer segment rise to its level), then least recomputation.
        return solve(chain) if options.solver == "chen" else spare_dominant(chain, solve)

    @functools.cache  # once per partition call: a budget's choice and its grid fractions share them
    def least_peak() -> list[_Candidate]:
        out = [evaluate(lin, least_peak_plan(lin.chain))]

        def if_clearly_lower(other: Linearization, label: str, share: float) -> None:
            """Another long-lived choice's plan runs only where it replays under ``share`` of the
            chain's best: a near-tie follows the chains' ranking (the replay is no finer than a few percent)."""
            candidate = evaluate(other, least_peak_plan(other.chain), label=label)
            if candidate.timeline.peak_bytes < share * out[0].timeline.peak_bytes:
                out.append(candidate)

        if others:  # the zoo resnet_bn's runner-up, its first block's input pinned, replayed 0.3% under
            # the best and measured 2.5% over, 2026-12-06 (RUNNER_UP_SHARE)
            if_clearly_lower(others[0], "runner-up", RUNNER_UP_SHARE)
        # and the chain that pins nothing, the one every graph had before long-lived storages:
        # the chains' ranking can miss it (the zoo U-Net: third of four, replayed 6% under the two
        # that pin its encoder outputs, and measured 7% under them, 2026-12-06; UNPINNED_SHARE)
        plain = next((o for o in others[1:] if not o.long_lived), None)  # options differ: one pins nothing
        if plain is not None:
            if_clearly_lower(plain, "unpinned", UNPINNED_SHARE)
        if options.solver != "chen":  # the loss head's model is the least sure: let the replay judge
            for keep in DISCOUNTS:
                discounted = discount_dominant(lin.chain, solve, keep)
                if discounted is not None:
                    plan = least_peak_plan(discounted)
                    out.append(evaluate(lin, make_plan(lin.chain, plan.checkpoints)))
        if lin.activation_chain is not None and not convolutions:
            # The gradients' bytes on the chain can hold a plan's first segments long where the
            # real schedule does not: the plan of the activations alone can replay lower (HF
            # GPT-NeoX s512: 47.03 MiB measured against 49.05, replayed alike, 2026-12-05).  Not
            # with convolutions: their backward's scratch and gradients are where the replay is
            # least sure, and there the candidate replayed lower but measured higher (HF ResNet-50
            # 128 px: 157.0 MiB replayed, 159.2 measured, against 157.8 and 149.5; EfficientNet-B0
            # channels-last 75.8 replayed, 83.7 measured, which turned its layout).
            acts = least_peak_plan(lin.activation_chain)
            out.append(evaluate(lin, make_plan(lin.chain, acts.checkpoints)))
        if always:
            lin_last = linearize(jg, base_tensors, score=least)
            out.append(evaluate(lin_last, least_peak_plan(lin_last.chain)))
        if jg.inductor:
            # Inductor fuses gradients and writes some in place, so the leaner stage transients
            # (no input gradient written, no scratch) can be the closer model: in the replay the
            # plan of either can be the lower (HF ResNet-50: the lean one's by 10 MiB;
            # MobileNetV2: the full one's by 10 MiB).  Without Inductor every gradient is a
            # buffer of its own: the full model is the faithful one.
            lean = least_peak_plan(lin.lean_chain)
            out.append(evaluate(lin, make_plan(lin.chain, lean.checkpoints)))
        if jg.channels_last:
            # Channels-last, a convolution's backward reorders only weights, so the chain charges
            # its stage little scratch; the chain charging the contiguous layout's reorders (an
            # input-sized transient per convolution) places its cuts elsewhere, and where the
            # replay misses what Inductor keeps around a recomputed segment, that plan can be the
            # lower (HF MobileNetV2 128 px: 69.6 MiB predicted, 64.7 measured, against 77.5 and
            # 74.7 for the channels-last chain's plan, 2026-12-04): the replay picks.
            wide = linearize(replace(jg, channels_last=False), base_tensors, always, score=least)
            out.append(evaluate(wide, least_peak_plan(wide.chain), label="reorders"))
        return out

    def fragment_candidates() -> list[_Candidate]:
        """A fragment's extra pairs: the chain's plans holding the fewest bytes within half its
        slack and within its slack above the chain's least peak, and the pair that recomputes
        everything, the last stage too (the chain model never does: a whole graph's backward
        begins where its forward ends), saving only what must be saved (its report's plan is the
        chain's nearest, every boundary checkpointed)."""
        least = solve(lin.chain).peak_bytes
        out = [evaluate(lin, least_held(lin.chain, int((1 + share * rule[1]) * least))) for share in (0.5, 1.0)]
        key = ("everything", ())
        if key not in memo.extracted:
            memo.extracted[key] = _extract(jg, closed, sym, twins, base_tensors)
        return out + [_Candidate(lin.chain, make_plan(lin.chain, range(1, lin.chain.n)), *memo.extracted[key])]

    def fastest_within(fraction: float, cap: float) -> _Candidate | Rival:
        """Of fxremat's candidates at ``fraction`` (met) and min-cut's pairs of the grid, the
        fastest (by the time model) predicted within the fraction's budget, within ``cap`` and no
        higher than min-cut's least pair there; among those whose estimates are within
        CLEARLY_FASTER of the fastest (the estimate misorders closer steps), the least peak.  The
        budget in replayed bytes is the replayed peak of the curve's first plan within it, plus the
        room the chain model leaves that plan under the budget."""
        budget_f = replace(options, memory_budget=fraction).budget_bytes(budget_chain.no_recompute_peak())
        k = next(k for k, p in enumerate(plans) if p.peak_bytes <= budget_f)
        last = evaluate(lin, plans[k], budget_chain)
        theirs = [r for r in rivals if r.fraction >= fraction]
        limit = min(cap, last.timeline.peak_bytes + budget_f - plans[k].peak_bytes,
                    *(r.timeline.peak_bytes for r in theirs))  # never above min-cut's at the same fraction
        pool = [evaluate(lin, p, budget_chain) for p in plans[: k + 1]] + least_peak() + rivals
        within_limit = [c for c in pool if c.timeline.peak_bytes <= limit]
        if not within_limit:  # the fraction above took a pair below this one's budget: the least peak
            return min(pool, key=lambda c: c.timeline.peak_bytes)
        quickest = min(c.step.step_s for c in within_limit)
        return min((c for c in within_limit if CLEARLY_FASTER * c.step.step_s <= quickest),
                   key=lambda c: (c.timeline.peak_bytes, c.step.step_s))

    met: bool | None = None
    if budget is None:
        candidates = least_peak()
    else:
        # The curve's plans down to the first within the budget: that one recomputes least within
        # it, the ones before recompute no more.  The replay, not the chain model, picks among them.
        plans = curve(solve, budget_chain)
        within = next((k for k, p in enumerate(plans) if p.peak_bytes <= budget), None)
        met = within is not None
        if not met and options.strict_budget:
            try:
                solve(budget_chain, budget)
            except ValueError as exc:  # the solver's message names the least feasible peak
                raise BudgetError(f"fxremat: memory_budget={options.memory_budget!r}: {exc}") from None
        candidates = [evaluate(lin, p, budget_chain) for p in (plans if within is None else plans[: within + 1])]
        log.debug("fxremat: budget %s: %d curve plans down to it; the last (%s on the chain) replays %s, est. %.1f ms",
                  _size(budget), len(candidates), _size(candidates[-1].plan.peak_bytes),
                  _size(candidates[-1].timeline.peak_bytes), 1e3 * candidates[-1].step.step_s)
        if not met:  # best effort: everything, including the least-peak plans of budget=None
            candidates += least_peak()
    best = min(candidates, key=lambda c: c.timeline.peak_bytes)  # ties: the first, least recomputation
    fragment_key = None  # with a fragment and no budget: the order of the pairs (fragment_order)
    if rule is not None and budget is None:
        candidates += fragment_candidates()
        fragment_key = fragment_order(min([mc_timeline, *(c.timeline for c in candidates)], key=lambda t: t.peak_bytes), rule)
        least_peak_held = best.timeline.held_bytes
        best = min(candidates, key=lambda c: fragment_key(c.timeline))
        log.debug("fxremat: fragment pairs (own peak, held): %s; min-cut's (%s, %s)",
                  ", ".join(f"({_size(c.timeline.peak_bytes)}, {_size(c.timeline.held_bytes)})" for c in candidates),
                  _size(mc_timeline.peak_bytes), _size(mc_timeline.held_bytes))
        log.info("fxremat: a graph fragment (%s): planned for the least own peak + %d x bytes held into its backward: "
                 "%s held, %s own peak (the least-peak plan: %s held)", fragment, rule[0],
                 _size(best.timeline.held_bytes), _size(best.timeline.peak_bytes), _size(least_peak_held))
    if met:
        # A least-peak plan is planned on the whole chain (gradients included), the budget's on the
        # activations alone, so it can replay lower *and* run faster than the plan within the
        # budget (HF Llama at 0.2: 43.9 MiB and 78% of a forward against 42.2 and 68%; HF ViT at
        # 0.2: 49.9 MiB and 448 ms measured against 31.3 and 416, though the least-peak plan
        # recomputes 95% of a forward to the budget plan's 83%): then it runs.  Faster: it
        # recomputes no more, or the time model (fxremat.timing) estimates its whole step at most
        # CLEARLY_FASTER times the other's (ViT at 0.2: 5% below; the estimate is no finer than a
        # few percent: on HF GPT-2 at 0.5 it put the least-peak plan 0.7% below a budget plan
        # measured 7% faster).
        better = [c for c in least_peak() if c.timeline.peak_bytes <= best.timeline.peak_bytes
                  and (c.plan.recompute_cost <= best.plan.recompute_cost
                       or c.step.step_s <= CLEARLY_FASTER * best.step.step_s)]
        yielded = min(better, key=lambda c: (c.timeline.peak_bytes, c.step.step_s), default=best)
        if yielded is not best:
            log.info("fxremat: the budget's plan (%s predicted, step est. %.1f ms) yields to a least-peak plan "
                     "(%s, est. %.1f ms)", _size(best.timeline.peak_bytes), 1e3 * best.step.step_s,
                     _size(yielded.timeline.peak_bytes), 1e3 * yielded.step.step_s)
        best = yielded
    chain, plan, saved_names, fw, bw, timeline, step = best
    rivals = rivals_of(rebuild)
    pick: _Candidate | Rival = best
    if met and rivals:
        # A fraction: at each grid fraction from the highest down to the user's, the fastest pair
        # within that fraction's budget, no higher than the pick of the fraction above (monotone).
        cap = float("inf")
        for g in sorted({options.memory_budget, *(x for x in RIVAL_GRID if x > options.memory_budget)}, reverse=True):
            pick = fastest_within(g, cap)
            cap = pick.timeline.peak_bytes
    elif rivals:  # best effort: min-cut's pair runs if it predicts less than every fxremat plan
        pick = min([best, *rivals], key=lambda c: c.timeline.peak_bytes)
    if isinstance(pick, _Candidate):
        chain, plan, saved_names, fw, bw, timeline, step = pick
    if isinstance(pick, Rival) and (unsafe or pick.timeline.peak_bytes <= mc_timeline.peak_bytes):
        # min-cut's pair at a fraction (the plan fields of the report describe fxremat's best plan)
        fw, bw, timeline, step = pick.fw, pick.bw, pick.timeline, pick.step
        chosen, reason = "fxremat", pick.reason
        saved_names = tuple(_torch.saved_names(fw, jg.num_fwd_outputs))
    elif unsafe:
        chosen, reason = "fxremat", f"min-cut {unsafe[0]}"
    elif fragment_key is not None:
        fewer = fragment_key(timeline) < fragment_key(mc_timeline)
        chosen, reason = ("fxremat", "a graph fragment: lower own peak + weighted held bytes") if fewer else (
            "min-cut", "a graph fragment: min-cut's own peak + weighted held bytes are not higher")
    elif timeline.peak_bytes < mc_timeline.peak_bytes:
        chosen, reason = "fxremat", "lower predicted peak"
    else:
        chosen, reason = "min-cut", "min-cut's predicted peak is not higher"
    report = PartitionReport(
        chosen, reason, chain.n, plan, chain.no_recompute_peak(), timeline, mc_timeline,
        saved_names, sum(chain.forward_cost), 0.0, budget, met, chain, step,
        fragment=None if fragment is None else fragment.reason,
    )
    if met is False:  # planned: nothing after this can fall back, so this is the graph's one warning
        log.warning(
            "fxremat: memory_budget=%r (%s on the chain model) is below the least peak any plan of this graph "
            "reaches (%s): running the plan of least predicted peak instead (strict_budget=True makes this an error)",
            options.memory_budget, _size(budget), _size(plans[-1].peak_bytes),
        )
    return fw, bw, report


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB" if nbytes >= 2**20 // 100 else f"{nbytes} bytes"


def _default_min_cut_budget():
    """A context running min-cut at torch's default ``activation_memory_budget`` (1.0).

    fxremat's base plan and its comparison are min-cut's default pair; a global budget set for
    min-cut (``torch._functorch.config.activation_memory_budget``) is min-cut's own knob, so it is
    ignored, with one INFO line (fxremat's budget is ``memory_budget``).
    """
    current = _torch.min_cut_activation_memory_budget()
    if current is None or current == 1.0:
        return _torch.activation_memory_budget(None)
    log.info(
        "fxremat: ignoring torch._functorch.config.activation_memory_budget=%r (min-cut's own knob): min-cut "
        "runs at 1.0 as fxremat's base plan; fxremat's budget is make_backend(memory_budget=...)", current,
    )
    return _torch.activation_memory_budget(1.0)


class _Candidate(NamedTuple):
    chain: Chain
    plan: Plan
    saved: tuple[str, ...]
    fw: fx.GraphModule
    bw: fx.GraphModule
    timeline: Timeline
    step: StepEstimate


def _extract(jg: JointGraph, saved: list[fx.Node], sym: list[fx.Node], twins: tuple[Twin, ...],
             held: list[fx.Node], defer: bool = True) -> Extracted:
    """Extracted and scheduled graphs, and their predicted timeline, for a complete saved set (one
    :func:`~fxremat.saved.close_over_bans` returned); ``held``: min-cut's saved values (with
    :data:`REBUILD_NEAR_USE`, copies of them may be rebuilt near their use).  Where the replay's
    peak falls among the products :func:`defer_returned_products` moved to the end (what they
    hold while they wait can raise it there, and only there: a graph whose peak is its last
    gradients, HF Speech2Text's tiny case), the pair is extracted again without the move and the
    lower of the two is kept."""
    with reading_saved_twins(twins, saved):
        fw, bw = _torch.extract_fwd_bwd(
            jg.module, saved, sym, num_fwd_outputs=jg.num_fwd_outputs, static_lifetime_input_nodes=jg.static_inputs
        )
    bw = recompute_just_in_time(bw, jg, held={n.name for n in held} if REBUILD_NEAR_USE else None)
    if jg.inductor:
        accumulate_into_addend(bw)  # first: the add it removes is then no addmm to keep apart
        merge_accumulating_puts(bw)  # after it: the accumulations it chains into one buffer
        sum_small_dims_by_matmul(bw)
        accumulate_sums_by_addmm(bw)  # after it: the sums it leaves to Inductor
        keep_matmuls_in_place(bw)
        if defer:  # last: it moves the products the rewrites above left returned
            defer_products(bw, jg)
        split_shared_transcendentals(bw)
        store_before_recomputation(bw, jg.channels_last)
        store_permuted_fanout(fw)
        store_permuted_fanout(bw)
        store_put_values(bw)
    fw, bw = _torch.replay_rng(jg.module, fw, bw, len(sym))
    timeline = replay_pair(jg, fw, bw)
    if defer and jg.inductor and peak_in_deferred_tail(timeline, bw):
        plain = _extract(jg, saved, sym, twins, held, defer=False)
        if plain.timeline.peak_bytes < timeline.peak_bytes:
            return plain
    if jg.inductor:  # after the replay (it counts each such value stored once): its peak sets the limit
        limit = int(EXTERN_FANOUT_SHARE * timeline.peak_bytes)
        store_extern_fanout(fw, jg.channels_last, limit)
        store_extern_fanout(bw, jg.channels_last, limit)
        store_softmax_inputs(fw)  # not the backward's: there Inductor runs a split softmax in place
    return Extracted(tuple(n.name for n in saved), fw, bw, timeline, step_seconds(fw, bw, jg.inductor))


# The bytes of the values store_extern_fanout may mark in one graph, as a share of the pair's
# replayed peak.  Unmarked, each constrained reader computes its own copy, alive only around that
# reader; marked, one buffer lives from the graph's computation to the last reader, as the replay
# counts it: the measured peak can rise by up to these bytes, towards the replayed peak (HF GPT-2
# sdpa s512 padded: a 2 MiB mask, 3.2% of 63.15 MiB replayed; 61.69 -> 62.15 MiB measured).  A
# larger value (HF T5's masked position bias, 32 MiB per layer at sequence 1024: storing it cost
# 31-35 MiB of a 147 MiB peak, 2026-12-07) keeps a copy per reader.
EXTERN_FANOUT_SHARE = 0.05


def _log_report(r: PartitionReport) -> None:
    mib = 2**20
    fx_peak = f"{r.fxremat.peak_bytes / mib:.2f}" if r.fxremat else "-"
    cps = r.plan.checkpoints if r.plan else ()
    share = (r.plan.recompute_cost / r.forward_cost) if r.plan and r.forward_cost else 0.0
    log.info(
        "fxremat: %s (%s); predicted peak fxremat %s MiB vs min-cut %.2f MiB; %d stages, checkpoints %s; "
        "recompute %.0f%% of forward; %.2fs",
        r.chosen, r.reason, fx_peak, r.min_cut.peak_bytes / mib, r.stages, list(cps), 100 * share, r.seconds,
    )
    if r.plan is not None:
        log.debug("fxremat: saved values: %s", ", ".join(r.saved))
