"""Checkpoint solvers for a :class:`fxremat.chain.Chain`.

Every solver has the signature ``solve_X(chain, budget_bytes=None) -> Plan`` (see
:class:`fxremat.solvers.plan.Solver`) and returns the frozen :class:`Plan`.  ``SOLVERS`` maps the
names accepted by :func:`fxremat.make_backend` to them.
"""

from __future__ import annotations

from ..chain import Chain
from .chen import solve_chen
from .dp import solve_dp
from .frontier import FrontierPoint, frontier
from .linear import solve_budget, solve_linear
from .plan import Plan, Solver

__all__ = ["Plan", "Solver", "SOLVERS", "solve_linear", "solve_dp", "solve_budget", "solve_chen", "get_solver", "curve",
           "frontier", "FrontierPoint"]

SOLVERS: dict[str, Solver] = {"linear": solve_linear, "dp": solve_dp, "chen": solve_chen}


def get_solver(name: str) -> Solver:
    """The solver called ``name``; ``ValueError`` listing the valid names otherwise."""
    try:
        return SOLVERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown solver {name!r}; expected one of {sorted(SOLVERS)}") from None


def curve(solve: Solver, chain: Chain) -> list[Plan]:
    """The solver's memory/recomputation curve: its plan for every budget, from no recomputation
    down to the least peak it reaches, each plan once.

    ``out[0]`` is the solver's plan at the no-recomputation peak; ``out[k + 1]`` is its plan for
    the budget ``out[k].peak_bytes - 1``, until no plan meets that, so peaks strictly decrease and
    ``out[-1]`` has the least peak the solver reaches.  For any budget ``b``, the first plan with
    ``peak_bytes <= b`` recomputes exactly as much as ``solve(chain, b)`` (it is a plan within
    ``b`` that the solver found best within a larger budget), and the plans before it are the
    curve's plans whose peak is above ``b``.  For ``"linear"`` and ``"dp"`` recomputation never
    decreases along the curve.  Solving costs O(n) (``"linear"``) per plan; the curve has at most
    one plan per distinct peak.
    """
    out: list[Plan] = []
    budget = chain.no_recompute_peak()
    while True:
        try:
            plan = solve(chain, budget)
        except ValueError:  # below the least peak this solver reaches
            return out
        out.append(plan)
        budget = plan.peak_bytes - 1
