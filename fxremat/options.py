"""User options of the partitioner, validated once into a frozen record.

Invariant: an :class:`Options` instance is always valid (a bad value raises ``ValueError`` at
construction naming what is allowed), is hashable, and its :meth:`Options.cache_key` covers every
field, so two partitioners with different options never share a cached graph.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import asdict, dataclass

from .solvers import SOLVERS

__all__ = ["Options"]


@dataclass(frozen=True)
class Options:
    """How fxremat plans a graph.

    Args:
        solver: ``"linear"`` (exact, O(n)), ``"dp"`` (exact reference, O(n^2)) or ``"chen"``
            (uniform sqrt(n) segments).
        memory_budget: ``None`` for the least peak; an ``int`` number of bytes; or a ``float``
            in (0, 1], a fraction of the peak without recomputation.  With a budget fxremat
            recomputes as little as it can while keeping the chain's predicted peak within it.
            The budget applies to each compiled graph on its own.
        strict_budget: what happens to a graph whose budget no plan meets.  ``False`` (default):
            best effort, the plan of least predicted peak runs and one warning says so.
            ``True``: :class:`fxremat.BudgetError` (the compile fails).
        recomputable_ops: custom ops (outside ``aten`` and ``prims``) that the caller vouches are
            pure and deterministic, so the backward may recompute them: names
            ``"namespace::name"`` or the ops themselves (``torch.ops.mylib.fused_mlp``).  Other
            custom ops are saved, never recomputed, except those fxremat knows
            (:data:`fxremat.analysis.PURE_CUSTOM_OPS`).  Stored as a sorted tuple of names.
    """

    solver: str = "linear"
    memory_budget: int | float | None = None
    strict_budget: bool = False
    recomputable_ops: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.solver, str) or self.solver not in SOLVERS:
            raise ValueError(f"unknown solver {self.solver!r}; expected one of {sorted(SOLVERS)}")
        if not isinstance(self.strict_budget, bool):
            raise ValueError(f"strict_budget must be True or False; got {self.strict_budget!r}")
        object.__setattr__(self, "recomputable_ops", _op_names(self.recomputable_ops))
        budget = self.memory_budget
        if budget is None:
            return
        if isinstance(budget, bool):
            raise ValueError(_BUDGET_HELP.format(budget=budget))
        if isinstance(budget, float):
            if not (math.isfinite(budget) and 0.0 < budget <= 1.0):
                raise ValueError(_BUDGET_HELP.format(budget=budget))
            return
        try:
            as_int = operator.index(budget)
        except TypeError:
            raise ValueError(_BUDGET_HELP.format(budget=budget)) from None
        if as_int < 0:
            raise ValueError(_BUDGET_HELP.format(budget=budget))
        object.__setattr__(self, "memory_budget", as_int)

    def budget_bytes(self, no_recompute_peak: int) -> int | None:
        """The budget in bytes for a graph whose peak without recomputation is given."""
        if isinstance(self.memory_budget, float):
            return int(self.memory_budget * no_recompute_peak)
        return self.memory_budget

    def cache_key(self) -> str:
        return ",".join(f"{k}={v!r}" for k, v in sorted(asdict(self).items()))


def _op_names(ops: object) -> tuple[str, ...]:
    """``"namespace::name"`` of each op given by name or as ``torch.ops.ns.name`` (or one of its overloads)."""
    if isinstance(ops, str) or not isinstance(ops, (tuple, list, set, frozenset)):
        raise ValueError(f"recomputable_ops must be a tuple of op names such as 'mylib::fused_mlp'; got {ops!r}")
    names = set()
    for op in ops:
        name = op if isinstance(op, str) else getattr(op, "_qualified_op_name", None)
        if name is None and hasattr(op, "_schema"):  # an OpOverload
            name = op._schema.name
        if not isinstance(name, str) or not _OP_NAME.fullmatch(name):
            raise ValueError(f"recomputable_ops: {op!r} is not an op name 'namespace::name' or a torch.ops op")
        names.add(name)
    return tuple(sorted(names))


_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*")

_BUDGET_HELP = (
    "memory_budget must be None (least peak), an int number of bytes >= 0, or a float "
    "fraction in (0, 1] of the peak without recomputation; got {budget!r}"
)
