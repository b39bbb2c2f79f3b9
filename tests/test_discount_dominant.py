"""solvers.dominant.discount_dominant: the loss-head candidates' chain (the dominant tail's excess
over the other stages' highest bound kept at a share ``keep``).

Invariants checked on random chains (the strategy of tests/test_dominant.py) and a hand-made one:
None when no stage dominates or the first stage does; ``keep`` outside [0, 1] is a ValueError;
``keep=1`` gives the chain back; only the transients of the tail (the first dominant stage and
every later one) change, they never rise and never go negative, and they fall monotonically as
``keep`` falls; ``keep=0`` never raises the least peak and brings each tail stage, counted with
the tail as one segment, down to the level of the other stages (or to 0 transient).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dominant import chains

from fxremat.chain import Chain
from fxremat.solvers import get_solver, solve_dp, solve_linear
from fxremat.solvers.dominant import DOMINANT_SHARE, discount_dominant
from fxremat.solvers.linear import min_peak

KEEPS = st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0, allow_nan=False))


def _bounds(chain: Chain) -> list[int]:
    return [s + t for s, t in zip(chain.saved_bytes, chain.transient_bytes)]


def _first_dominant(chain: Chain, share: float = DOMINANT_SHARE) -> int | None:
    """0-based index of the first stage whose own bound reaches ``share`` of the least peak."""
    p1 = min_peak(chain)
    return next((i for i, b in enumerate(_bounds(chain)) if b >= share * p1), None)


def _tail(chain: Chain, first: int):
    """(stage index, saved bytes of the tail up to and including it) for every tail stage."""
    held = 0
    for i in range(first, chain.n):
        held += chain.saved_bytes[i]
        yield i, held


@settings(max_examples=600, deadline=None)
@given(chains(max_n=12), KEEPS)
def test_none_exactly_when_no_stage_or_the_first_dominates(chain, keep):
    first = _first_dominant(chain)
    out = discount_dominant(chain, solve_linear, keep)
    if first is None or first == 0:
        assert out is None
    else:
        assert isinstance(out, Chain) and out.n == chain.n


@settings(max_examples=600, deadline=None)
@given(chains(max_n=12), KEEPS)
def test_only_tail_transients_change_and_never_rise_or_go_negative(chain, keep):
    out = discount_dominant(chain, solve_linear, keep)
    if out is None:
        return
    first = _first_dominant(chain)
    assert out.output_bytes == chain.output_bytes
    assert out.saved_bytes == chain.saved_bytes
    assert out.forward_cost == chain.forward_cost
    assert out.transient_bytes[:first] == chain.transient_bytes[:first], "stages before the first dominant one changed"
    for new, old in zip(out.transient_bytes, chain.transient_bytes):
        assert 0 <= new <= old
    # A tail stage already within the level (counted with the tail as one segment) is untouched.
    level = max(_bounds(chain)[:first])
    for i, held in _tail(chain, first):
        if held + chain.transient_bytes[i] <= level:
            assert out.transient_bytes[i] == chain.transient_bytes[i], i


@settings(max_examples=600, deadline=None)
@given(chains(max_n=12))
def test_keep_one_is_the_input_chain(chain):
    out = discount_dominant(chain, solve_linear, 1.0)
    assert out is None or out == chain


@settings(max_examples=600, deadline=None)
@given(chains(max_n=12))
def test_keep_zero_never_raises_the_least_peak_and_levels_the_tail(chain):
    out = discount_dominant(chain, solve_linear, 0.0)
    if out is None:
        return
    least = get_solver("linear")
    assert least(out).peak_bytes <= least(chain).peak_bytes
    first = _first_dominant(chain)
    level = max(_bounds(chain)[:first])
    for i, held in _tail(chain, first):
        # all of the excess over the level is dropped, unless the transient runs out first
        assert held + out.transient_bytes[i] <= max(level, held), (i, held, out.transient_bytes[i], level)
        if held + chain.transient_bytes[i] > level and held <= level:
            assert held + out.transient_bytes[i] == level, i


@settings(max_examples=400, deadline=None)
@given(chains(max_n=12), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_discount_is_monotone_in_keep(chain, a, b):
    lo, hi = sorted((a, b))
    out_lo, out_hi = discount_dominant(chain, solve_linear, lo), discount_dominant(chain, solve_linear, hi)
    assert (out_lo is None) == (out_hi is None)
    if out_lo is None:
        return
    assert all(x <= y for x, y in zip(out_lo.transient_bytes, out_hi.transient_bytes))
    assert min_peak(out_lo) <= min_peak(out_hi) <= min_peak(chain)
    # each tail stage keeps about `keep` of its excess (up to rounding to whole bytes)
    first = _first_dominant(chain)
    level = max(_bounds(chain)[:first])
    for i, held in _tail(chain, first):
        excess = held + chain.transient_bytes[i] - level
        if excess > 0 and out_hi.transient_bytes[i] > 0:
            assert held + out_hi.transient_bytes[i] - level <= math.ceil(hi * excess) + 1, (i, excess, hi)


@settings(max_examples=200, deadline=None)
@given(chains(max_n=12), KEEPS)
def test_same_with_either_exact_solver(chain, keep):
    assert discount_dominant(chain, solve_linear, keep) == discount_dominant(chain, solve_dp, keep)


@pytest.mark.parametrize("keep", [-0.01, 1.01, -1, 2, float("nan"), float("inf"), float("-inf")])
def test_keep_outside_unit_interval_raises(keep):
    chain = Chain([0, 1, 1, 0], [10, 10, 100], [5, 5, 50], [1, 1, 1])  # has a dominant tail
    with pytest.raises(ValueError):
        discount_dominant(chain, solve_linear, keep)


def test_loss_head_is_lowered_to_the_layers_level():
    """Five layers (bound 20 each) and a loss head whose own bound is 130: with keep=0 the head's
    transient drops to the layers' level, with keep=0.5 to halfway, and the layers are untouched."""
    chain = Chain([0, 2, 2, 2, 2, 2, 0], [10] * 5 + [30], [10] * 5 + [100], [1] * 6)
    assert _first_dominant(chain) == 5
    zero, half = discount_dominant(chain, solve_linear, 0.0), discount_dominant(chain, solve_linear, 0.5)
    assert zero.transient_bytes[:5] == half.transient_bytes[:5] == chain.transient_bytes[:5]
    level = 20
    assert zero.transient_bytes[5] == 0  # the head's saved bytes (30) alone exceed the level
    assert half.transient_bytes[5] == 100 - (30 + 100 - level) // 2
    assert min_peak(zero) < min_peak(half) < min_peak(chain)


def test_first_stage_dominating_gives_none():
    chain = Chain([0, 1, 1, 0], [100, 1, 1], [50, 1, 1], [1, 1, 1])
    assert _first_dominant(chain) == 0
    for keep in (0.0, 0.5, 1.0):
        assert discount_dominant(chain, solve_linear, keep) is None
