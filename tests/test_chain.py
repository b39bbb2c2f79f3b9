"""The chain model: validation and the objectives, on chains small enough to check by hand."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fxremat.chain import Chain
from fxremat.linearize import fold_always_saved, fold_gradients

# Four equal stages: x_i is 1 byte, each stage saves 2, no transients, unit cost.
UNIFORM4 = Chain((1, 1, 1, 1, 1), (2, 2, 2, 2), (0, 0, 0, 0), (1, 1, 1, 1))


@pytest.mark.parametrize(
    "checkpoints, peak, naive, cost",
    [
        ((), 8, 8, 0.0),  # one segment: everything saved
        ((2,), 5, 5, 2.0),  # max(4, 1 + 4)
        ((2, 3), 4, 6, 3.0),  # max(4, 1 + 2, 2 + 2): x_3 dies before segment 1..2 runs
        ((1, 2, 3), 5, 5, 3.0),  # max(2, 1 + 2, 2 + 2, 3 + 2)
        ((1, 3), 5, 6, 3.0),
    ],
)
def test_uniform_chain_objectives(checkpoints, peak, naive, cost):
    assert UNIFORM4.peak_bytes(checkpoints) == peak
    assert UNIFORM4.naive_peak_bytes(checkpoints) == naive
    assert UNIFORM4.recompute_cost(checkpoints) == cost


def test_liveness_never_above_naive():
    import itertools

    for r in range(4):
        for cps in itertools.combinations(range(1, 4), r):
            assert UNIFORM4.peak_bytes(cps) <= UNIFORM4.naive_peak_bytes(cps)


def test_segments_and_transients():
    chain = Chain((0, 1, 1, 1), (1, 1, 1), (0, 0, 100), (1, 1, 1))
    assert chain.segments((2,)) == ((1, 2), (3, 3))
    assert chain.segment_bytes(1, 3) == 103
    assert chain.peak_bytes((2,)) == 102
    assert chain.no_recompute_peak() == 103


def test_checkpoints_are_a_set():
    assert UNIFORM4.peak_bytes([3, 2, 2]) == UNIFORM4.peak_bytes((2, 3))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(output_bytes=(1, 1), saved_bytes=(1, 1), transient_bytes=(0, 0), forward_cost=(1, 1)), "n \\+ 1 = 3"),
        (dict(output_bytes=(1, 1), saved_bytes=(1,), transient_bytes=(0, 0), forward_cost=(1,)), "transient_bytes needs n = 1"),
        (dict(output_bytes=(1, 1), saved_bytes=(-1,), transient_bytes=(0,), forward_cost=(1,)), "saved_bytes\\[0\\] must be >= 0"),
        (dict(output_bytes=(1, 1), saved_bytes=(1.5,), transient_bytes=(0,), forward_cost=(1,)), "integer byte count"),
        (dict(output_bytes=(1, 1), saved_bytes=(1,), transient_bytes=(0,), forward_cost=(float("nan"),)), "finite"),
        (dict(output_bytes=(1,), saved_bytes=(), transient_bytes=(), forward_cost=()), "at least one stage"),
    ],
)
def test_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Chain(**kwargs)


def test_bad_checkpoints():
    with pytest.raises(ValueError, match="1..3"):
        UNIFORM4.peak_bytes((4,))
    with pytest.raises(ValueError, match="1..3"):
        UNIFORM4.peak_bytes((0,))


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        UNIFORM4.saved_bytes = (1,)


# -- values every plan saves (linearize.fold_always_saved) ------------------------------------

@st.composite
def chains_with_fixed(draw):
    n = draw(st.integers(1, 8))
    sizes = st.integers(0, 50)
    saved = draw(st.lists(sizes, min_size=n, max_size=n))
    fixed = [draw(st.integers(0, s)) for s in saved]
    outputs = [0, *draw(st.lists(sizes, min_size=n - 1, max_size=n - 1)), 0]
    transient = draw(st.lists(sizes, min_size=n, max_size=n))
    cps = draw(st.sets(st.integers(1, n - 1))) if n > 1 else set()
    return outputs, saved, transient, fixed, cps


@settings(max_examples=500, deadline=None)
@given(chains_with_fixed())
def test_fold_always_saved_adds_earlier_fixed_bytes_to_every_segment(case):
    """Folding is exact: the folded chain's peak is, per segment, the held checkpoints plus the
    fixed bytes of every earlier stage plus the unfolded segment peak."""
    outputs, saved, transient, fixed, cps = case
    plain = Chain(outputs, saved, transient, [1.0] * len(saved))
    s2, t2 = fold_always_saved(saved, transient, fixed)
    folded = Chain(outputs, s2, t2, [1.0] * len(saved))
    expected, held = 0, 0
    for a, b in plain.segments(cps):
        expected = max(expected, held + sum(fixed[: a - 1]) + plain.segment_bytes(a, b))
        held += outputs[b]
    assert folded.peak_bytes(cps) == expected
    assert folded.no_recompute_peak() == plain.no_recompute_peak()


def test_fold_always_saved_rejects_fixed_above_saved():
    with pytest.raises(ValueError, match="fixed bytes 3"):
        fold_always_saved([2], [0], [3])


# -- gradients each stage's backward produces (linearize.fold_gradients) ------------------------

@settings(max_examples=500, deadline=None)
@given(chains_with_fixed(), st.data())
def test_fold_gradients_holds_later_stages_gradients_in_every_backward(case, data):
    """Folding is exact: while stage i's backward runs, the gradients of stages i+1..n are alive,
    whatever the plan: the folded peak is, per segment, the held checkpoints plus the largest
    of (saved bytes of stages a..i + t_i + gradients of the stages after i)."""
    outputs, saved, transient, _fixed, cps = case
    n = len(saved)
    grads = data.draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    folded = Chain(outputs, saved, fold_gradients(transient, grads), [1.0] * n)
    expected, held = 0, 0
    for a, b in folded.segments(cps):
        for i in range(a, b + 1):
            expected = max(expected, held + sum(saved[a - 1 : i]) + transient[i - 1] + sum(grads[i:]))
        held += outputs[b]
    assert folded.peak_bytes(cps) == expected
