"""Checkpoint solvers for a :class:`fxremat.chain.Chain`.

Every solver has the signature ``solve_X(chain, budget_bytes=None) -> Plan`` (see
:class:`fxremat.solvers.plan.Solver`) and returns the frozen :class:`Plan`.  ``SOLVERS`` maps the
names accepted by :func:`fxremat.make_backend` to them.
"""

from __future__ import annotations

from .chen import solve_chen
from .dp import solve_dp
from .frontier import FrontierPoint, frontier
from .linear import solve_budget, solve_linear
from .plan import Plan, Solver

__all__ = ["Plan", "Solver", "SOLVERS", "solve_linear", "solve_dp", "solve_budget", "solve_chen", "get_solver",
           "frontier", "FrontierPoint"]

SOLVERS: dict[str, Solver] = {"linear": solve_linear, "dp": solve_dp, "chen": solve_chen}


def get_solver(name: str) -> Solver:
    """The solver called ``name``; ``ValueError`` listing the valid names otherwise."""
    try:
        return SOLVERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown solver {name!r}; expected one of {sorted(SOLVERS)}") from None
