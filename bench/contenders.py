"""The contenders: ways to run one training step of a model, each on its own fresh copy.

* ``eager``: plain PyTorch, everything saved;
* ``ckpt_seq``: ``torch.utils.checkpoint.checkpoint_sequential`` at round(sqrt(n)) segments
  (non-reentrant), Chen et al.'s sqrt(n) rule, where the model is an ``nn.Sequential``;
* ``min-cut``: ``torch.compile`` through PyTorch's default (min-cut) partitioner, optionally at
  ``activation_memory_budget`` (``min-cut@0.5``), via :func:`fxremat.backend.min_cut_backend`;
* ``fxremat``: fxremat's least-peak plan; ``fxremat@0.5`` at ``memory_budget=0.5``;
  ``fxremat-dp`` the least-peak plan from the O(n^2) reference solver.

Compiled contenders name their compiler: ``"eager"`` (AOTAutograd + partitioner + FX code, exact
memory accounting, no Inductor) or ``"inductor"``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint_sequential

import fxremat
from fxremat.backend import MinCutPartitioner, min_cut_backend

__all__ = ["Contender", "base_contenders", "sweep_contenders", "SWEEP_BUDGETS", "RecordingMinCut"]

SWEEP_BUDGETS = (0.8, 0.5, 0.2, 0.0)  # min-cut's activation_memory_budget points


@dataclasses.dataclass(frozen=True)
class Contender:
    name: str  # unique within a case together with compiler
    family: str  # eager | ckpt_seq | min-cut | fxremat
    compiler: str | None = None  # None: not compiled
    budget: float | None = None
    solver: str = "linear"

    @property
    def key(self) -> str:
        return self.name if self.compiler is None else f"{self.name}/{self.compiler}"

    def static_skip(self, case: Any) -> str | None:
        """Why this contender cannot run on ``case`` (None: it can)."""
        if self.family == "ckpt_seq" and not case.sequential:
            return "not an nn.Sequential: its skip connections span the network, checkpoint_sequential does not apply"
        if self.family == "fxremat" and self.budget == 0.0:
            return ("memory_budget=0.0 has no fxremat equivalent: a float budget must be in (0, 1] and 0 bytes is "
                    "below every feasible peak; fxremat's least-peak plan (`fxremat`) is its lowest point")
        return None

    def prepare(self, module: nn.Module) -> tuple[nn.Module, "RecordingMinCut | None"]:
        """The module to call (compiled or wrapped) and, for min-cut, the partitioner that records
        its predicted peak."""
        if self.family == "eager":
            return module, None
        if self.family == "ckpt_seq":
            return CheckpointSequential(module), None
        if self.family == "min-cut":
            backend = min_cut_backend(self.budget, compiler=self.compiler)
            recorder = RecordingMinCut(self.budget)
            backend.partitioner = recorder
            return torch.compile(module, backend=backend), recorder
        if self.family == "fxremat":
            backend = fxremat.make_backend(self.solver, self.budget, compiler=self.compiler)
            return torch.compile(module, backend=backend), None
        raise ValueError(f"unknown family {self.family!r}")


class CheckpointSequential(nn.Module):
    """``checkpoint_sequential(seq, round(sqrt(len(seq))), x, use_reentrant=False)``."""

    def __init__(self, seq: nn.Sequential) -> None:
        super().__init__()
        self.seq = seq
        self.segments = max(1, round(math.sqrt(len(seq))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint_sequential(self.seq, self.segments, x, use_reentrant=False)


class RecordingMinCut(MinCutPartitioner):
    """PyTorch's min-cut partitioner (same cache identity) that also replays the graphs it returns
    through fxremat's memory model, so min-cut's budget points get a predicted peak as well."""

    def __init__(self, activation_memory_budget: float | None = None):
        super().__init__(activation_memory_budget)
        self.predicted: list[int] = []
        self.errors: list[str] = []

    def __call__(self, gm, joint_inputs, **kwargs):
        fw, bw = super().__call__(gm, joint_inputs, **kwargs)
        try:
            from fxremat.memory import simulate

            self.predicted.append(simulate(fw, bw, kwargs["num_fwd_outputs"]).peak_bytes)
        except Exception as exc:  # noqa: BLE001 - a prediction is optional
            self.errors.append(f"{type(exc).__name__}: {exc}")
        return fw, bw


def base_contenders(compiler: str) -> list[Contender]:
    return [
        Contender("eager", "eager"),
        Contender("ckpt_seq", "ckpt_seq"),
        Contender("min-cut", "min-cut", compiler),
        Contender("fxremat", "fxremat", compiler),
    ]


def sweep_contenders(compiler: str) -> list[Contender]:
    """min-cut at each activation_memory_budget, fxremat at the same fractions, fxremat-dp."""
    out = [Contender(f"min-cut@{b}", "min-cut", compiler, b) for b in SWEEP_BUDGETS]
    out += [Contender(f"fxremat@{b}", "fxremat", compiler, b) for b in SWEEP_BUDGETS]
    out.append(Contender("fxremat-dp", "fxremat", compiler, None, "dp"))
    return out


def inductor_contenders() -> list[Contender]:
    return [Contender("min-cut", "min-cut", "inductor"), Contender("fxremat", "fxremat", "inductor")]
