"""The least-held solver (fxremat.solvers.least_held) against brute force over every checkpoint set."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_solvers import all_plans, chains

from fxremat.chain import Chain
from fxremat.solvers import solve_linear
from fxremat.solvers.least_held import held_bytes, least_held


def test_held_bytes_counts_checkpoints_and_the_last_segment():
    chain = Chain((0, 4, 5, 6), (1, 2, 3), (0, 0, 0), (1, 1, 1))
    assert held_bytes(chain, ()) == 1 + 2 + 3  # nothing recomputed: everything saved
    assert held_bytes(chain, (2,)) == 5 + 3
    assert held_bytes(chain, (1, 2)) == 4 + 5 + 3


def test_a_looser_bound_holds_less():
    # Stage 1 saves a lot; checkpointing x_1 (small) and recomputing stage 1 holds less, at a higher peak.
    chain = Chain((0, 1, 1), (100, 1), (0, 50), (1, 1))
    least = solve_linear(chain).peak_bytes
    tight, loose = least_held(chain, least), least_held(chain, 10**6)
    assert held_bytes(chain, loose.checkpoints) <= held_bytes(chain, tight.checkpoints)
    assert loose.peak_bytes <= 10**6 and tight.peak_bytes <= least


def test_a_bound_below_every_plan_is_a_clear_error():
    chain = Chain((0, 1, 1), (5, 5), (0, 0), (1, 1))
    with pytest.raises(ValueError, match="infeasible"):
        least_held(chain, solve_linear(chain).peak_bytes - 1)
    with pytest.raises(ValueError):
        least_held(chain, -1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain=chains(max_n=8), extra=st.integers(0, 3000))
def test_least_held_matches_brute_force(chain: Chain, extra: int):
    bound = solve_linear(chain).peak_bytes + extra
    within = [c for c, peak, _ in all_plans(chain) if peak <= bound]
    plan = least_held(chain, bound)
    assert plan.peak_bytes <= bound
    least = min(held_bytes(chain, c) for c in within)
    assert held_bytes(chain, plan.checkpoints) == least
    assert plan.recompute_cost == pytest.approx(min(chain.recompute_cost(c) for c in within if held_bytes(chain, c) == least))
