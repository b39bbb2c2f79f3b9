"""solvers.dominant.spare_dominant: least peak first, then the least level of the stages that do
not force it, then least recomputation; checked against brute force over every checkpoint set."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from fxremat.chain import Chain
from fxremat.solvers import solve_dp, solve_linear
from fxremat.solvers.dominant import DOMINANT_SHARE, spare_dominant
from fxremat.solvers.linear import min_peak


def _level(chain: Chain, cps, dominant) -> int:
    """Max over the non-dominant stages of their backward's bytes under plan ``cps``."""
    level, held, s, t = 0, 0, chain.saved_bytes, chain.transient_bytes
    for a, b in chain.segments(cps):
        acc = 0
        for i in range(a, b + 1):
            acc += s[i - 1]
            if not dominant[i - 1]:
                level = max(level, held + acc + t[i - 1])
        held += chain.output_bytes[b]
    return level


@st.composite
def chains(draw, max_n: int = 9):
    n = draw(st.integers(1, max_n))
    size = st.integers(0, 40)
    out = [0, *draw(st.lists(size, min_size=n - 1, max_size=n - 1)), 0]
    saved = draw(st.lists(size, min_size=n, max_size=n))
    transient = draw(st.lists(st.integers(0, 120), min_size=n, max_size=n))
    cost = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    return Chain(out, saved, transient, cost)


@settings(max_examples=1500, deadline=None)
@given(chains())
def test_spare_dominant_matches_brute_force(chain):
    plan = spare_dominant(chain, solve_linear)
    p1 = min_peak(chain)
    assert plan.peak_bytes == p1 == chain.peak_bytes(plan.checkpoints)
    dominant = [s + t >= DOMINANT_SHARE * p1 for s, t in zip(chain.saved_bytes, chain.transient_bytes)]
    if not any(dominant) or all(dominant):
        assert plan == solve_linear(chain)
        return
    subsets = [c for k in range(chain.n) for c in combinations(range(1, chain.n), k) if chain.peak_bytes(c) == p1]
    best_level = min(_level(chain, c, dominant) for c in subsets)
    assert _level(chain, plan.checkpoints, dominant) == best_level
    assert plan.recompute_cost == min(chain.recompute_cost(c) for c in subsets if _level(chain, c, dominant) == best_level)


@settings(max_examples=200, deadline=None)
@given(chains(max_n=40))
def test_spare_dominant_same_with_dp(chain):
    a, b = spare_dominant(chain, solve_linear), spare_dominant(chain, solve_dp)
    assert (a.peak_bytes, a.recompute_cost) == (b.peak_bytes, b.recompute_cost)


def test_dominant_stage_no_longer_lets_the_rest_rise():
    """A first stage that needs 70 on its own (a stem with a large activation) and five small
    stages: least peak alone checkpoints once and lets the rest rise to 61; levelled, every small
    stage's backward stays at 25, at the same peak."""
    chain = Chain([0, 1, 1, 1, 1, 1, 0], [60, 10, 10, 10, 10, 10], [10] * 6, [1] * 6)
    plain, spared = solve_linear(chain), spare_dominant(chain, solve_linear)
    assert plain.peak_bytes == spared.peak_bytes == 70
    dominant = [True] + [False] * 5
    assert (_level(chain, plain.checkpoints, dominant), _level(chain, spared.checkpoints, dominant)) == (61, 25)
    assert spared.checkpoints == (1, 2, 3, 4, 5)
