"""The exact O(n) solver: least peak in one right-to-left pass, then least recomputation.

Invariant: :func:`min_peak` returns ``min over all C of chain.peak_bytes(C)`` and
:func:`least_recompute` returns, among the plans with peak <= budget, one of least
recomputation (then least checkpoint bytes, then the latest previous checkpoint); both run in
O(n) time, every index entering and leaving each stack or deque at most once.  The proofs are in
``docs/algorithm.md``; :mod:`fxremat.solvers.dp` is the quadratic reference they are tested
against.

Notation (1-based): ``S[i]`` prefix of saved bytes, ``h[i] = S[i] + t_i``, so
``seg(a, b) = max(h[a..b]) - S[a-1]``; ``g(b) = o_b + f(b+1)`` is the cost of ending a segment
at ``b`` with a checkpoint there (``g(n) = -inf``: the last segment needs none), and
``f(a) = min over b >= a of max(seg(a, b), g(b))`` is the least peak of stages a..n.
"""

from __future__ import annotations

from collections import deque

from ..chain import Chain
from .plan import Plan, check_budget, infeasible_budget, make_plan

__all__ = ["solve_linear", "solve_budget", "min_peak", "least_recompute"]


def _h(chain: Chain) -> tuple[list[int], list[int]]:
    S = list(chain.saved_prefix)
    h = [0] + [S[i] + chain.transient_bytes[i - 1] for i in range(1, chain.n + 1)]
    return S, h


def min_peak(chain: Chain) -> int:
    """Least ``chain.peak_bytes`` over all checkpoint sets, in O(n)."""
    n, o = chain.n, chain.output_bytes
    S, h = _h(chain)
    f = [0] * (n + 2)
    cand: list[int] = []   # segment ends b, bottom = n; g strictly increasing towards the top
    gval: list[float] = []  # g(b) for each entry of cand
    rec: list[int] = []    # prefix-maximum records of h starting at a; bottom = largest index
    q = 0                  # cand[:q] are the ends with seg(a, b) >= g(b)
    rp = 0                 # position in rec of the record that gives max(h[a..cand[q]])
    m_prev: int | None = None  # max(h[a..cand[q-1]]); None: known to exceed g(cand[q]) + S[a-1]
    for a in range(n, 0, -1):
        ga = float("-inf") if a == n else o[a] + f[a + 1]
        # 1. a dominates every end whose g is not smaller: pop them.
        while cand and gval[-1] >= ga:
            cand.pop()
            gval.pop()
        if q > len(cand):      # an end of the ">=" part was popped: its g bounds the answer
            q, m_prev = len(cand), None
        new_top = q == len(cand)
        cand.append(a)
        gval.append(ga)
        # 2. h records from a: a removes the records it covers.
        while rec and h[rec[-1]] <= h[a]:
            rec.pop()
        rec.append(a)
        if new_top or rp >= len(rec):
            rp = len(rec) - 1
        if m_prev is not None:
            m_prev = max(m_prev, h[a])
        # 3. every segment cost grew: move the crossing towards a.
        while q < len(cand):
            mq = h[rec[rp]]
            if mq - S[a - 1] < gval[q]:
                break
            m_prev, q = mq, q + 1
            if q < len(cand):
                while rec[rp] > cand[q]:
                    rp += 1
        best = gval[q] if q < len(cand) else float("inf")
        if m_prev is not None:
            best = min(best, m_prev - S[a - 1])
        f[a] = int(best)
    return f[1]


def least_recompute(chain: Chain, budget_bytes: int) -> tuple[int, ...] | None:
    """Checkpoints of least recomputation with peak <= budget (None if none), in O(n).

    Recomputation is the forward cost of stages 1..c_last, so the answer is the smallest
    feasible last checkpoint; ``D[c]`` is the least checkpoint bytes of a feasible plan of
    stages 1..c ending with a checkpoint at c (``D[0] = 0``: no checkpoint yet).
    """
    n, o = chain.n, chain.output_bytes
    S, h = _h(chain)
    D: list[int | None] = [None] * n
    pred = [0] * n
    D[0] = 0
    best = deque()      # previous checkpoints c', increasing index, strictly increasing D
    window = deque()    # indices of h in (best[0], c], decreasing h: sliding maximum
    for c in range(1, n):
        if D[c - 1] is not None:
            while best and D[best[-1]] >= D[c - 1]:
                best.pop()
            best.append(c - 1)
        while window and h[window[-1]] <= h[c]:
            window.pop()
        window.append(c)
        while best:
            while window[0] <= best[0]:
                window.popleft()
            if D[best[0]] + h[window[0]] - S[best[0]] <= budget_bytes:
                break
            best.popleft()  # its segment only grows from here on: infeasible for good
        if best:
            D[c], pred[c] = D[best[0]] + o[c], best[0]
    suffix_max = [0] * (n + 2)
    for i in range(n, 0, -1):
        suffix_max[i] = max(h[i], suffix_max[i + 1])
    for c_last in range(n):
        if D[c_last] is not None and D[c_last] + suffix_max[c_last + 1] - S[c_last] <= budget_bytes:
            cps = []
            while c_last:
                cps.append(c_last)
                c_last = pred[c_last]
            return tuple(reversed(cps))
    return None


def solve_linear(chain: Chain, budget_bytes: int | None = None) -> Plan:
    """Exact O(n) solver.

    Without a budget: least peak, and among plans of least peak the least recomputation.
    With a budget: least recomputation subject to peak <= budget (``ValueError`` if no plan
    meets it, naming the smallest feasible peak).
    """
    budget = check_budget(budget_bytes)
    if budget is None:
        budget = min_peak(chain)
    cps = least_recompute(chain, budget)
    if cps is None:
        raise infeasible_budget(budget, min_peak(chain))
    return make_plan(chain, cps)


def solve_budget(chain: Chain, budget_bytes: int) -> Plan:
    """Least recomputation subject to ``peak <= budget_bytes``: a point on the memory/compute curve."""
    if budget_bytes is None:
        raise ValueError("solve_budget needs budget_bytes (an integer >= 0); use solve_linear for the least peak")
    return solve_linear(chain, budget_bytes)
