"""The exact memory/recomputation frontier of a chain: every Pareto-optimal (peak, recompute) plan.

Invariant: :func:`frontier` returns exactly the Pareto set of ``{(chain.peak_bytes(C),
chain.recompute_cost(C)) : C}`` over all checkpoint sets C, one plan per point, peaks strictly
decreasing and costs strictly increasing; ``out[0]`` recomputes nothing (cost 0) and
``out[-1].peak_bytes`` is the least peak (``min_peak``).  For every budget B >= the least peak,
the point of least recomputation within B is the first point with ``peak_bytes <= B``, and its
cost is what :func:`~fxremat.solvers.solve_budget` recomputes at B.  The algorithm and its bound
are in ``docs/algorithm.md`` ("The frontier"); brute force over all subsets is the test.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..chain import Chain
from .linear import least_recompute, min_peak

__all__ = ["FrontierPoint", "frontier"]


@dataclass(frozen=True)
class FrontierPoint:
    """One Pareto-optimal plan: no plan has a lower peak for no more recomputation, and none
    recomputes less within the same peak."""

    peak_bytes: int
    recompute_cost: float
    checkpoints: tuple[int, ...]


def _merged_tail(chain: Chain, k: int) -> Chain:
    """Stages 1..k of ``chain`` followed by stages k+1..n merged into one stage that cannot be cut.

    The merged stage keeps ``s = S_n - S_k`` and has ``t = max(h_{k+1..n}) - S_n`` (>= t_n >= 0),
    so ``seg(a, k+1)`` of the merged chain equals ``seg(a, n)`` of the original for every a <= k+1:
    its plans are exactly the original plans whose checkpoints all lie in 1..k, with the same peaks.
    """
    n, s, t = chain.n, chain.saved_bytes, chain.transient_bytes
    if k == n - 1:
        return chain
    S = chain.saved_prefix
    tail_h = max(S[i] + t[i - 1] for i in range(k + 1, n + 1))
    return Chain(
        chain.output_bytes[: k + 1] + (chain.output_bytes[n],),
        s[:k] + (S[n] - S[k],),
        t[:k] + (tail_h - S[n],),
        chain.forward_cost[:k] + (sum(chain.forward_cost[k:]),),
    )


def frontier(chain: Chain) -> tuple[FrontierPoint, ...]:
    """The Pareto frontier of (peak, recomputation), from recomputing nothing to the least peak.

    Each step, for the budget B (first: the no-recomputation peak; then one byte below the last
    point's peak):

    1. ``c`` = least recomputation within B (:func:`least_recompute`, O(n)); none: done.
    2. ``k`` = the last boundary whose prefix cost is still ``c`` (recomputation is the forward
       cost of stages 1..last checkpoint, so "cost <= c" is "every checkpoint in 1..k").
    3. ``p`` = least peak of the plans with every checkpoint in 1..k (:func:`min_peak` of the chain
       with stages k+1..n merged, O(n)); ``p <= B``.
    4. record the least-recomputation plan within ``p`` (cost exactly ``c``, peak exactly ``p``).

    Every step records one frontier point, and the costs of the points are distinct prefix costs
    ``F[0] < F[k_1] < ...`` of boundaries 0..n-1, so there are at most n points and the whole
    frontier costs O(n) per point, O(n^2) at worst.
    """
    F = chain.cost_prefix
    out: list[FrontierPoint] = []
    budget = chain.no_recompute_peak()
    while True:
        cps = least_recompute(chain, budget)
        if cps is None:  # below the least peak
            break
        last = cps[-1] if cps else 0
        k = last
        while k + 1 <= chain.n - 1 and F[k + 1] <= F[last]:
            k += 1
        peak = min_peak(_merged_tail(chain, k))
        best = least_recompute(chain, peak)
        assert best is not None and chain.peak_bytes(best) == peak, "frontier: inconsistent solver"
        cost = chain.recompute_cost(best)
        assert cost == F[last] and peak <= budget, "frontier: inconsistent solver"
        if out:
            assert peak < out[-1].peak_bytes and cost > out[-1].recompute_cost, "frontier: not Pareto"
        out.append(FrontierPoint(peak, cost, best))
        budget = peak - 1
    return tuple(out)
