"""The partition function: joint graph in, forward and backward graphs with a liveness-optimal
saved set out, recomputation placed segment by segment.

Pipeline (each step its own module): :func:`~fxremat.analysis.analyze` the joint graph,
:func:`~fxremat.linearize.linearize` its forward into a chain, solve the chain, map the plan back
to saved values, close that set over values that must never be recomputed, extract the two
graphs with torch's own helper, reorder the backward, and measure both fxremat's pair and
PyTorch's min-cut pair with :func:`~fxremat.memory.simulate`.

Invariants:
* never worse than min-cut on predicted memory: if min-cut's pair has the lower (or equal)
  predicted peak, min-cut's pair is returned;
* never a silently wrong plan: any failure inside planning falls back to min-cut's pair with one
  warning naming the reason; only user errors (a budget no plan meets) propagate;
* a node banned from recomputation (random, effectful, mutating, reading a mutated input,
  MUST_SAVE) is never recomputed: its value is saved instead.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import torch.fx as fx

from . import _torch
from .analysis import JointGraph, Role, analyze
from .linearize import Linearization, linearize
from .memory import Timeline, simulate
from .options import Options
from .solvers import Plan, get_solver

__all__ = ["partition", "PartitionReport", "BudgetError", "last_reports"]

log = logging.getLogger("fxremat")


class BudgetError(ValueError):
    """The memory budget is below the smallest peak any plan reaches (a user error)."""


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
    mc_kwargs = {"num_fwd_outputs": num_fwd_outputs, "static_lifetime_input_indices": static_lifetime_input_indices}
    if "compiler" in kwargs:
        mc_kwargs["compiler"] = kwargs["compiler"]
    mc_fw, mc_bw = _torch.min_cut(joint_module, joint_inputs, **mc_kwargs)
    try:
        _torch.check_supported()
        mc_timeline = simulate(mc_fw, mc_bw, num_fwd_outputs)
        result = _plan(joint_module, num_fwd_outputs, static_lifetime_input_indices, options, mc_fw, mc_timeline)
    except BudgetError:
        raise
    except Exception as exc:  # noqa: BLE001 - any planning failure must fall back, loudly
        log.warning("fxremat: falling back to PyTorch's min-cut partitioner: %s: %s", type(exc).__name__, exc)
        return mc_fw, mc_bw
    fw, bw, report = result
    report = _with_time(report, time.perf_counter() - start)
    _REPORTS.append(report)
    _log_report(report)
    if report.chosen == "min-cut":
        return mc_fw, mc_bw
    return fw, bw


def _plan(joint, num_fwd_outputs, static_idx, options, mc_fw, mc_timeline):
    jg = analyze(joint, num_fwd_outputs=num_fwd_outputs, static_lifetime_input_indices=static_idx)
    by_name = {n.name: n for n in joint.graph.nodes}
    base = [by_name[name] for name in _torch.saved_names(mc_fw, num_fwd_outputs) if name in by_name]
    base_tensors = [n for n in base if not _torch.is_sym_node(n)]
    lin = linearize(jg, base_tensors)
    chain = lin.chain
    total_cost = sum(chain.forward_cost)

    def report(chosen, reason, plan=None, timeline=None, saved=()):
        return PartitionReport(chosen, reason, chain.n, plan, chain.no_recompute_peak(), timeline,
                               mc_timeline, tuple(saved), total_cost, 0.0)

    if chain.n < 2:
        return None, None, report("min-cut", "no stage boundary in the forward graph")
    budget = options.budget_bytes(chain.no_recompute_peak())
    try:
        plan = get_solver(options.solver)(chain, budget)
    except ValueError as exc:
        raise BudgetError(f"fxremat: memory_budget={options.memory_budget!r}: {exc}") from None

    saved = _close_over_bans(jg, lin.saved_values(plan.checkpoints, base_tensors))
    sym = [n for n in jg.forward if _torch.is_sym_node(n)] + [n for n in base if _torch.is_sym_node(n)]
    sym = list(dict.fromkeys(sym))
    fw, bw = _torch.extract_fwd_bwd(
        joint, saved, sym, num_fwd_outputs=num_fwd_outputs, static_lifetime_input_nodes=jg.static_inputs
    )
    bw = _recompute_just_in_time(bw, jg)
    timeline = simulate(fw, bw, num_fwd_outputs)
    names = tuple(n.name for n in saved)
    if timeline.peak_bytes >= mc_timeline.peak_bytes:
        return fw, bw, report("min-cut", "min-cut's predicted peak is not higher", plan, timeline, names)
    return fw, bw, report("fxremat", "lower predicted peak", plan, timeline, names)


def _close_over_bans(jg: JointGraph, saved: list[fx.Node]) -> list[fx.Node]:
    """Complete ``saved`` so the backward can run: add every input its recomputation reads, and
    save (instead of recomputing) every value whose recomputation would go through a banned node."""
    saved_set = dict.fromkeys(saved)
    facts = jg.facts
    while True:
        recomputed, inputs_read = _recomputed_nodes(jg, saved_set)
        saved_set.update(dict.fromkeys(inputs_read))
        banned = [n for n in recomputed if facts[n].recompute_ban is not None]
        if not banned:
            return list(saved_set)
        before = len(saved_set)
        for node in banned:
            if isinstance(node.meta.get("val"), (tuple, list)):  # save its outputs, not the tuple
                saved_set.update(dict.fromkeys(u for u in node.users if facts[u].role is Role.FORWARD))
            else:
                saved_set[node] = None
            log.debug("fxremat: saving %s instead of recomputing it (%s)", node.name, facts[node].recompute_ban)
        if len(saved_set) == before:
            raise RuntimeError(f"cannot avoid recomputing {banned[0].name} ({facts[banned[0]].recompute_ban})")


def _recomputed_nodes(jg: JointGraph, saved: dict[fx.Node, None]) -> tuple[set[fx.Node], set[fx.Node]]:
    """Forward nodes the backward would recompute (reached from backward nodes through unsaved
    values; a banned node is reached but not expanded, it is about to be saved), and the inputs
    that the backward and its recomputation read."""
    facts = jg.facts
    seen: set[fx.Node] = set()
    inputs_read: set[fx.Node] = set()
    backward = [n for n in jg.module.graph.nodes if facts[n].role is Role.BACKWARD]
    read_by_backward = {a for n in backward for a in n.all_input_nodes if a in jg.mutated_inputs}
    if read_by_backward:
        names = sorted(p.name for p in read_by_backward)
        raise NotImplementedError(f"the backward reads {names} after the forward mutated it")
    stack = [a for n in backward for a in n.all_input_nodes]
    while stack:
        node = stack.pop()
        if node in seen or node in saved:
            continue
        if node.op == "placeholder":
            if facts[node].role in (Role.INPUT, Role.STATIC_INPUT):
                inputs_read.add(node)
            continue
        if facts[node].role is not Role.FORWARD:
            continue
        seen.add(node)
        if facts[node].recompute_ban is None:
            stack.extend(node.all_input_nodes)
    return seen, inputs_read


def _recompute_just_in_time(bw: fx.GraphModule, jg: JointGraph) -> fx.GraphModule:
    """Reorder the backward so each recomputed value is computed right before its first use.

    Extraction puts all recomputation first (joint order), which would rebuild every segment at
    once.  Emitting a recomputed node only when a backward node needs it rebuilds one segment
    right before its own backward runs; FX's frees then drop it right after.
    """
    forward_names = {n.name for n, f in jg.facts.items() if f.role is Role.FORWARD}
    nodes = list(bw.graph.nodes)
    is_recompute = {n: n.op == "call_function" and n.name in forward_names for n in nodes}
    order: list[fx.Node] = []
    emitted: set[fx.Node] = set()

    def emit(root: fx.Node) -> None:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in emitted:
                continue
            if expanded:
                emitted.add(node)
                order.append(node)
                continue
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.all_input_nodes) if a not in emitted)

    for node in nodes:
        if node.op == "placeholder":
            emitted.add(node)
    output = bw.graph.find_nodes(op="output")[0]
    for node in nodes:
        if node.op != "placeholder" and not is_recompute[node]:
            for root in output.all_input_nodes if node is output else (node,):
                emit(root)
    for node in order:
        output.prepend(node)
    bw.graph.lint()
    bw.recompile()
    return bw


def _with_time(report: PartitionReport, seconds: float) -> PartitionReport:
    from dataclasses import replace

    return replace(report, seconds=seconds)


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
