"""fxremat: liveness-optimal activation checkpointing for torch.compile.

``torch.compile(model, backend=fxremat.backend)`` lets AOTAutograd build the joint graph, plans
which activations to save and which to recompute with an exact linear-time solver over a
liveness-aware memory objective, and hands both graphs to Inductor.  See docs/design.md.
"""

from .backend import FxrematPartitioner, backend, make_backend, min_cut_backend
from .chain import Chain
from .options import Options
from .partitioner import BudgetError, PartitionReport, last_reports, partition
from .report import Report, explain
from .solvers import Plan

__all__ = [
    "backend",
    "make_backend",
    "min_cut_backend",
    "partition",
    "Options",
    "Chain",
    "Plan",
    "FxrematPartitioner",
    "PartitionReport",
    "BudgetError",
    "last_reports",
    "explain",
    "Report",
]
