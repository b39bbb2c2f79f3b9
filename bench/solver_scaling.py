"""Time the exact solvers against chain length and fit the growth exponent.

    python -m bench.solver_scaling [--max-n 1000000] [--dp-max-n 3000] [--seed 0]

Prints one row per n (seconds for solve_linear and, up to --dp-max-n, solve_dp) and the fitted
exponent k of time ~ n^k for solve_linear between n = 10^4 and the largest n (least squares on
log-log).  A benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import math
import platform
import random
import time

from fxremat.chain import Chain
from fxremat.solvers import solve_dp, solve_linear


def random_chain(n: int, rng: random.Random) -> Chain:
    def sizes(k):
        return [rng.randint(1, 1 << 20) for _ in range(k)]

    return Chain(sizes(n + 1), sizes(n), sizes(n), [rng.random() for _ in range(n)])


def best_time(fn, chain: Chain, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn(chain)
        best = min(best, time.perf_counter() - start)
    return best


def fit_exponent(points: list[tuple[int, float]]) -> float:
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-n", type=int, default=10**6)
    parser.add_argument("--dp-max-n", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    ns = [n for e in range(2, 7) for n in (10**e, 3 * 10**e) if n <= args.max_n]
    print(f"# solver scaling on {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print("| n | solve_linear (s) | solve_dp (s) | same plan |")
    print("|---:|---:|---:|:---:|")
    linear_points = []
    for n in ns:
        chain = random_chain(n, rng)
        repeats = 3 if n <= 10**5 else 1
        t_lin = best_time(solve_linear, chain, repeats)
        linear_points.append((n, t_lin))
        if n <= args.dp_max_n:
            t_dp = best_time(solve_dp, chain, 1)
            same = "yes" if solve_dp(chain) == solve_linear(chain) else "NO"
            print(f"| {n} | {t_lin:.4f} | {t_dp:.3f} | {same} |")
        else:
            print(f"| {n} | {t_lin:.4f} | - | - |")
    tail = [(n, t) for n, t in linear_points if n >= 10**4]
    if len(tail) >= 2:
        print(f"\nfitted exponent of solve_linear, n = {tail[0][0]}..{tail[-1][0]}: {fit_exponent(tail):.3f}")


if __name__ == "__main__":
    main()
