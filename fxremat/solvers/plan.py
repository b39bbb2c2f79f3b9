"""The one result type every solver returns, and the checks every solver shares.

Invariant: a :class:`Plan` is only ever built by :func:`make_plan`, which evaluates the chain's
own objective, so ``plan.peak_bytes == chain.peak_bytes(plan.checkpoints)`` and
``plan.recompute_cost == chain.recompute_cost(plan.checkpoints)`` hold by construction.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Iterable, Protocol

from ..chain import Chain

__all__ = ["Plan", "Solver", "make_plan", "check_budget", "infeasible_budget"]


@dataclass(frozen=True)
class Plan:
    """Checkpoints chosen for a chain, with the peak and recomputation they cost."""

    checkpoints: tuple[int, ...]
    peak_bytes: int
    recompute_cost: float


class Solver(Protocol):
    """``solve(chain, budget_bytes=None) -> Plan``.

    Without a budget: the plan of least peak (ties: least recomputation).  With a budget: the
    plan of least recomputation whose peak is at most ``budget_bytes``; a budget that no plan
    of the solver can meet raises ``ValueError``.
    """

    def __call__(self, chain: Chain, budget_bytes: int | None = None) -> Plan: ...


def make_plan(chain: Chain, checkpoints: Iterable[int]) -> Plan:
    cps = chain.checkpoints_of(checkpoints)
    return Plan(cps, chain.peak_bytes(cps), chain.recompute_cost(cps))


def check_budget(budget_bytes: int | None) -> int | None:
    """Validate a byte budget: ``None`` or an integer >= 0."""
    if budget_bytes is None:
        return None
    if isinstance(budget_bytes, bool):
        raise ValueError(f"budget_bytes must be an integer number of bytes, got {budget_bytes!r}")
    try:
        budget = operator.index(budget_bytes)
    except TypeError:
        raise ValueError(
            f"budget_bytes must be an integer number of bytes or None, got {budget_bytes!r}"
        ) from None
    if budget < 0:
        raise ValueError(f"budget_bytes must be >= 0, got {budget}")
    return budget


def infeasible_budget(budget_bytes: int, smallest_peak: int, what: str = "any plan") -> ValueError:
    return ValueError(
        f"budget_bytes={budget_bytes} is infeasible: the smallest peak {what} reaches is "
        f"{smallest_peak} bytes ({smallest_peak / 2**20:.2f} MiB)"
    )
