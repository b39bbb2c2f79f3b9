"""bench.dominance's verdict: step times compared by the median of per-round ratios."""

from bench.dominance import Point, dominating, points_of, time_ratio


def test_paired_ratio_cancels_a_slow_stretch_of_the_machine():
    # round 3 and 4 ran while the machine was busy: both contenders slowed alike
    ref = Point("min-cut@1.0", "min-cut", 100, 1.0, (1.00, 1.00, 1.60, 1.70, 1.00))
    fx = Point("fxremat@0.6", "fxremat", 90, 1.6, (1.02, 1.01, 1.62, 1.72, 1.60))
    assert fx.step_s / ref.step_s > 1.5  # the ratio of medians says much slower
    assert time_ratio(fx, ref) < 1.03  # paired: about as fast
    assert dominating([ref, fx], ref) is fx


def test_without_rounds_the_medians_are_compared():
    ref = Point("min-cut@1.0", "min-cut", 100, 1.0)
    fx = Point("fxremat", "fxremat", 90, 1.05)
    assert time_ratio(fx, ref) == 1.05
    assert dominating([ref, fx], ref) is None
    # a point with more peak never dominates, however fast
    assert dominating([ref, Point("fxremat@1.0", "fxremat", 101, 0.5)], ref) is None


def test_points_of_reads_the_rounds_of_a_result():
    result = {"points": [{"name": "a", "family": "min-cut", "peak_bytes": 1, "step_s": 2.0}],
              "step_s": {"a": [1.0, 2.0, 3.0]}}
    (p,) = points_of(result)
    assert p.steps == (1.0, 2.0, 3.0) and p.step_s == 2.0
