"""Every solver through one table of hand-checked chains, then property tests of the exact ones.

The pattern follows PyTorch's test_ac_knapsack.py: one table, every solver; the fast solver is
checked against the obviously-right DP and against brute force over all checkpoint subsets.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fxremat.chain import Chain
from fxremat.solvers import SOLVERS, Plan, get_solver, solve_budget, solve_chen, solve_dp, solve_linear

EXACT = {"linear": solve_linear, "dp": solve_dp}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    chain: Chain
    best: tuple[int, ...]  # the exact solvers' plan (least peak, then least recomputation)
    best_peak: int
    chen: tuple[int, ...]  # the sqrt(n) plan


CASES = [
    # The liveness-aware optimum {2, 3} beats every plan the naive objective would prefer.
    Case("uniform4", Chain((1,) * 5, (2,) * 4, (0,) * 4, (1,) * 4), (2, 3), 4, (2,)),
    Case("single_stage", Chain((5, 7), (3,), (2,), (1,)), (), 5, ()),
    # Everything free: least recomputation breaks the tie, so nothing is checkpointed.
    Case("all_zero", Chain((0,) * 4, (0,) * 3, (0,) * 3, (1,) * 3), (), 0, (2,)),
    # A transient at the end dominates; one checkpoint still frees stages 1..2.
    Case("big_transient", Chain((0, 1, 1, 1), (1, 1, 1), (0, 0, 100), (1, 1, 1)), (2,), 102, (2,)),
    # Huge checkpoints: recomputing is never worth it.
    Case("huge_outputs", Chain((0, 10**15, 10**15, 0), (1, 1, 1), (0, 0, 0), (1, 1, 1)), (), 3, (2,)),
    # A cheap boundary in the middle of expensive ones is where the checkpoint goes.
    Case("cheap_middle", Chain((0, 9, 1, 9, 0), (4, 4, 4, 4), (0, 0, 0, 0), (1, 1, 1, 1)), (2,), 9, (2,)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_table(case: Case, solver: str):
    plan = get_solver(solver)(case.chain)
    assert isinstance(plan, Plan)
    assert plan.peak_bytes == case.chain.peak_bytes(plan.checkpoints)
    assert plan.recompute_cost == case.chain.recompute_cost(plan.checkpoints)
    if solver in EXACT:
        assert plan.checkpoints == case.best
        assert plan.peak_bytes == case.best_peak
    else:
        assert plan.checkpoints == case.chen
        assert plan.peak_bytes >= case.best_peak


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_table_with_budget(solver: str):
    chain = CASES[0].chain  # uniform4: peaks 8 (no checkpoint), 5 ({2}), 4 ({2, 3})
    solve = get_solver(solver)
    assert solve(chain, budget_bytes=100).checkpoints == ()
    assert solve(chain, budget_bytes=5).peak_bytes <= 5
    if solver in EXACT:
        assert solve(chain, budget_bytes=5).checkpoints == (2,)
        assert solve(chain, budget_bytes=4).checkpoints == (2, 3)
    with pytest.raises(ValueError, match="infeasible: the smallest peak .* is [45] bytes"):
        solve(chain, budget_bytes=3)


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("budget, message", [(-1, ">= 0"), (1.5, "integer"), ("1", "integer"), (True, "integer")])
def test_bad_budget(solver, budget, message):
    with pytest.raises(ValueError, match=message):
        get_solver(solver)(CASES[0].chain, budget_bytes=budget)


def test_unknown_solver():
    with pytest.raises(ValueError, match=r"unknown solver 'foo'; expected one of \['chen', 'dp', 'linear'\]"):
        get_solver("foo")


def test_solve_budget_requires_budget():
    with pytest.raises(ValueError, match="needs budget_bytes"):
        solve_budget(CASES[0].chain, None)


def test_plan_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        solve_linear(CASES[0].chain).peak_bytes = 0


# -- property tests --------------------------------------------------------------------------

# Sizes mix zeros, small values (many ties) and huge values (no float rounding allowed).
SIZE = st.one_of(st.integers(0, 3), st.integers(0, 1000), st.integers(0, 2**62))
COST = st.one_of(st.just(0.0), st.just(1.0), st.floats(0, 1e6, allow_nan=False, allow_infinity=False))


@st.composite
def chains(draw, max_n: int) -> Chain:
    n = draw(st.integers(1, max_n))
    size = draw(st.sampled_from([st.integers(0, 3), st.integers(0, 1000), SIZE]))
    return Chain(
        draw(st.lists(size, min_size=n + 1, max_size=n + 1)),
        draw(st.lists(size, min_size=n, max_size=n)),
        draw(st.lists(size, min_size=n, max_size=n)),
        draw(st.lists(COST, min_size=n, max_size=n)),
    )


def all_plans(chain: Chain):
    for r in range(chain.n):
        for cps in itertools.combinations(range(1, chain.n), r):
            yield cps, chain.peak_bytes(cps), chain.recompute_cost(cps)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(max_n=12))
def test_linear_equals_brute_force(chain: Chain):
    plan = solve_linear(chain)
    best = min((peak, cost) for _, peak, cost in all_plans(chain))
    assert (plan.peak_bytes, plan.recompute_cost) == best
    assert plan.peak_bytes == chain.peak_bytes(plan.checkpoints)
    assert plan.peak_bytes <= chain.no_recompute_peak()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(max_n=150))  # the DP is O(n^3): longer chains cost minutes, not coverage
def test_linear_equals_dp(chain: Chain):
    assert solve_linear(chain) == solve_dp(chain)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(max_n=10), st.integers(0, 2**63), st.floats(0, 1.5))
def test_budget_feasible_and_minimal(chain: Chain, raw: int, frac: float):
    plans = list(all_plans(chain))
    lo = min(p for _, p, _ in plans)
    hi = max(p for _, p, _ in plans)
    budget = [int(lo + frac * (hi - lo)), raw % (hi + 2)][raw % 2]
    feasible = [cost for _, peak, cost in plans if peak <= budget]
    if not feasible:
        for solve in EXACT.values():
            with pytest.raises(ValueError, match=f"smallest peak any plan reaches is {lo} bytes"):
                solve(chain, budget)
        return
    plan = solve_budget(chain, budget)
    assert plan.peak_bytes <= budget
    assert plan.recompute_cost == min(feasible)
    assert plan == solve_dp(chain, budget)
    chen = solve_chen(chain)
    assert chen.peak_bytes >= lo
