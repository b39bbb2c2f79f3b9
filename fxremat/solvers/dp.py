"""The reference solver: a plain dynamic program over segments, written for obviousness.

Invariant: returns exactly the plan :func:`fxremat.solvers.linear.solve_linear` returns (same
objective, same tie-breaking rule), in O(n^2) time and memory; it exists so the fast solver has something
obviously right to be tested against.
"""

from __future__ import annotations

from ..chain import Chain
from .plan import Plan, check_budget, infeasible_budget, make_plan

__all__ = ["solve_dp"]


def _segment_costs_from(chain: Chain, a: int) -> list[int]:
    """``[seg(a, a), seg(a, a+1), ..., seg(a, n)]``, by walking the segment's end to the right."""
    out, run, peak = [], 0, 0
    for i in range(a, chain.n + 1):
        run += chain.saved_bytes[i - 1]
        peak = max(peak, run + chain.transient_bytes[i - 1])
        out.append(peak)
    return out


def _min_peak(chain: Chain) -> int:
    # f[a] = least peak of stages a..n, given that x_{a-1} is held (a checkpoint or the input):
    # the first segment is a..b, then x_b is held while the rest runs.
    n, o = chain.n, chain.output_bytes
    f = [0] * (n + 2)
    for a in range(n, 0, -1):
        segs = _segment_costs_from(chain, a)
        f[a] = min(
            seg if b == n else max(seg, o[b] + f[b + 1]) for b, seg in zip(range(a, n + 1), segs)
        )
    return f[1]


def _least_recompute(chain: Chain, budget: int) -> tuple[int, ...] | None:
    # D[c] = least checkpoint bytes of a feasible plan of stages 1..c ending with a checkpoint
    # at c (D[0] = 0); ties go to the latest previous checkpoint.  Recomputation is the forward
    # cost of stages 1..c_last, so the answer is the smallest feasible c_last.
    n, o = chain.n, chain.output_bytes
    seg = [None] + [_segment_costs_from(chain, a) for a in range(1, n + 1)]  # seg[a][b - a]
    D: list[int | None] = [0] + [None] * (n - 1)
    pred = [0] * n
    for c in range(1, n):
        for prev in range(c):
            if D[prev] is None or D[prev] + seg[prev + 1][c - prev - 1] > budget:
                continue
            if D[c] is None or D[prev] + o[c] <= D[c]:
                D[c], pred[c] = D[prev] + o[c], prev
    for c_last in range(n):
        if D[c_last] is not None and D[c_last] + seg[c_last + 1][n - c_last - 1] <= budget:
            cps = []
            while c_last:
                cps.append(c_last)
                c_last = pred[c_last]
            return tuple(reversed(cps))
    return None


def solve_dp(chain: Chain, budget_bytes: int | None = None) -> Plan:
    """Exact reference solver; same contract as :func:`fxremat.solvers.solve_linear`."""
    budget = check_budget(budget_bytes)
    if budget is None:
        budget = _min_peak(chain)
    cps = _least_recompute(chain, budget)
    if cps is None:
        raise infeasible_budget(budget, _min_peak(chain))
    return make_plan(chain, cps)
