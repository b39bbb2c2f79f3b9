"""Least bytes held between the forward and the backward, within a peak bound.

When Dynamo breaks a model into several graphs (a graph break inside every layer: an MoE expert
loop, a data-dependent branch), one graph's saved tensors stay alive while every later graph runs
its forward and backward.  The step's peak is then about ``sum of earlier graphs' held bytes +
this graph's own peak``, and a graph's least own peak is not what the step needs: its held bytes
count once per later graph.  :func:`least_held` answers the graph's question: of the plans whose
peak is at most ``bound``, the one holding the fewest bytes at the forward's end.

On the chain (:mod:`fxremat.chain`) a plan ``C`` holds ``H(C) = sum of o_c for c in C`` (the
checkpoints) ``+ s_a + ... + s_n`` (what the last segment ``a..n``, never recomputed, saves).

Invariant: the result is exact (equal to enumerating every checkpoint set): a dynamic program over
the last checkpoint, where of two partial plans ending at the same checkpoint the one holding
fewer bytes is never worse (every later segment runs above exactly those bytes), so one number per
checkpoint suffices; O(n^2) time, O(n) memory.  Ties: the least recomputation.
"""

from __future__ import annotations

from ..chain import Chain
from .linear import min_peak
from .plan import Plan, check_budget, infeasible_budget, make_plan

__all__ = ["least_held", "held_bytes"]


def held_bytes(chain: Chain, checkpoints: tuple[int, ...]) -> int:
    """``H(C)``: the checkpoints' outputs plus the last segment's saved bytes."""
    cps = chain.checkpoints_of(checkpoints)
    start = cps[-1] + 1 if cps else 1
    return sum(chain.output_bytes[c] for c in cps) + sum(chain.saved_bytes[start - 1:])


def least_held(chain: Chain, bound: int) -> Plan:
    """The plan of least :func:`held_bytes` among those with ``chain.peak_bytes(C) <= bound``
    (ties: least recomputation); ``ValueError`` naming the least peak if no plan is within ``bound``."""
    bound = check_budget(bound)
    n, o, s, t = chain.n, chain.output_bytes, chain.saved_bytes, chain.transient_bytes
    # held[b]: least bytes held by checkpoints of a partial plan whose last checkpoint is b (0: none)
    # and whose segments so far all stay within the bound; back[b]: that plan's checkpoint before b.
    held: list[int | None] = [0] + [None] * (n - 1)
    back = [0] * n
    best: tuple[int, float, int] | None = None  # (H, recompute, last checkpoint)
    for a in range(n):
        if held[a] is None:
            continue
        acc, seg = 0, 0
        for b in range(a + 1, n + 1):  # the segment a+1..b
            acc += s[b - 1]
            seg = max(seg, acc + t[b - 1])
            if held[a] + seg > bound:  # seg only grows with b
                break
            if b == n:
                key = (held[a] + acc, chain.cost_prefix[a], a)
                best = key if best is None or key < best else best
            elif held[b] is None or held[a] + o[b] < held[b]:
                held[b], back[b] = held[a] + o[b], a
    if best is None:
        raise infeasible_budget(bound, min_peak(chain))
    cps, c = [], best[2]
    while c:
        cps.append(c)
        c = back[c]
    return make_plan(chain, reversed(cps))

