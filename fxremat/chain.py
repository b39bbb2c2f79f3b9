"""The chain model: a forward pass cut into stages, and the memory objective of a checkpoint set.

A chain has stages 1..n; stage i turns x_{i-1} into x_i.  A plan checkpoints a set C of
boundaries in 1..n-1: the forward keeps only x_c for c in C (plus everything the last segment
saves, because the last segment is never recomputed); the backward walks the segments from last
to first, recomputes each from its checkpoint with everything saved, back-propagates through it
and frees every tensor after its last use.

Invariant kept here: :meth:`Chain.peak_bytes` is *the* objective every solver minimises, and it
is computed by the formula written in ``docs/algorithm.md``:

    peak(C) = max over segments j of  P_j + seg(a_j, b_j)
    seg(a, b) = max over i in [a, b] of  (s_a + ... + s_i) + t_i
    P_j = sum of o_c over the checkpoints c < a_j      (checkpoints of *earlier* segments only)

A checkpoint dies when its segment is done, so later segments' checkpoints do not count while
earlier segments run.  :meth:`Chain.naive_peak_bytes` is the objective that ignores those frees.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from itertools import accumulate
from typing import Iterable, Sequence

__all__ = ["Chain"]


def _as_byte_tuple(name: str, values: Sequence[int]) -> tuple[int, ...]:
    out = []
    for i, v in enumerate(values):
        try:
            iv = operator.index(v)
        except TypeError:
            raise ValueError(f"{name}[{i}] must be an integer byte count, got {v!r}") from None
        if iv < 0:
            raise ValueError(f"{name}[{i}] must be >= 0, got {iv}")
        out.append(iv)
    return tuple(out)


def _as_cost_tuple(name: str, values: Sequence[float]) -> tuple[float, ...]:
    out = []
    for i, v in enumerate(values):
        fv = float(v)
        if not math.isfinite(fv) or fv < 0:
            raise ValueError(f"{name}[{i}] must be a finite number >= 0, got {v!r}")
        out.append(fv)
    return tuple(out)


@dataclass(frozen=True)
class Chain:
    """A chain of ``n`` stages with the sizes that decide its memory.

    Args:
        output_bytes: ``n + 1`` sizes; ``output_bytes[i]`` is the size of x_i (x_0, the
            chain's input, is kept by the caller and never counted).
        saved_bytes: ``n`` sizes; ``saved_bytes[i-1]`` is what stage i keeps for its own
            backward when it runs with everything saved.
        transient_bytes: ``n`` sizes alive only while stage i's backward runs.
        forward_cost: ``n`` non-negative costs of running stage i forward once.
    """

    output_bytes: tuple[int, ...]
    saved_bytes: tuple[int, ...]
    transient_bytes: tuple[int, ...]
    forward_cost: tuple[float, ...]

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "output_bytes", _as_byte_tuple("output_bytes", self.output_bytes))
        set_(self, "saved_bytes", _as_byte_tuple("saved_bytes", self.saved_bytes))
        set_(self, "transient_bytes", _as_byte_tuple("transient_bytes", self.transient_bytes))
        set_(self, "forward_cost", _as_cost_tuple("forward_cost", self.forward_cost))
        n = len(self.saved_bytes)
        if n == 0:
            raise ValueError("a chain needs at least one stage (saved_bytes is empty)")
        if len(self.output_bytes) != n + 1:
            raise ValueError(
                f"output_bytes needs n + 1 = {n + 1} entries (x_0..x_n), got {len(self.output_bytes)}"
            )
        for name in ("transient_bytes", "forward_cost"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} needs n = {n} entries, got {len(getattr(self, name))}")

    # -- derived facts ---------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of stages."""
        return len(self.saved_bytes)

    @property
    def saved_prefix(self) -> tuple[int, ...]:
        """``S[i] = s_1 + ... + s_i`` for i = 0..n."""
        return (0, *accumulate(self.saved_bytes))

    @property
    def cost_prefix(self) -> tuple[float, ...]:
        """``F[i] = forward_cost of stages 1..i`` for i = 0..n."""
        return (0.0, *accumulate(self.forward_cost))

    def checkpoints_of(self, checkpoints: Iterable[int]) -> tuple[int, ...]:
        """Validate a checkpoint set and return it sorted, without duplicates."""
        cps = sorted({operator.index(c) for c in checkpoints})
        if cps and (cps[0] < 1 or cps[-1] > self.n - 1):
            raise ValueError(f"checkpoints must lie in 1..{self.n - 1} (n = {self.n}), got {cps}")
        return tuple(cps)

    def segments(self, checkpoints: Iterable[int]) -> tuple[tuple[int, int], ...]:
        """The segments ``(a, b)`` (1-based, inclusive) that a checkpoint set cuts the chain into."""
        bounds = (0, *self.checkpoints_of(checkpoints), self.n)
        return tuple((bounds[k] + 1, bounds[k + 1]) for k in range(len(bounds) - 1))

    def segment_bytes(self, a: int, b: int) -> int:
        """``seg(a, b)``: peak of recomputing stages a..b and back-propagating through them."""
        s, t = self.saved_bytes, self.transient_bytes
        best, acc = 0, 0
        for i in range(a, b + 1):
            acc += s[i - 1]
            best = max(best, acc + t[i - 1])
        return best

    # -- the objectives ----------------------------------------------------------------------
    def peak_bytes(self, checkpoints: Iterable[int]) -> int:
        """The liveness-aware peak of the single-level schedule (see module docstring)."""
        peak, held = 0, 0
        for a, b in self.segments(checkpoints):
            peak = max(peak, held + self.segment_bytes(a, b))
            held += self.output_bytes[b]
        return peak

    def naive_peak_bytes(self, checkpoints: Iterable[int]) -> int:
        """The objective that ignores frees: all checkpoints plus the largest segment."""
        cps = self.checkpoints_of(checkpoints)
        largest = max(self.segment_bytes(a, b) for a, b in self.segments(cps))
        return sum(self.output_bytes[c] for c in cps) + largest

    def recompute_cost(self, checkpoints: Iterable[int]) -> float:
        """Forward cost recomputed in the backward: every stage up to the last checkpoint."""
        cps = self.checkpoints_of(checkpoints)
        return self.cost_prefix[cps[-1]] if cps else 0.0

    def no_recompute_peak(self) -> int:
        """Peak when nothing is recomputed (no checkpoints: one segment, everything saved)."""
        return self.segment_bytes(1, self.n)
