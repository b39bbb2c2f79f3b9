"""The partition function: joint graph in, forward and backward graphs with a liveness-optimal
saved set out, recomputation placed segment by segment.

Pipeline (each step its own module): :func:`~fxremat.analysis.analyze` the joint graph,
:func:`~fxremat.linearize.linearize` its forward into a chain, solve the chain, map the plan back
to saved values, close that set over values that must never be recomputed, extract the two
graphs with torch's own helper, reorder the backward, and measure both fxremat's pair and
PyTorch's min-cut pair with :func:`~fxremat.memory.simulate`.

Invariants:
* never worse than min-cut on predicted memory: if min-cut's pair has the lower (or equal)
  predicted peak and is safe (:func:`~fxremat.saved.min_cut_hazards` finds nothing: it recomputes
  no banned node and keeps no caller-visible tensor that eager does not), min-cut's pair is returned;
* never a silently wrong plan: any failure inside planning falls back to min-cut's pair with one
  warning naming the reason (to ``default_partition``, which saves instead of recomputing, when
  min-cut's pair is unsafe); only user errors (a budget no plan meets) propagate;
* a node banned from recomputation (random, effectful, mutating, reading a mutated input,
  MUST_SAVE) is never recomputed: its value is saved instead.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import torch.fx as fx

from . import _torch
from .analysis import JointGraph, analyze
from .chain import Chain
from .linearize import Linearization, linearize
from .memory import Timeline, simulate
from .options import Options
from .saved import close_over_bans, min_cut_hazards
from .schedule import recompute_just_in_time
from .solvers import Plan, get_solver

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

    @property
    def predicted_peak_bytes(self) -> int:
        chosen = self.fxremat if self.chosen == "fxremat" and self.fxremat is not None else self.min_cut
        return chosen.peak_bytes


_REPORTS: list[PartitionReport] = []


def last_reports(clear: bool = False) -> list[PartitionReport]:
    """Reports of the graphs partitioned so far in this process (newest last)."""
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
    **kwargs: Any,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """AOTAutograd ``partition_fn`` with the signature of ``min_cut_rematerialization_partition``."""
    options = options or Options()
    start = time.perf_counter()
    # Everything AOTAutograd passed; each of torch's partitioners gets the part it accepts
    # (default_partition takes no ``compiler``).
    pkw = {"num_fwd_outputs": num_fwd_outputs, "static_lifetime_input_indices": static_lifetime_input_indices, **kwargs}
    try:
        mc_fw, mc_bw = _torch.min_cut(joint_module, joint_inputs, **pkw)
    except Exception as exc:  # noqa: BLE001 - min-cut (or the copy it runs on) failed: save, never recompute
        log.warning(
            "fxremat: falling back to PyTorch's default_partition (min-cut failed): %s: %s", type(exc).__name__, exc
        )
        return _torch.default_partition_of(joint_module, joint_inputs, **pkw)
    unsafe: list[str] | None = None  # None: not known (analysis failed)
    try:
        _torch.check_supported()
        jg = analyze(joint_module, num_fwd_outputs=num_fwd_outputs, static_lifetime_input_indices=static_lifetime_input_indices)
        unsafe = min_cut_hazards(mc_fw, mc_bw, jg)
        fw, bw, report = _plan(jg, options, mc_fw, simulate(mc_fw, mc_bw, num_fwd_outputs), unsafe)
        report = replace(report, seconds=time.perf_counter() - start)
        _log_report(report)
    except BudgetError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure must fall back, loudly
        if not unsafe:  # min-cut's pair is safe, or nothing is known: what PyTorch itself would run
            log.warning("fxremat: falling back to PyTorch's min-cut partitioner: %s: %s", type(exc).__name__, exc)
            return mc_fw, mc_bw
        log.warning(
            "fxremat: falling back to PyTorch's default_partition (min-cut %s): %s: %s",
            unsafe[0], type(exc).__name__, exc,
        )
        return _torch.default_partition_of(joint_module, joint_inputs, **pkw)
    _REPORTS.append(report)
    if report.chosen == "min-cut":
        return mc_fw, mc_bw
    return fw, bw


def _plan(jg: JointGraph, options: Options, mc_fw: fx.GraphModule, mc_timeline: Timeline, unsafe: list[str]):
    joint, num_fwd_outputs = jg.module, jg.num_fwd_outputs
    by_name = {n.name: n for n in joint.graph.nodes}
    base = [by_name[name] for name in _torch.saved_names(mc_fw, num_fwd_outputs) if name in by_name]
    base_tensors = [n for n in base if not _torch.is_sym_node(n)]
    sym = list(dict.fromkeys([n for n in jg.forward if _torch.is_sym_node(n)] + [n for n in base if _torch.is_sym_node(n)]))
    always = [n for n in close_over_bans(jg, []) if not _torch.is_sym_node(n)]  # saved by every plan

    # The chain that counts the always-saved values in every segment is the faithful one (and the
    # only one a budget is checked against).  Without a budget the chain that counts them only in
    # the last segment is also solved: both are models of the real schedule and neither is always
    # closer, so the memory model's replay of the two extracted pairs decides.
    lin = linearize(jg, base_tensors, always)
    budget = options.budget_bytes(lin.chain.no_recompute_peak())
    try:
        plan = get_solver(options.solver)(lin.chain, budget)
    except ValueError as exc:
        raise BudgetError(f"fxremat: memory_budget={options.memory_budget!r}: {exc}") from None
    best = _candidate(jg, lin, plan, base_tensors, sym)
    if budget is None and always:
        lin_last = linearize(jg, base_tensors)
        other = _candidate(jg, lin_last, get_solver(options.solver)(lin_last.chain), base_tensors, sym)
        if other.timeline.peak_bytes < best.timeline.peak_bytes:
            best = other
    chain, plan, saved, fw, bw, timeline = best

    if unsafe:
        chosen, reason = "fxremat", f"min-cut {unsafe[0]}"
    elif timeline.peak_bytes < mc_timeline.peak_bytes:
        chosen, reason = "fxremat", "lower predicted peak"
    else:
        chosen, reason = "min-cut", "min-cut's predicted peak is not higher"
    report = PartitionReport(
        chosen, reason, chain.n, plan, chain.no_recompute_peak(), timeline, mc_timeline,
        tuple(n.name for n in saved), sum(chain.forward_cost), 0.0,
    )
    return fw, bw, report


class _Candidate(NamedTuple):
    chain: Chain
    plan: Plan
    saved: list[fx.Node]
    fw: fx.GraphModule
    bw: fx.GraphModule
    timeline: Timeline


def _candidate(jg: JointGraph, lin: Linearization, plan: Plan, base_tensors: list[fx.Node], sym: list[fx.Node]) -> _Candidate:
    """Saved set, extracted and scheduled graphs, and their predicted timeline for one plan."""
    saved = close_over_bans(jg, lin.saved_values(plan.checkpoints, base_tensors))
    fw, bw = _torch.extract_fwd_bwd(
        jg.module, saved, sym, num_fwd_outputs=jg.num_fwd_outputs, static_lifetime_input_nodes=jg.static_inputs
    )
    bw = recompute_just_in_time(bw, jg)
    fw, bw = _torch.replay_rng(jg.module, fw, bw, len(sym))
    return _Candidate(lin.chain, plan, saved, fw, bw, simulate(fw, bw, jg.num_fwd_outputs))


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
