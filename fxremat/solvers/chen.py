"""Chen et al.'s sqrt(n) rule (arXiv:1604.06174) as the classic baseline.

Invariant: checkpoints split the chain into segments of equal stage count; without a budget the
segment length is round(sqrt(n)) (O(sqrt n) memory for one extra forward); with a budget, the
longest uniform segment length whose peak meets it (least recomputation among uniform plans).
"""

from __future__ import annotations

import math

from ..chain import Chain
from .plan import Plan, check_budget, infeasible_budget, make_plan

__all__ = ["solve_chen"]


def _uniform(chain: Chain, length: int) -> Plan:
    return make_plan(chain, range(length, chain.n, length))


def solve_chen(chain: Chain, budget_bytes: int | None = None) -> Plan:
    """Uniform sqrt(n) segmentation; with a budget, the cheapest uniform plan that meets it."""
    budget = check_budget(budget_bytes)
    if budget is None:
        return _uniform(chain, max(1, round(math.sqrt(chain.n))))
    plans = [_uniform(chain, length) for length in range(chain.n, 0, -1)]
    for plan in plans:  # longest segments first: least recomputation first
        if plan.peak_bytes <= budget:
            return plan
    raise infeasible_budget(budget, min(p.peak_bytes for p in plans), "a uniform plan")
