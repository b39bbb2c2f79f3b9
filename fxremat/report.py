"""``fxremat.explain``: compile a model once with fxremat and report what it planned, and why.

:func:`explain` runs one training step (forward + backward) of a model through
``torch.compile(backend=fxremat.make_backend(compiler="eager", ...))`` with the on-disk caches
disabled (a cache hit would skip the partitioner), collects the partitioner's
:class:`~fxremat.partitioner.PartitionReport` for every compiled graph, and returns them in a
frozen :class:`Report` that prints as a table, serialises to JSON and plots the predicted memory
timeline of fxremat's partition next to PyTorch's min-cut partition.  The report also carries each
graph's exact memory/recomputation frontier on the chain model (:func:`fxremat.solvers.frontier`):
:meth:`Report.frontier_text` prints it, :meth:`Report.plot_frontier` draws it.

Every number is a *prediction* of fxremat's memory model (:func:`fxremat.memory.simulate`, the
same ruler for both partitions), not a measurement.  matplotlib is needed only for
:meth:`Report.plot` (``pip install 'fxremat[plot]'``).
"""

from __future__ import annotations

import contextlib
import logging
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from . import _torch
from .memory import Timeline
from .options import Options
from .partitioner import BudgetError, PartitionReport, last_reports
from .profiling import output_loss
from .solvers.frontier import FrontierPoint, frontier

__all__ = ["explain", "Report", "captured_warnings"]

_MIB = 2**20
_PLOT_HELP = "pip install 'fxremat[plot]'"


# ------------------------------------------------------------------------------ the report
@dataclass(frozen=True)
class Report:
    """What fxremat planned for each graph of one compiled training step.

    Attributes:
        model: a name for the model (title of the printout and the plot).
        solver, memory_budget: the options the graphs were planned with.
        graphs: one :class:`~fxremat.PartitionReport` per graph the partitioner planned, in
            compilation order (several when Dynamo breaks the model into several graphs).
        warnings: the warnings fxremat logged: graphs that fell back to PyTorch's partitioner
            because planning failed (such a graph has no entry in ``graphs``), and graphs whose
            budget no plan meets (planned with the least predicted peak instead).
        seconds: wall time of the whole compile + forward + backward.
        frontiers: per graph (same order as ``graphs``), the Pareto-optimal (peak, recompute)
            plans of its chain model (:func:`fxremat.solvers.frontier`), from recomputing nothing
            to the least peak; ``None`` where the partitioner's report carries no chain.
    """

    model: str
    solver: str
    memory_budget: int | float | None
    graphs: tuple[PartitionReport, ...]
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0
    frontiers: tuple[tuple[FrontierPoint, ...] | None, ...] = ()

    # -- text ----------------------------------------------------------------------------------
    def __str__(self) -> str:
        n = len(self.graphs)
        lines = [
            f"fxremat explain: {self.model}",
            f"solver={self.solver}  memory_budget={self.memory_budget!r}  compiler=eager  "
            f"{n} graph{'s' if n != 1 else ''} planned  ({self.seconds:.1f} s for compile + forward + backward)",
        ]
        for i, r in enumerate(self.graphs):
            lines.append("")
            lines.extend(self._graph_lines(i, r))
        fallbacks = [w for w in self.warnings if "falling back" in w]
        if fallbacks:
            lines.append("")
            lines.append(f"warnings: {len(fallbacks)} graph(s) fell back to PyTorch's partitioner (not listed above):")
            lines.extend(f"  {w}" for w in fallbacks)
        others = [w for w in self.warnings if "falling back" not in w]
        if others:
            lines.append("")
            lines.append("warnings:")
            lines.extend(f"  {w}" for w in others)
        lines.append("")
        lines.append(
            "Peaks are predictions, not measurements.  'whole step': fxremat's replay of both graphs, node by\n"
            "node (everything the step allocates; the same ruler for both partitions).  'chain model': only the\n"
            "activations fxremat plans over, the objective its solver minimises and memory_budget constrains.\n"
            "Times are estimates of a roofline model (fxremat.timing: FLOPs and bytes moved at nominal rates),\n"
            "good for comparing plans that differ by more than a few percent, not for predicting seconds."
        )
        return "\n".join(lines)

    def _graph_lines(self, i: int, r: PartitionReport) -> list[str]:
        mc = r.min_cut.peak_bytes
        nr = r.chain_no_recompute_peak
        out = [f"graph {i + 1} of {len(self.graphs)}: chose {r.chosen} ({r.reason})"]
        if r.fragment:
            out.append(f"  {'graph fragment':<18}{r.fragment}; held into the backward {_mib(r.timeline.held_bytes).strip()}"
                       f" (min-cut's pair: {_mib(r.min_cut.held_bytes).strip()})")
        out.append(f"  {'stages found':<18}{r.stages} ({max(r.stages - 1, 0)} boundaries where the forward can be cut)")
        if r.plan is None:
            out.append(f"  {'checkpoints':<18}none (no plan)")
        else:
            cps = r.plan.checkpoints
            shown = ", ".join(map(str, cps)) if cps else "none (everything saved)"
            out.append(f"  {'checkpoints':<18}{len(cps)}: {shown}" if cps else f"  {'checkpoints':<18}{shown}")
            out.append(f"  {'values saved':<18}{len(r.saved)} (forward -> backward)")
        fx = r.fxremat.peak_bytes if r.fxremat is not None else None
        fx_text = f"{_mib(fx):>11}   {_ratio(fx, mc)} min-cut" if fx is not None else f"{'-':>11}   (no plan)"
        out.append(f"  {'predicted peak':<18}{'fxremat':<19}{fx_text}")
        out.append(f"  {' (whole step)':<18}{'min-cut (PyTorch)':<19}{_mib(mc):>11}")
        if r.plan is not None:
            plan_peak = r.plan.peak_bytes
            out.append(
                f"  {'chain model':<18}{'fxremat plan':<19}{_mib(plan_peak):>11}   {_ratio(plan_peak, nr)} no recomputation"
            )
        out.append(f"  {' (activations)' if r.plan is not None else 'chain model':<18}{'no recomputation':<19}{_mib(nr):>11}")
        if r.plan is not None:
            share = r.plan.recompute_cost / r.forward_cost if r.forward_cost else 0.0
            unused = "" if r.chosen == "fxremat" else " (plan not used)"
            out.append(
                f"  {'recompute':<18}{100 * share:.0f}% of one forward "
                f"(est. {_time(r.plan.recompute_cost)} of {_time(r.forward_cost)}){unused}"
            )
        if r.step is not None and r.min_cut_step is not None:
            out.append(
                f"  {'step (estimate)':<18}{'fxremat':<19}{_time(r.step.step_s):>11}   "
                f"{r.step.step_s / r.min_cut_step.step_s if r.min_cut_step.step_s else 1.0:.2f}x min-cut's "
                f"{_time(r.min_cut_step.step_s)}"
            )
        budget = _budget_text(self.solver, self.memory_budget, _budget_bytes(r, self))
        if r.budget_met is False:
            budget += "; no plan meets it: least predicted peak instead"
        out.append(f"  {'budget':<18}{budget}")
        out.append(f"  {'planning time':<18}{r.seconds:.2f} s")
        points = self._frontier(i)
        if points:
            total = _forward_total(r)
            out.append(
                f"  {'frontier':<18}{len(points)} plan{'s' if len(points) != 1 else ''} (chain model): "
                f"{_mib(points[0].peak_bytes)} at {_share(points[0].recompute_cost, total)} recompute .. "
                f"{_mib(points[-1].peak_bytes)} at {_share(points[-1].recompute_cost, total)} "
                "(--sweep / Report.frontier_text())"
            )
        return out

    # -- the frontier ------------------------------------------------------------------------
    def _frontier(self, i: int) -> tuple[FrontierPoint, ...] | None:
        return self.frontiers[i] if i < len(self.frontiers) else None

    def frontier_text(self, max_rows: int = 12) -> str:
        """Each graph's frontier as a table: chain-model peak and recomputation (% of one forward)
        of every Pareto-optimal plan (at most ``max_rows`` rows per graph, evenly spread, both ends
        always shown), with min-cut's default and fxremat's chosen plan named beside it."""
        lines = [f"fxremat frontier (chain model, exact): {self.model}"]
        for i, r in enumerate(self.graphs):
            lines.append("")
            lines.extend(self._frontier_lines(i, r, max_rows))
        lines.append("")
        lines.append(
            "Each row is a Pareto-optimal plan of the chain model: no plan has a lower peak for no more\n"
            "recomputation.  Any budget between two rows gets the lower row's recomputation.  'peak (chain)'\n"
            "counts the activations fxremat plans over (what memory_budget constrains); the 'whole step' peaks\n"
            "of min-cut and of fxremat's plan replay both graphs node by node (everything the step allocates)."
        )
        return "\n".join(lines)

    def _frontier_lines(self, i: int, r: PartitionReport, max_rows: int) -> list[str]:
        head = f"graph {i + 1} of {len(self.graphs)}"
        points = self._frontier(i)
        if not points:
            return [f"{head}: frontier: not available (the partitioner's report carries no chain)"]
        total = _forward_total(r)
        fx = f"{_mib(r.fxremat.peak_bytes)} whole step" if r.fxremat is not None else "none"
        out = [
            f"{head}: {len(points)} Pareto-optimal plan{'s' if len(points) != 1 else ''}; "
            f"min-cut default (PyTorch): {_mib(r.min_cut.peak_bytes)} whole step; "
            f"fxremat's plan: {fx}{' (min-cut chosen)' if r.chosen == 'min-cut' else ''}",
            f"  {'peak (chain)':>14}  {'recompute':>10}  checkpoints",
        ]
        rows = _spread(len(points), max_rows)
        for k in rows:
            p = points[k]
            shown = ", ".join(map(str, p.checkpoints)) if p.checkpoints else "none"
            shown = textwrap.shorten(f"{len(p.checkpoints)}: {shown}" if p.checkpoints else shown, 48, placeholder=" ...")
            mark = "   <- fxremat's plan" if _on_frontier(r, (p,)) else ""
            out.append(f"  {_mib(p.peak_bytes):>14}  {_share(p.recompute_cost, total):>10}  {shown}{mark}")
        if len(rows) < len(points):
            out.append(f"  ({len(rows)} of {len(points)} plans shown; all of them in --json)")
        return out

    def plot_frontier(self, path: str | Path) -> Path:
        """Draw each graph's frontier, peak (MiB) against recomputation (% of one forward), to ``path``.

        The staircase is the chain model's least peak for each amount of recomputation; min-cut's
        default point and fxremat's chosen plan are marked on the whole-step ruler (the replay of
        both graphs), which also counts what the chain model does not.  Needs matplotlib.
        """
        fig, axes = self._figure("Report.plot_frontier", 9, 4.6)
        n = len(self.graphs)
        for i, (ax, r) in enumerate(zip(axes, self.graphs)):
            _plot_frontier(ax, i, n, r, self._frontier(i))
        title = "fxremat: least predicted peak for each amount of recomputation"
        fig.suptitle(title + "\n" + textwrap.shorten(self.model, 110), fontsize=12)
        path = Path(path)
        fig.savefig(path, dpi=110)
        return path

    def _figure(self, what: str, width: float, height_per_graph: float):
        """A matplotlib figure with one panel per graph (clear errors without matplotlib or graphs)."""
        try:
            from matplotlib.figure import Figure
        except ImportError as exc:
            raise RuntimeError(f"{what} needs matplotlib, which is not installed: {_PLOT_HELP}") from exc
        if not self.graphs:
            raise ValueError("nothing to plot: no graph was planned" + (
                f" ({len(self.warnings)} fell back to PyTorch's partitioner)" if self.warnings else ""))
        n = len(self.graphs)
        fig = Figure(figsize=(width, height_per_graph * n + 0.8), layout="constrained")
        return fig, fig.subplots(n, 1, squeeze=False)[:, 0]

    # -- json ----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict: options, and per graph the plan, the peaks and both timelines."""
        return {
            "model": self.model,
            "solver": self.solver,
            "memory_budget": self.memory_budget,
            "compiler": "eager",
            "seconds": self.seconds,
            "warnings": list(self.warnings),
            "graphs": [_graph_json(i, r, self) for i, r in enumerate(self.graphs)],
        }

    # -- plot ----------------------------------------------------------------------------------
    def plot(self, path: str | Path) -> Path:
        """Draw the predicted memory timelines of fxremat and min-cut to ``path`` (PNG, SVG, ...).

        One panel per graph.  The two partitions run different numbers of nodes, so x is the
        position within each phase: the forward spans [0, 1], the backward [1, 2], and the
        forward/backward boundary is the dashed line at x = 1 for both.  Needs matplotlib.
        """
        fig, axes = self._figure("Report.plot", 11, 4.2)
        n = len(self.graphs)
        for i, (ax, r) in enumerate(zip(axes, self.graphs)):
            _plot_graph(ax, i, n, r, self)
        title = "fxremat vs PyTorch's min-cut: predicted memory over one training step"
        fig.suptitle(title + "\n" + textwrap.shorten(self.model, 110), fontsize=12)
        path = Path(path)
        fig.savefig(path, dpi=110)
        return path


def _mib(nbytes: float) -> str:
    return f"{nbytes / _MIB:.2f} MiB"


def _time(seconds: float) -> str:
    """An estimate of :mod:`fxremat.timing`, in its unit."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return f"{seconds / scale:.2f} {unit}"
    return f"{seconds / 1e-6:.1f} us"


def _share(cost: float, total: float) -> str:
    return f"{100 * cost / total:.1f}%" if total else "0.0%"


def _forward_total(r: PartitionReport) -> float:
    """One forward's cost: of the report's chain where it has one (the frontier's), else the report's."""
    chain = getattr(r, "chain", None)
    return chain.cost_prefix[-1] if chain is not None else r.forward_cost


def _on_frontier(r: PartitionReport, points: tuple[FrontierPoint, ...]) -> bool:
    """Whether the report's plan is one of ``points`` (it may be a plan of another chain model)."""
    return r.plan is not None and any(
        p.checkpoints == r.plan.checkpoints and p.peak_bytes == r.plan.peak_bytes for p in points)


def _spread(n: int, rows: int) -> list[int]:
    """At most ``rows`` indices of 0..n-1, evenly spread, first and last included."""
    if n <= rows:
        return list(range(n))
    return sorted({round(j * (n - 1) / (rows - 1)) for j in range(rows)})


def _frontier_json(points: tuple[FrontierPoint, ...] | None, total: float) -> list[dict[str, Any]] | None:
    if points is None:
        return None
    return [
        {
            "peak_bytes": p.peak_bytes,
            "recompute_cost": p.recompute_cost,
            "recompute_share": p.recompute_cost / total if total else 0.0,
            "checkpoints": list(p.checkpoints),
        }
        for p in points
    ]


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}x" if b else "-"


def _budget_bytes(r: PartitionReport, rep: Report) -> int | None:
    """The graph's budget in bytes on the chain model (as planned; derived for older reports)."""
    if r.budget_bytes is not None or rep.memory_budget is None:
        return r.budget_bytes
    return Options(rep.solver, rep.memory_budget).budget_bytes(r.chain_no_recompute_peak)


def _budget_text(solver: str, budget: int | float | None, nbytes: int | None) -> str:
    if budget is None:
        return "none (least peak, then the lowest level for the stages that do not force it, then least recomputation)"
    if isinstance(budget, float):
        return f"{_mib(nbytes)} ({budget:g} x the no-recomputation peak; least recomputation within it)"
    return f"{_mib(nbytes)} ({budget} bytes; least recomputation within it)"


def _timeline_json(t: Timeline | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {
        "labels": list(t.labels),
        "bytes_alive": list(t.bytes_alive),
        "forward_steps": t.forward_steps,
        "peak_bytes": t.peak_bytes,
        "peak_step": t.peak_step,
    }


def _graph_json(i: int, r: PartitionReport, rep: Report) -> dict[str, Any]:
    budget = _budget_bytes(r, rep)
    return {
        "index": i,
        "chosen": r.chosen,
        "reason": r.reason,
        "fragment": r.fragment,
        "held_bytes": r.timeline.held_bytes,
        "stages": r.stages,
        "plan": None if r.plan is None else {
            "checkpoints": list(r.plan.checkpoints),
            "chain_peak_bytes": r.plan.peak_bytes,
            "recompute_cost": r.plan.recompute_cost,
            "recompute_share": r.plan.recompute_cost / r.forward_cost if r.forward_cost else 0.0,
        },
        "forward_cost": r.forward_cost,
        "budget_bytes": budget,
        "budget_met": r.budget_met,
        "predicted_peak_bytes": {
            "chosen": r.predicted_peak_bytes,
            "fxremat": r.fxremat.peak_bytes if r.fxremat is not None else None,
            "min_cut": r.min_cut.peak_bytes,
            "no_recompute_chain": r.chain_no_recompute_peak,
        },
        "saved": list(r.saved),
        "predicted_step_s": {  # fxremat.timing's estimate of each pair's step
            "chosen": r.predicted_step_s,
            "fxremat": r.step.step_s if r.step is not None else None,
            "min_cut": r.min_cut_step.step_s if r.min_cut_step is not None else None,
        },
        "seconds": r.seconds,
        "timelines": {"fxremat": _timeline_json(r.fxremat), "min_cut": _timeline_json(r.min_cut)},
        "frontier": _frontier_json(rep._frontier(i), _forward_total(r)),
    }


def _phase_points(t: Timeline) -> tuple[list[float], list[float]]:
    """(x, MiB) of the steps to draw: the forward spread over (0, 1], the backward over (1, 2].

    Each phase starts with its graph's placeholders, which allocate nothing (the forward's
    inputs belong to the caller, the backward's saved values are already alive), so the leading
    steps that leave the bytes alive unchanged are not drawn: x runs over the phase's work.
    """
    ys = t.bytes_alive
    f = t.forward_steps

    def kept(lo: int, hi: int, level: int) -> range:
        k = lo
        while k < hi - 1 and ys[k] == level:
            k += 1
        return range(k, hi)

    fw = kept(0, f, 0)
    bw = kept(f, len(ys), ys[f]) if len(ys) > f else range(0)
    xs = [0.0] + [(j + 1) / len(fw) for j in range(len(fw))] + [1 + (j + 1) / len(bw) for j in range(len(bw))]
    vals = [0.0] + [ys[k] / _MIB for k in fw] + [ys[k] / _MIB for k in bw]
    return xs, vals


def _plot_graph(ax, i: int, n: int, r: PartitionReport, rep: Report) -> None:
    series = [("fxremat", r.fxremat, "tab:blue", 3, 8), ("min-cut (PyTorch)", r.min_cut, "tab:orange", 2, 24)]
    top = max(t.peak_bytes for _, t, _, _, _ in series if t is not None) / _MIB
    for name, t, color, z, dy in series:
        if t is None:
            continue
        xs, ys = _phase_points(t)
        f, b = t.forward_steps, len(t.bytes_alive) - t.forward_steps
        ax.plot(xs, ys, color=color, lw=1.6, zorder=z, label=f"{name}: {f} forward + {b} backward nodes")
        peak = max(range(1, len(ys)), key=ys.__getitem__)
        px, py = xs[peak], ys[peak]
        ax.plot([px], [py], "o", color=color, ms=6, zorder=z + 2)
        left = px > 1.5  # keep the label inside the axes
        ax.annotate(
            f"{name.split()[0]} peak {py:.2f} MiB", (px, py), xytext=(-12 if left else 12, dy),
            textcoords="offset points", ha="right" if left else "left", va="bottom", color=color, fontsize=9,
            fontweight="bold", arrowprops={"arrowstyle": "-", "color": color, "lw": 0.8}, zorder=z + 2,
        )
    if rep.memory_budget is not None:
        budget = _budget_bytes(r, rep) / _MIB
        ax.axhline(budget, color="tab:red", ls="--", lw=1, label=f"memory budget, on the chain model ({budget:.2f} MiB)")
        top = max(top, budget)
    ax.axvline(1.0, color="black", ls="--", lw=1.2)
    phases = ax.secondary_xaxis("top")
    phases.set_xticks([0.5, 1.0, 1.5], labels=["forward", "forward | backward boundary", "backward"])
    phases.tick_params(length=0, labelsize=10)
    ax.set_xlim(0, 2)
    ax.set_ylim(0, top * 1.3 if top > 0 else 1)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2])
    ax.set_xticklabels(["0%", "25%", "50%", "75%", "100% | 0%", "25%", "50%", "75%", "100%"])
    ax.set_xlabel("progress through each phase (share of its nodes run; inputs not drawn): forward | backward")
    ax.set_ylabel("bytes alive (MiB)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    head = f"graph {i + 1} of {n}: " if n > 1 else ""
    fx_peak = r.fxremat.peak_bytes if r.fxremat is not None else None
    vs = f"fxremat {_ratio(fx_peak, r.min_cut.peak_bytes)} min-cut's peak" if fx_peak is not None else "no fxremat plan"
    cps = len(r.plan.checkpoints) if r.plan is not None else 0
    ax.set_title(f"{head}{r.stages} stages, {cps} checkpoint{'' if cps == 1 else 's'}; chose {r.chosen}; {vs}",
                 fontsize=11)


def _plot_frontier(ax, i: int, n: int, r: PartitionReport, points: tuple[FrontierPoint, ...] | None) -> None:
    head = f"graph {i + 1} of {n}: " if n > 1 else ""
    if not points:
        ax.text(0.5, 0.5, "frontier not available (the partitioner's report carries no chain)",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_title(f"{head}{r.stages} stages", fontsize=11)
        return
    total = _forward_total(r)
    xs = [100 * p.recompute_cost / total if total else 0.0 for p in points]
    ys = [p.peak_bytes / _MIB for p in points]
    ax.step(xs, ys, where="post", color="tab:blue", lw=1.6, zorder=3,
            label=f"fxremat frontier, chain model ({len(points)} Pareto-optimal plans)")
    ax.plot(xs, ys, "o", color="tab:blue", ms=4, zorder=4)
    share = (r.plan.recompute_cost / r.forward_cost if r.forward_cost else 0.0) if r.plan is not None else 0.0
    if _on_frontier(r, points):
        ax.plot([100 * share], [r.plan.peak_bytes / _MIB], "o", color="tab:blue", ms=9, mfc="none", mew=2, zorder=5,
                label=f"fxremat's plan, chain model ({r.plan.peak_bytes / _MIB:.2f} MiB)")
    mc = r.min_cut.peak_bytes / _MIB
    ax.axhline(mc, color="tab:orange", ls="--", lw=1, zorder=2)
    ax.plot([0.0], [mc], "s", color="tab:orange", ms=9, zorder=5,
            label=f"min-cut default (PyTorch), whole step: {mc:.2f} MiB at ~0% (recomputes only cheap ops)")
    top = max(ys[0], mc)
    if r.fxremat is not None:
        fx = r.fxremat.peak_bytes / _MIB
        ax.plot([100 * share], [fx], "D", color="tab:green", ms=8, zorder=5,
                label=f"fxremat's plan, whole step: {fx:.2f} MiB at {100 * share:.0f}%"
                + (" (min-cut chosen)" if r.chosen == "min-cut" else ""))
        top = max(top, fx)
    ax.set_xlim(-3, max(103.0, xs[-1] + 3))
    ax.set_ylim(0, top * 1.25 if top > 0 else 1)
    ax.set_xlabel("recomputation (% of one forward's estimated time)")
    ax.set_ylabel("predicted peak (MiB)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8.5)
    ax.set_title(f"{head}{r.stages} stages: {ys[0]:.2f} MiB at 0% down to {ys[-1]:.2f} MiB at {xs[-1]:.0f}% (chain model)",
                 fontsize=11)


def _frontiers(reports: tuple[PartitionReport, ...]) -> tuple[tuple[FrontierPoint, ...] | None, ...]:
    """Each report's chain frontier (``None`` where the report carries no chain)."""
    out = []
    for r in reports:
        chain = getattr(r, "chain", None)
        out.append(frontier(chain) if chain is not None else None)
    return tuple(out)


# ------------------------------------------------------------------------------ explain
@contextlib.contextmanager
def captured_warnings() -> Iterator[list[str]]:
    """Collect the messages of the warnings fxremat logs inside the block (its fallbacks: a graph
    it could not plan and handed to PyTorch's partitioner)."""
    messages: list[str] = []

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = _Handler(logging.WARNING)
    logger = logging.getLogger("fxremat")
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


@contextlib.contextmanager
def _restore_state(model: Any):
    """Leave an ``nn.Module``'s gradients and buffers (e.g. BatchNorm statistics) as they were."""
    if not isinstance(model, torch.nn.Module):
        yield
        return
    params = [p for p in model.parameters()]
    grads = [p.grad for p in params]
    for p in params:
        p.grad = None  # the step's gradients accumulate into fresh tensors, the old ones stay intact
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    try:
        yield
    finally:
        for p, g in zip(params, grads):
            p.grad = g
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


def explain(
    model: torch.nn.Module | Callable[..., Any],
    *example_inputs: Any,
    solver: str = "linear",
    memory_budget: int | float | None = None,
    name: str | None = None,
    strict_budget: bool = False,
    recomputable_ops: tuple[Any, ...] = (),
) -> Report:
    """Compile ``model`` with fxremat, run one forward + backward, and report each graph's plan.

    Args:
        model: an ``nn.Module`` (or a function) whose output contains at least one floating
            tensor that requires grad; the loss is the sum of ``.float().sum()`` of those.
        example_inputs: the positional inputs of one step.
        solver, memory_budget, strict_budget, recomputable_ops: as in :func:`fxremat.make_backend`
            (validated before compiling; a bad value raises ``ValueError`` naming what is allowed).
        name: the model's name in the printout and the plot (default: its class name).

    Returns a :class:`Report`.  With ``strict_budget=True``, raises :class:`fxremat.BudgetError`
    (unwrapped from Dynamo's ``BackendCompilerFailed``) if ``memory_budget`` is below the smallest
    peak any plan of a graph reaches; otherwise such a graph is planned with its least predicted
    peak and the warning is in ``report.warnings``.

    Side effects: resets Dynamo (``torch.compiler.reset()``) before and after, so other compiled
    functions recompile on their next call; disables the FX-graph and AOTAutograd caches while it
    runs; restores the module's gradients and buffers afterwards (inputs it mutates stay mutated).
    """
    from .backend import make_backend

    Options(solver, memory_budget, strict_budget, recomputable_ops)  # validate before any compile work
    backend = make_backend(solver, memory_budget, compiler="eager", strict_budget=strict_budget,
                           recomputable_ops=recomputable_ops)
    if name is None:
        name = type(model).__name__ if isinstance(model, torch.nn.Module) else getattr(model, "__name__", repr(model))
    torch.compiler.reset()
    last_reports(clear=True)
    start = time.perf_counter()
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(_torch.caches_disabled())
            stack.enter_context(_restore_state(model))
            warned = stack.enter_context(captured_warnings())
            compiled = torch.compile(model, backend=backend)
            try:
                loss = output_loss(compiled(*example_inputs))
                if loss is None:
                    raise ValueError(
                        "explain needs a training step: no floating-point output of the model requires "
                        "grad (check requires_grad on its parameters and inputs, and torch.no_grad())"
                    )
                loss.backward()
            except Exception as exc:
                budget = BudgetError.behind(exc)
                if budget is not None:
                    raise budget from None
                raise
        seconds = time.perf_counter() - start
        reports = tuple(last_reports(clear=True))
    finally:
        torch.compiler.reset()
    if not reports and not warned:
        raise RuntimeError(
            "fxremat planned no graph: nothing reached the partitioner (was the step served from a cache, "
            "or did every graph run without autograd?)"
        )
    return Report(name, solver, Options(solver, memory_budget).memory_budget, reports,
                  tuple(warned), seconds, _frontiers(reports))
