"""User options of the partitioner, validated once into a frozen record.

Invariant: an :class:`Options` instance is always valid (a bad value raises ``ValueError`` at
construction naming what is allowed), is hashable, and its :meth:`Options.cache_key` covers every
field, so two partitioners with different options never share a cached graph.
"""

from __future__ import annotations

import math
import operator
from dataclasses import asdict, dataclass

from .solvers import SOLVERS

__all__ = ["Options"]


@dataclass(frozen=True)
class Options:
    """How fxremat plans a graph.

    Args:
        solver: ``"linear"`` (exact, O(n)), ``"dp"`` (exact reference, O(n^2)) or ``"chen"``
            (uniform sqrt(n) segments).
        memory_budget: ``None`` for the least peak; an ``int`` number of bytes; or a ``float``
            in (0, 1], a fraction of the peak without recomputation.  With a budget fxremat
            recomputes as little as it can while keeping the chain's predicted peak within it.
            The budget applies to each compiled graph on its own.
        strict_budget: what happens to a graph whose budget no plan meets.  ``False`` (default):
            best effort, the plan of least predicted peak runs and one warning says so.
            ``True``: :class:`fxremat.BudgetError` (the compile fails).
    """

    solver: str = "linear"
    memory_budget: int | float | None = None
    strict_budget: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.solver, str) or self.solver not in SOLVERS:
            raise ValueError(f"unknown solver {self.solver!r}; expected one of {sorted(SOLVERS)}")
        if not isinstance(self.strict_budget, bool):
            raise ValueError(f"strict_budget must be True or False; got {self.strict_budget!r}")
        budget = self.memory_budget
        if budget is None:
            return
        if isinstance(budget, bool):
            raise ValueError(_BUDGET_HELP.format(budget=budget))
        if isinstance(budget, float):
            if not (math.isfinite(budget) and 0.0 < budget <= 1.0):
                raise ValueError(_BUDGET_HELP.format(budget=budget))
            return
        try:
            as_int = operator.index(budget)
        except TypeError:
            raise ValueError(_BUDGET_HELP.format(budget=budget)) from None
        if as_int < 0:
            raise ValueError(_BUDGET_HELP.format(budget=budget))
        object.__setattr__(self, "memory_budget", as_int)

    def budget_bytes(self, no_recompute_peak: int) -> int | None:
        """The budget in bytes for a graph whose peak without recomputation is given."""
        if isinstance(self.memory_budget, float):
            return int(self.memory_budget * no_recompute_peak)
        return self.memory_budget

    def cache_key(self) -> str:
        return ",".join(f"{k}={v!r}" for k, v in sorted(asdict(self).items()))


_BUDGET_HELP = (
    "memory_budget must be None (least peak), an int number of bytes >= 0, or a float "
    "fraction in (0, 1] of the peak without recomputation; got {budget!r}"
)
