"""Random models for fuzzing fxremat: a drawn *program* (a list of ops over earlier values) built into
an ``nn.Module``.

A program is plain data (:class:`Program`: input shape, dtype, seed and a tuple of :class:`Op`), so
a failing case prints as a one-line repro and rebuilds bit for bit: :func:`build_model` creates the
parameters under ``torch.manual_seed(program.seed)`` and :func:`make_input` draws the input from a
generator seeded the same way.

Programs are drawn through a tiny :class:`Drawer` interface (``integer``, ``choice``, ``boolean``),
implemented twice: over Hypothesis' ``data.draw`` (:class:`HypothesisDrawer`, for shrinking and
reproducible CI runs) and over ``random.Random`` (:class:`RandomDrawer`, for the long profile,
which runs thousands of seeds and reports every mismatch instead of stopping at the first).

Values are tensors whose shapes the generator tracks, so every op is valid by construction:

* ``linear`` (matmul with a weight) on the last dim; ``matmul`` of two same-shape activations
  (``a @ b^T / sqrt(k)``, attention-like); ``conv`` (conv2d, kernel 1 or 3, same padding) on 4-D
  values;
* ``unary`` pointwise (relu, gelu, tanh, sigmoid); ``binary`` (add, mul) of the newest value with
  an earlier value of the same shape (a skip connection) or itself;
* ``reduce`` (mean or sum over a dim, broadcast back: ``x - mean`` or ``x * tanh(sum)``);
* views: ``reshape`` (merge two adjacent dims or split one in two), ``transpose``, ``permute``;
* ``cat`` of the newest value with an earlier one along a dim where only that dim differs
  (a concatenated skip connection) or with itself;
* ``dropout`` (training mode).

The model returns every value no later op reads (the last one among them), and optionally an
intermediate as well; so no op is dead code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
from typing import Any, Sequence
from unittest import mock

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "Op", "Program", "Drawer", "RandomDrawer", "HypothesisDrawer", "draw_program", "build_model",
    "make_input", "FuzzModel", "force_fxremat_plan",
]

MAX_NUMEL = 16384  # cap on any value's element count: keeps a graph's eager step in milliseconds
# (values must be well above fxremat's 4 KiB 'small storage' threshold, or nothing is worth recomputing)
UNARY = ("relu", "gelu", "tanh", "sigmoid")
BINARY = ("add", "mul")
KINDS = ("linear", "matmul", "conv", "unary", "binary", "reduce", "reshape", "transpose", "permute", "cat", "dropout")
# Drawn with these weights: chains of linear layers, activations and skip connections are what
# activation checkpointing is for, so they come up more often than the shape-shuffling ops.
_WEIGHTED_KINDS = ("linear",) * 3 + ("unary",) * 2 + ("binary",) * 2 + KINDS[1:3] + KINDS[5:]


@dataclasses.dataclass(frozen=True)
class Op:
    """One op: ``kind``, operand value indices ``args`` (0 is the input), and static ``params``."""

    kind: str
    args: tuple[int, ...]
    params: tuple[Any, ...] = ()

    def __repr__(self) -> str:
        return f"Op({self.kind!r}, {self.args!r}, {self.params!r})"


@dataclasses.dataclass(frozen=True)
class Program:
    input_shape: tuple[int, ...]
    dtype: str  # "float32" or "float64"
    seed: int
    ops: tuple[Op, ...]
    extra_output: int | None = None  # index of an intermediate also returned, if any

    def __repr__(self) -> str:
        ops = ", ".join(map(repr, self.ops))
        return (f"Program(input_shape={self.input_shape!r}, dtype={self.dtype!r}, seed={self.seed!r}, "
                f"ops=({ops},), extra_output={self.extra_output!r})")

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def outputs(self) -> tuple[int, ...]:
        """Indices of the values returned: every value no later op reads (so no op is dead: a dead
        dropout would be removed by the compiler but still draw random numbers in eager), then
        ``extra_output``, an intermediate that is also returned."""
        read = {i for op in self.ops for i in op.args}
        sinks = tuple(i for i in range(1, len(self.ops) + 1) if i not in read)
        extra = () if self.extra_output is None or self.extra_output in sinks else (self.extra_output,)
        return sinks + extra

    def shapes(self) -> list[tuple[int, ...]]:
        """The shape of every value (the input first), computed from the program alone."""
        shapes = [self.input_shape]
        for op in self.ops:
            shapes.append(_result_shape(op, [shapes[i] for i in op.args]))
        return shapes


# ------------------------------------------------------------------------------------ drawing


class Drawer:
    """The choices a program is drawn from."""

    def integer(self, lo: int, hi: int) -> int:  # inclusive
        raise NotImplementedError

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.integer(0, len(options) - 1)]

    def boolean(self) -> bool:
        return bool(self.integer(0, 1))


class RandomDrawer(Drawer):
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class HypothesisDrawer(Drawer):
    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data = data
        self.st = st

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _result_shape(op: Op, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    kind, p = op.kind, op.params
    a = shapes[0]
    if kind == "linear":
        return (*a[:-1], p[0])
    if kind == "matmul":
        return (*a[:-1], a[-2])
    if kind == "conv":
        return (a[0], p[0], *a[2:])
    if kind in ("unary", "binary", "reduce", "dropout"):
        return a
    if kind == "reshape":
        return tuple(p[0])
    if kind == "transpose":
        s = list(a)
        s[p[0]], s[p[1]] = s[p[1]], s[p[0]]
        return tuple(s)
    if kind == "permute":
        return tuple(a[i] for i in p[0])
    if kind == "cat":
        s = list(a)
        s[p[0]] = a[p[0]] + shapes[1][p[0]]
        return tuple(s)
    raise ValueError(kind)


def _reshape_options(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Merge two adjacent dims (rank stays >= 2) or split an even dim in two (rank stays <= 4)."""
    out = []
    if len(shape) > 2:
        for d in range(len(shape) - 1):
            out.append((*shape[:d], shape[d] * shape[d + 1], *shape[d + 2:]))
    if len(shape) < 4:
        for d in range(len(shape)):
            if shape[d] % 2 == 0 and shape[d] >= 4:
                out.append((*shape[:d], 2, shape[d] // 2, *shape[d + 1:]))
    return out


def _partner(draw: Drawer, src: int, candidates: list[int]) -> int:
    """The second operand: usually an earlier value of a fitting shape (a skip connection), else ``src``."""
    others = [i for i in candidates if i != src]
    return draw.choice(others) if others and draw.integer(0, 3) else src


def _draw_op(draw: Drawer, shapes: list[tuple[int, ...]], allow_dropout: bool) -> Op:
    """One valid op whose first operand is (usually) the newest value."""
    n = len(shapes)
    src = n - 1 if draw.integer(0, 3) else draw.integer(0, n - 1)  # mostly a chain, some fan-out
    a = shapes[src]
    for _ in range(20):
        kind = "conv" if len(a) == 4 and draw.integer(0, 3) == 0 else draw.choice(_WEIGHTED_KINDS)
        if kind == "linear":
            out = draw.choice((16, 32, 64, 128))
            if _numel(a) // a[-1] * out <= MAX_NUMEL:
                return Op("linear", (src,), (out,))
        elif kind == "matmul":
            b = _partner(draw, src, [i for i in range(n) if shapes[i] == a])
            if _numel(a) // a[-1] * a[-2] <= MAX_NUMEL:
                return Op("matmul", (src, b))
        elif kind == "conv":
            if len(a) == 4:
                out, k = draw.choice((4, 8, 16)), draw.choice((1, 3))
                if a[0] * out * a[2] * a[3] <= MAX_NUMEL and a[1] <= 64:
                    return Op("conv", (src,), (out, k))
        elif kind == "unary":
            return Op("unary", (src,), (draw.choice(UNARY),))
        elif kind == "binary":
            b = _partner(draw, src, [i for i in range(n) if shapes[i] == a])
            return Op("binary", (src, b), (draw.choice(BINARY),))
        elif kind == "reduce":
            return Op("reduce", (src,), (draw.integer(0, len(a) - 1), draw.choice(("mean", "sum"))))
        elif kind == "reshape":
            options = _reshape_options(a)
            if options:
                return Op("reshape", (src,), (draw.choice(options),))
        elif kind == "transpose":
            d0, d1 = draw.integer(0, len(a) - 1), draw.integer(0, len(a) - 1)
            if d0 != d1:
                return Op("transpose", (src,), (d0, d1))
        elif kind == "permute":
            perm = list(range(len(a)))
            for i in range(len(perm) - 1, 0, -1):  # Fisher-Yates through the drawer
                j = draw.integer(0, i)
                perm[i], perm[j] = perm[j], perm[i]
            if perm != sorted(perm):
                return Op("permute", (src,), (tuple(perm),))
        elif kind == "cat":
            dim = draw.integer(0, len(a) - 1)
            partners = [i for i in range(n)
                        if len(shapes[i]) == len(a) and all(x == y for d, (x, y) in enumerate(zip(shapes[i], a)) if d != dim)]
            b = _partner(draw, src, partners)
            if _numel(a) + _numel(shapes[b]) <= MAX_NUMEL:
                return Op("cat", (src, b), (dim,))
        elif kind == "dropout" and allow_dropout:
            return Op("dropout", (src,), (draw.choice((0.1, 0.3, 0.5)),))
    return Op("unary", (src,), ("tanh",))


def draw_program(draw: Drawer, *, min_depth: int = 2, max_depth: int = 12, dtypes: Sequence[str] = ("float32", "float64"),
                 allow_dropout: bool = True) -> Program:
    """A random program of ``min_depth``..``max_depth`` ops (deterministic given the draws)."""
    rank = draw.choice((2, 3, 4))
    if rank == 2:
        shape: tuple[int, ...] = (draw.choice((8, 16, 32)), draw.choice((32, 64, 128)))
    elif rank == 3:
        shape = (draw.choice((4, 8)), draw.choice((8, 16)), draw.choice((16, 32, 64)))
    else:
        shape = (draw.choice((2, 4, 8)), draw.choice((2, 4, 8)), draw.choice((8, 16)), draw.choice((8, 16)))
    dtype = draw.choice(tuple(dtypes))
    seed = draw.integer(0, 2**16)
    depth = draw.integer(min_depth, max_depth)
    use_dropout = allow_dropout and draw.boolean()
    shapes = [shape]
    ops = []
    for _ in range(depth):
        op = _draw_op(draw, shapes, use_dropout)
        ops.append(op)
        shapes.append(_result_shape(op, [shapes[i] for i in op.args]))
    extra = draw.integer(1, depth - 1) if depth > 2 and draw.boolean() else None
    return Program(shape, dtype, seed, tuple(ops), extra)


# ----------------------------------------------------------------------------------- building


class FuzzModel(nn.Module):
    """Runs a :class:`Program`; ``layers[str(i)]`` holds op i's parameters."""

    def __init__(self, program: Program) -> None:
        super().__init__()
        self.program = program
        shapes = program.shapes()
        layers = {}
        for i, op in enumerate(program.ops):
            a = shapes[op.args[0]]
            if op.kind == "linear":
                layers[str(i)] = nn.Linear(a[-1], op.params[0])
            elif op.kind == "conv":
                out, k = op.params
                layers[str(i)] = nn.Conv2d(a[1], out, k, padding=k // 2)
        self.layers = nn.ModuleDict(layers)

    def forward(self, x: torch.Tensor):
        values = [x]
        for i, op in enumerate(self.program.ops):
            args = [values[j] for j in op.args]
            values.append(_apply(op, args, self.layers[str(i)] if str(i) in self.layers else None))
        outputs = tuple(values[i] for i in self.program.outputs())
        return outputs if len(outputs) > 1 else outputs[0]


def _apply(op: Op, args: list[torch.Tensor], layer: nn.Module | None) -> torch.Tensor:
    kind, p = op.kind, op.params
    a = args[0]
    if kind in ("linear", "conv"):
        return layer(a)
    if kind == "matmul":
        return torch.matmul(a, args[1].transpose(-1, -2)) / math.sqrt(a.shape[-1])
    if kind == "unary":
        return {"relu": torch.relu, "gelu": F.gelu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}[p[0]](a)
    if kind == "binary":
        return a + args[1] if p[0] == "add" else a * args[1]
    if kind == "reduce":
        dim, how = p
        if how == "mean":
            return a - a.mean(dim, keepdim=True)
        return a * torch.tanh(a.sum(dim, keepdim=True))
    if kind == "reshape":
        return a.reshape(p[0])
    if kind == "transpose":
        return a.transpose(p[0], p[1])
    if kind == "permute":
        return a.permute(p[0])
    if kind == "cat":
        return torch.cat([a, args[1]], dim=p[0])
    if kind == "dropout":
        return F.dropout(a, p[0], training=True)
    raise ValueError(kind)


def build_model(program: Program) -> FuzzModel:
    """The model of ``program``: parameters drawn under ``torch.manual_seed(program.seed)``."""
    torch.manual_seed(program.seed)
    return FuzzModel(program).to(program.torch_dtype)


def make_input(program: Program) -> torch.Tensor:
    gen = torch.Generator().manual_seed(program.seed + 1)
    return torch.randn(program.input_shape, generator=gen, dtype=program.torch_dtype).requires_grad_()


# ------------------------------------------------------------------------------ test support


@contextlib.contextmanager
def force_fxremat_plan():
    """Use fxremat's own plan even where it predicts no gain over min-cut (a test-only hook).

    The product returns min-cut's pair when fxremat's predicted peak is not lower, which on small
    models would hide fxremat's planning from the test.  This wraps ``fxremat.partitioner._plan`` and
    flips the report's choice; planning, saved-set closure, extraction and scheduling run unchanged.
    """
    import fxremat.partitioner as partitioner

    original = getattr(partitioner, "_plan", None)
    if original is None:  # pragma: no cover - follow a refactor of partitioner.py
        raise RuntimeError("fxremat.partitioner._plan is gone: update force_fxremat_plan() in tests/fuzz_models.py")

    def forced(*args: Any, **kwargs: Any):
        fw, bw, report = original(*args, **kwargs)
        if fw is not None and report.chosen != "fxremat":
            report = dataclasses.replace(report, chosen="fxremat", reason=f"forced by test ({report.reason})")
        return fw, bw, report

    with mock.patch.object(partitioner, "_plan", forced):
        yield
