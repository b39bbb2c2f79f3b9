"""The contenders: ways to run one training step of a model, each on its own fresh copy.

* ``eager``: plain PyTorch, everything saved;
* ``ckpt_seq``: ``torch.utils.checkpoint.checkpoint_sequential`` at round(sqrt(n)) segments
  (non-reentrant), Chen et al.'s sqrt(n) rule, where the model is an ``nn.Sequential``;
* ``min-cut``: ``torch.compile`` through PyTorch's default (min-cut) partitioner, optionally at
  ``activation_memory_budget`` (``min-cut@0.5``), via :func:`fxremat.backend.min_cut_backend`;
* ``fxremat``: fxremat's least-peak plan; ``fxremat@0.5`` at ``memory_budget=0.5``;
  ``fxremat-dp`` the least-peak plan from the O(n^2) reference solver;
* ``hf-ckpt``: the one line HF users switch on, per-layer ``torch.utils.checkpoint``
  (``gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})``), then
  ``torch.compile`` with the default (min-cut) partitioner; transformers models only
  (:mod:`bench.hf_models`).

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

__all__ = ["Contender", "base_contenders", "sweep_contenders", "real_contenders", "SWEEP_BUDGETS", "RecordingMinCut"]

SWEEP_BUDGETS = (0.8, 0.5, 0.2, 0.0)  # min-cut's activation_memory_budget points


@dataclasses.dataclass(frozen=True)
class Contender:
    name: str  # unique within a case together with compiler
    family: str  # eager | ckpt_seq | min-cut | fxremat | hf-ckpt
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
        if self.family == "hf-ckpt":
            supported = getattr(case, "supports_gradient_checkpointing", None)
            if supported is None:
                return "not a transformers model: gradient_checkpointing_enable() does not apply"
            if not supported:
                return "this transformers model does not support gradient checkpointing (supports_gradient_checkpointing=False)"
            if getattr(case, "hf_ckpt_skip", ""):
                return case.hf_ckpt_skip
        return None

    def prepare(self, module: nn.Module) -> tuple[nn.Module, "RecordingMinCut | None"]:
        """The module to call (compiled or wrapped) and, for min-cut, the partitioner that records
        its predicted peak."""
        if self.family == "eager":
            return module, None
        if self.family == "ckpt_seq":
            return CheckpointSequential(module), None
        if self.family in ("min-cut", "hf-ckpt"):
            if self.family == "hf-ckpt":
                _enable_hf_checkpointing(_hf_model(module))
            backend = min_cut_backend(self.budget, compiler=self.compiler)
            recorder = RecordingMinCut(self.budget)
            backend.partitioner = recorder
            return torch.compile(module, backend=backend), recorder
        if self.family == "fxremat":
            backend = fxremat.make_backend(self.solver, self.budget, compiler=self.compiler)
            return torch.compile(module, backend=backend), None
        raise ValueError(f"unknown family {self.family!r}")


def _hf_model(module: nn.Module) -> nn.Module:
    """The transformers model in ``module`` (itself, or the one a wrapper holds)."""
    for m in module.modules():
        if hasattr(m, "gradient_checkpointing_enable"):
            return m
    raise TypeError(f"no transformers model (gradient_checkpointing_enable) in {type(module).__name__}")


def _enable_hf_checkpointing(hf: nn.Module) -> None:
    """``gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})``, under
    the name transformers 5.x gives it (``activation_checkpointing_enable``; the old name warns)."""
    kwargs = {"use_reentrant": False}
    if hasattr(hf, "activation_checkpointing_enable"):
        hf.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


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
    through fxremat's memory model and time model, so min-cut's budget points get a predicted peak
    and step time as well."""

    def __init__(self, activation_memory_budget: float | None = None):
        super().__init__(activation_memory_budget)
        self.predicted: list[int] = []
        self.errors: list[str] = []
        self.step_s: list[float] = []  # fxremat.timing's estimate of each pair's step

    def __call__(self, gm, joint_inputs, **kwargs):
        fw, bw = super().__call__(gm, joint_inputs, **kwargs)
        try:
            from fxremat.memory import simulate
            from fxremat.timing import step_seconds

            inductor = kwargs.get("compiler") == "inductor"  # replayed as fxremat replays its own pairs
            # min-cut's backend lets Inductor lay out each graph: on the CPU a graph with a
            # convolution runs channels-last, so the backward does when it recomputes one (the
            # replay's scratch follows the backward's layout, where convolution backwards run)
            self.predicted.append(simulate(fw, bw, kwargs["num_fwd_outputs"], inductor,
                                           inductor and _inductor_channels_last(bw)).peak_bytes)
            self.step_s.append(step_seconds(fw, bw, inductor).step_s)
        except Exception as exc:  # noqa: BLE001 - a prediction is optional
            self.errors.append(f"{type(exc).__name__}: {exc}")
        return fw, bw


def _inductor_channels_last(gm) -> bool:
    """Inductor's own layout decision for one CPU graph (``GraphLowering.decide_layout_opt``)."""
    from fxremat import _torch

    decide = _torch._decide_layout_opt()
    convs = _torch.convolutions(gm)
    on_cpu = all(n.args[0].meta["val"].device.type == "cpu" for n in convs)
    return bool(convs) and on_cpu and decide is not None and bool(decide(gm, is_inference=False))


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


REAL_BUDGET = 0.5


def real_contenders() -> list[Contender]:
    """The real-model suite's contenders, all through Inductor (eager first: the reference)."""
    return [
        Contender("eager", "eager"),
        Contender("min-cut", "min-cut", "inductor"),
        Contender(f"min-cut@{REAL_BUDGET}", "min-cut", "inductor", REAL_BUDGET),
        Contender("hf-ckpt", "hf-ckpt", "inductor"),
        Contender("fxremat", "fxremat", "inductor"),
        Contender(f"fxremat@{REAL_BUDGET}", "fxremat", "inductor", REAL_BUDGET),
    ]
