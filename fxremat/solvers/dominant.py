"""Least peak, then the least peak of everything but the stages that force it.

A few stages can force the least peak on their own: a language model's head and loss (logits,
their gradient) need more memory than any plan of the layers does.  Among the plans of least peak
the tie-break then picks the least recomputation, which lets every layer segment rise to the
head's level (HF GPT-2, 12 layers, padded: segments of four layers, 94 MiB each, under a 99 MiB
head).  The head's level is a prediction, and an inflated one where Inductor fuses the loss, so
the layers' memory is what is measured.  :func:`spare_dominant` therefore optimises in two levels:

1. ``P1``, the least peak (as the solver gives it);
2. the *dominant* stages are those whose own bound ``s_i + t_i`` (a lower bound on the peak of
   any plan: the backward of stage i holds at least its saved and transient bytes) is at least
   ``share * P1``; every other stage's backward must stay within ``P2``, the dominant ones within
   ``P1``, and ``P2`` is the least level for which a plan exists;
3. among those plans, the least recomputation.

Invariant: the result's peak on the original chain is exactly ``P1`` (the least peak), so only the
tie-break changes; the per-stage levels are expressed as a chain whose dominant transients are
lowered by ``P1 - P2``, so any budget solver of the :class:`~fxremat.solvers.plan.Solver` shape
answers step 2, and a binary search over ``P2`` costs O(n log P1).
"""

from __future__ import annotations

from ..chain import Chain
from .plan import Plan, Solver, make_plan

__all__ = ["spare_dominant", "discount_dominant", "DOMINANT_SHARE"]

DOMINANT_SHARE = 0.9


def _levelled(chain: Chain, dominant: list[bool], raised_by: int) -> Chain:
    """``chain`` with each non-dominant stage's transient raised by ``raised_by``: within the
    budget ``P1`` those stages then stay within ``P1 - raised_by``, the dominant ones within ``P1``."""
    transient = tuple(t if d else t + raised_by for t, d in zip(chain.transient_bytes, dominant))
    return Chain(chain.output_bytes, chain.saved_bytes, transient, chain.forward_cost)


def spare_dominant(chain: Chain, solve: Solver, share: float = DOMINANT_SHARE) -> Plan:
    """The plan of least peak that keeps every non-dominant stage's backward as low as possible,
    then recomputes least (see the module docstring)."""
    best = solve(chain)
    p1 = best.peak_bytes
    bound = [s + t for s, t in zip(chain.saved_bytes, chain.transient_bytes)]
    dominant = [b >= share * p1 for b in bound]
    if not any(dominant) or all(dominant):
        return best
    lo, hi = max(b for b, d in zip(bound, dominant) if not d), p1  # hi: always feasible
    answer = best.checkpoints
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            plan = solve(_levelled(chain, dominant, p1 - mid), p1)
        except ValueError:
            lo = mid + 1
            continue
        hi, answer = mid, plan.checkpoints
    return make_plan(chain, answer)


def discount_dominant(chain: Chain, solve: Solver, keep: float, share: float = DOMINANT_SHARE) -> Chain | None:
    """``chain`` with its dominant tail (the first dominant stage and every stage after it, a loss
    head) lowered towards the highest bound of the other stages: each tail stage keeps ``keep``
    (0..1) of its excess over that level, its excess counted with the tail as one segment.  None if
    no stage dominates or the tail is the whole chain.

    The chain model of a loss head is the least sure of all (Inductor fuses the loss and writes
    its gradient in place), and where it dominates it decides how many checkpoints every layer
    may hold.  Plans of the discounted chains are candidates the memory model's replay judges."""
    if not 0 <= keep <= 1:
        raise ValueError(f"keep must lie in [0, 1], got {keep!r}")
    p1 = solve(chain).peak_bytes
    bound = [s + t for s, t in zip(chain.saved_bytes, chain.transient_bytes)]
    first = next((i for i, b in enumerate(bound) if b >= share * p1), None)
    if first is None or first == 0:
        return None
    level = max(bound[:first])
    transient, held = list(chain.transient_bytes), 0
    for i in range(first, chain.n):
        held += chain.saved_bytes[i]
        excess = held + transient[i] - level
        if excess > 0:
            transient[i] = max(0, transient[i] - int((1 - keep) * excess))
    return Chain(chain.output_bytes, chain.saved_bytes, tuple(transient), chain.forward_cost)
