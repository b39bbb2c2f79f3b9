"""The exact memory/recomputation frontier (fxremat.solvers.frontier), and how explain shows it.

The solver part is checked against brute force over all checkpoint subsets (n <= 10) and against
the quadratic reference solver (n <= 200); the explain / CLI part runs the built-in demo, shrunk,
through the eager compiler only.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_solvers import CASES, all_plans, chains

import fxremat
import fxremat.demo
import fxremat.partitioner
import fxremat.report
from fxremat.__main__ import main
from fxremat.chain import Chain
from fxremat.solvers import FrontierPoint, frontier, solve_dp, solve_linear
from fxremat.solvers.linear import min_peak

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def pareto(chain: Chain) -> list[tuple[int, float]]:
    """Brute force: least cost at each achievable peak, then the points no other point dominates."""
    best: dict[int, float] = {}
    for _, peak, cost in all_plans(chain):
        best[peak] = min(cost, best.get(peak, cost))
    out, lowest = [], float("inf")
    for peak in sorted(best):  # ascending peak: keep a point only if it is strictly cheaper
        if best[peak] < lowest:
            out.append((peak, best[peak]))
            lowest = best[peak]
    return out[::-1]


def check_shape(chain: Chain, points: tuple[FrontierPoint, ...]) -> None:
    assert points and all(isinstance(p, FrontierPoint) for p in points)
    for p in points:
        assert chain.peak_bytes(p.checkpoints) == p.peak_bytes
        assert chain.recompute_cost(p.checkpoints) == p.recompute_cost
    for a, b in zip(points, points[1:]):
        assert b.peak_bytes < a.peak_bytes and b.recompute_cost > a.recompute_cost
    assert points[0].recompute_cost == 0.0
    assert points[-1].peak_bytes == min_peak(chain)


# ---------------------------------------------------------------------------------- solver
def test_table_uniform4():
    # o = 1, s = 2, t = 0, cost 1 per stage: {1} peaks at max(2, 1 + 6) = 7, {2} at max(4, 1 + 4) = 5,
    # {2, 3} at 4; {1, 2} (6, cost 2), {3} (6, cost 3) and {1, 3} (5, cost 3) are dominated.
    chain = CASES[0].chain
    assert frontier(chain) == (
        FrontierPoint(8, 0.0, ()), FrontierPoint(7, 1.0, (1,)), FrontierPoint(5, 2.0, (2,)),
        FrontierPoint(4, 3.0, (2, 3)),
    )


def test_single_stage_and_free_stages():
    assert frontier(Chain((5, 7), (3,), (2,), (1,))) == (FrontierPoint(5, 0.0, ()),)
    # A free first stage: checkpointing after it costs nothing, so the cost-0 point is below the
    # no-recomputation peak (it dominates recomputing nothing).
    chain = Chain((0, 1, 0), (10, 10), (0, 0), (0.0, 1.0))
    assert chain.no_recompute_peak() == 20
    assert frontier(chain) == (FrontierPoint(11, 0.0, (1,)),)


def test_frontier_point_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        frontier(CASES[0].chain)[0].peak_bytes = 1


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(max_n=10))
def test_frontier_equals_brute_force(chain: Chain):
    points = frontier(chain)
    check_shape(chain, points)
    assert [(p.peak_bytes, p.recompute_cost) for p in points] == pareto(chain)
    if all(c > 0 for c in chain.forward_cost[:1]):  # stage 1 costs something: no free checkpoint
        assert points[0].peak_bytes == chain.no_recompute_peak() and points[0].checkpoints == ()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(max_n=120), st.data())
def test_frontier_agrees_with_dp(chain: Chain, data):
    points = frontier(chain)
    check_shape(chain, points)
    # the last point is the least-peak plan of both exact solvers
    ref = solve_dp(chain)
    assert (points[-1].peak_bytes, points[-1].recompute_cost) == (ref.peak_bytes, ref.recompute_cost)
    assert points[-1].checkpoints == solve_linear(chain).checkpoints
    # at a point's peak, and one byte below it, the reference recomputes what the frontier says
    for p in data.draw(st.lists(st.sampled_from(points), max_size=3)):
        assert solve_dp(chain, p.peak_bytes).recompute_cost == p.recompute_cost
        nxt = next((q for q in points if q.peak_bytes < p.peak_bytes), None)
        if nxt is None:
            with pytest.raises(ValueError):
                solve_dp(chain, p.peak_bytes - 1)
        else:
            assert solve_dp(chain, p.peak_bytes - 1).recompute_cost == nxt.recompute_cost


def test_frontier_long_chain_is_fast():
    import time

    n = 1000
    chain = Chain([1 + i % 7 for i in range(n + 1)], [5 + i % 3 for i in range(n)], [i % 11 for i in range(n)],
                  [1.0 + i % 5 for i in range(n)])
    start = time.perf_counter()
    points = frontier(chain)
    check_shape(chain, points)
    assert time.perf_counter() - start < 60


# ---------------------------------------------------------------------------------- explain / CLI
pytestmark_compile = pytest.mark.usefixtures("fresh_compile")


_tiny_demo = functools.partial(fxremat.demo.make_demo, blocks=3, channels=8, image=8, batch=2)


@pytest.fixture
def with_chain(monkeypatch):
    """Until ``PartitionReport`` records its chain, attach the planned chain to each report here.

    The faithful chain (``_plan``'s first ``linearize``) is the one the solver and the budget work
    on; with a real ``chain`` field the fixture does nothing.
    """
    if "chain" in {f.name for f in dataclasses.fields(fxremat.partitioner.PartitionReport)}:
        return
    seen: list[Chain] = []
    linearize, plan = fxremat.partitioner.linearize, fxremat.partitioner._plan

    def recording_linearize(*args, **kwargs):
        lin = linearize(*args, **kwargs)
        seen.append(lin.chain)
        return lin

    def recording_plan(*args, **kwargs):
        seen.clear()
        return plan(*args, **kwargs)

    old = fxremat.partitioner._REPORTS

    class Reports(type(old)):
        def append(self, report):  # the partitioner's final report (after its dataclasses.replace)
            if seen:
                object.__setattr__(report, "chain", seen[0])
            super().append(report)

    monkeypatch.setattr(fxremat.partitioner, "linearize", recording_linearize)
    monkeypatch.setattr(fxremat.partitioner, "_plan", recording_plan)
    new = Reports(old, maxlen=old.maxlen) if isinstance(old, collections.deque) else Reports(old)
    monkeypatch.setattr(fxremat.partitioner, "_REPORTS", new)


@pytestmark_compile
def test_explain_carries_the_frontier(with_chain, tmp_path):
    model, inputs = _tiny_demo()
    rep = fxremat.explain(model, *inputs)
    assert len(rep.frontiers) == len(rep.graphs) >= 1
    for r, points in zip(rep.graphs, rep.frontiers):
        assert points == frontier(r.chain)
        assert points[0].recompute_cost == 0.0
    assert "frontier" in str(rep)
    text = rep.frontier_text()
    assert "peak (chain)" in text and "recompute" in text and "min-cut default" in text
    for p in rep.frontiers[0][:3]:
        assert f"{p.peak_bytes / 2**20:.2f} MiB" in text
    data = json.loads(json.dumps(rep.to_json()))
    g = data["graphs"][0]
    assert [p["peak_bytes"] for p in g["frontier"]] == [p.peak_bytes for p in rep.frontiers[0]]
    assert [p["checkpoints"] for p in g["frontier"]] == [list(p.checkpoints) for p in rep.frontiers[0]]
    assert all(0.0 <= p["recompute_share"] <= 1.0 for p in g["frontier"])
    out = rep.plot_frontier(tmp_path / "f.png")
    assert out.read_bytes()[:8] == PNG_MAGIC


@pytestmark_compile
def test_explain_without_chain_says_so(monkeypatch):
    # A report without a chain (an older partitioner): no frontier, and the printout says why.
    real = fxremat.report.last_reports

    class NoChain:
        def __init__(self, r):
            self._r = r

        def __getattr__(self, name):
            if name == "chain":
                raise AttributeError(name)
            return getattr(self._r, name)

    monkeypatch.setattr(fxremat.report, "last_reports", lambda clear=False: [NoChain(r) for r in real(clear)])
    model, inputs = _tiny_demo()
    rep = fxremat.explain(model, *inputs)
    assert rep.frontiers == (None,) * len(rep.graphs)
    assert "frontier" not in str(rep)
    assert "frontier: not available" in rep.frontier_text()
    assert all(g["frontier"] is None for g in rep.to_json()["graphs"])


@pytestmark_compile
def test_cli_sweep_json_and_plot(with_chain, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fxremat.demo, "make_demo", _tiny_demo)
    js, png = tmp_path / "r.json", tmp_path / "f.png"
    assert main(["explain", "--sweep", "--json", str(js), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "frontier" in out and "peak (chain)" in out and "min-cut default" in out
    data = json.loads(js.read_text())
    assert data["graphs"] and all(g["frontier"] for g in data["graphs"])
    assert png.read_bytes()[:8] == PNG_MAGIC

    # without --sweep: no table, but the JSON still carries the frontier
    assert main(["explain", "--json", str(js)]) == 0
    assert "peak (chain)" not in capsys.readouterr().out
    assert all(g["frontier"] for g in json.loads(js.read_text())["graphs"])


@pytestmark_compile
def test_cli_sweep_plot_without_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit) as exit_info:
        main(["explain", "--sweep", "--plot", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2
    assert "pip install 'fxremat[plot]'" in capsys.readouterr().err
