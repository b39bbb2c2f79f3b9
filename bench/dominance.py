"""Dominance, measured: for every point of min-cut's curve (``activation_memory_budget`` 1.0, 0.8,
0.5, 0.2) and per-layer checkpointing, is there an fxremat point with no more peak and no more
step time (within 3%)?

    python -m bench.dominance --models llama-s256,gpt2-eager-s256 --rounds 7 --out bench-out/dominance

Per case (the real-model suite's, :mod:`bench.hf_models`), every contender is compiled in one
process on its own copy of the model (same seed), through Inductor.  Its peak is the exact CPU
allocator peak of one step (:func:`fxremat.profiling.measure_peak`); its step time is the median of
``--rounds`` steps taken interleaved with every other contender's, in an order that rotates each
round (as :mod:`bench.interleaved`), so a busy machine slows all alike.  Two points' step times are
compared by the median of their per-round ratios (:func:`time_ratio`: the two steps of a round are
taken moments apart, so a slow stretch of the machine cancels in the ratio), not the ratio of their
medians, which on a shared 2-core VM moved single verdicts by 5% between runs.  fxremat's points are its
least-peak plan and its plans at ``memory_budget`` fractions (:data:`FXREMAT_POINTS`, or ``--budgets``).

Writes ``dominance.json`` (every step time), ``dominance.md`` (one table per case: each reference
point, the fxremat point that dominates it, or the nearest miss) and, with matplotlib,
``dominance-<case>.png`` (peak against step time: min-cut's curve, per-layer checkpointing,
fxremat's curve).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

import fxremat

from . import contenders as C
from .hf_models import hf_cases, select_cases
from .measure import _predictions, no_caches
from .report import machine_info

__all__ = ["MIN_CUT_POINTS", "FXREMAT_POINTS", "TIME_SLACK", "NOISE", "dominating", "time_ratio", "points_of", "recompute_order", "step_order", "main"]

MIN_CUT_POINTS = (1.0, 0.8, 0.5, 0.2)  # activation_memory_budget (1.0 is PyTorch's default)
FXREMAT_POINTS = (None, 0.2, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # memory_budget (None: the least-peak plan)
TIME_SLACK = 1.03  # an fxremat point dominates when its median step is at most this many times the other's
NOISE = 0.03  # measured medians closer than this (a fraction) are not ordered (the VM's spread)
MIB = 2**20


def _contenders(case: Any, budgets: tuple[float | None, ...] = FXREMAT_POINTS) -> list[C.Contender]:
    out = [C.Contender(f"min-cut@{b}", "min-cut", "inductor", b) for b in MIN_CUT_POINTS]
    out.append(C.Contender("hf-ckpt", "hf-ckpt", "inductor"))
    out += [C.Contender("fxremat" if b is None else f"fxremat@{b}", "fxremat", "inductor", b) for b in budgets]
    return [c for c in out if c.static_skip(case) is None]


@dataclasses.dataclass(frozen=True)
class Point:
    name: str
    family: str
    peak_bytes: int
    step_s: float  # median
    steps: tuple[float, ...] = ()  # every round's step, in round order (empty: only the median is known)

    def dominates(self, other: "Point", slack: float = TIME_SLACK) -> bool:
        return self.peak_bytes <= other.peak_bytes and time_ratio(self, other) <= slack


def time_ratio(a: Point, b: Point) -> float:
    """``a``'s step time over ``b``'s: the median of the per-round ratios where both were measured
    in the same rounds, else the ratio of the medians."""
    if a.steps and len(a.steps) == len(b.steps):
        return statistics.median(x / y for x, y in zip(a.steps, b.steps))
    return a.step_s / b.step_s


def dominating(points: list[Point], ref: Point, slack: float = TIME_SLACK) -> Point | None:
    """The fastest fxremat point (relative to ``ref``) that dominates ``ref`` (None: none does)."""
    wins = [p for p in points if p.family == "fxremat" and p.dominates(ref, slack)]
    return min(wins, key=lambda p: (time_ratio(p, ref), p.peak_bytes)) if wins else None


def points_of(result: dict[str, Any]) -> list[Point]:
    """The points of one case of ``dominance.json`` (each with its rounds where recorded)."""
    steps = result.get("step_s", {})
    return [Point(**{**p, "steps": tuple(steps.get(p["name"], ()))}) for p in result["points"]]


def _prepare(case: Any, contender: C.Contender):
    built = case.build("cpu")
    module, recorder = contender.prepare(built.module)

    def step() -> float:
        built.module.zero_grad(set_to_none=True)
        start = time.perf_counter()
        case.loss(module(*built.inputs), built.target).backward()
        return time.perf_counter() - start

    return built, step, recorder


def _peak(built: Any, step: Any) -> int:
    from fxremat.profiling import measure_peak

    built.module.zero_grad(set_to_none=True)
    gc.collect()
    return measure_peak(step, device="cpu").peak_bytes


def measure_case(case: Any, rounds: int, budgets: tuple[float | None, ...] = FXREMAT_POINTS) -> dict[str, Any]:
    steppers, peaks, errors, predicted = {}, {}, {}, {}
    for c in _contenders(case, budgets):
        try:
            fxremat.last_reports(clear=True)
            built, step, recorder = _prepare(case, c)
            step()  # compile and warm up
            predicted[c.name] = _predictions(c, recorder)
            peaks[c.name] = _peak(built, step)
            steppers[c.name] = (c, step)
        except Exception as exc:  # noqa: BLE001 - one contender failing must not hide the others
            errors[c.name] = f"{type(exc).__name__}: {exc}"
    times: dict[str, list[float]] = {name: [] for name in steppers}
    order = list(steppers)
    for r in range(rounds):
        for name in order[r % len(order):] + order[: r % len(order)]:
            times[name].append(steppers[name][1]())
    points = [{"name": name, "family": steppers[name][0].family, "peak_bytes": peaks[name],
               "step_s": statistics.median(times[name])} for name in order]
    return {"points": points, "step_s": times, "errors": errors, "predicted": predicted}


def recompute_order(points: list[Point], predicted: dict[str, dict[str, Any]]) -> tuple[int, int]:
    """How well fxremat's predicted recompute cost orders its points' measured step times: of the
    pairs of fxremat points whose predicted recompute differs by more than 1% of a forward,
    (pairs ordered alike by prediction and measured median step, all such pairs)."""
    fx = [(predicted[p.name]["recompute"], p.step_s) for p in points
          if p.family == "fxremat" and predicted.get(p.name, {}).get("recompute") is not None]
    return _ordered_alike(fx, lambda a, b: abs(a[0] - b[0]) > 0.01)


def _ordered_alike(xs: list[tuple[float, float]], counted) -> tuple[int, int]:
    """Of the pairs of (predicted, measured) that ``counted(a, b)`` accepts: (pairs whose two
    values are ordered alike, all such pairs)."""
    pairs = [(a, b) for i, a in enumerate(xs) for b in xs[i + 1:] if counted(a, b)]
    return sum((a[0] - b[0]) * (a[1] - b[1]) > 0 for a, b in pairs), len(pairs)


def step_order(points: list[Point], predicted: dict[str, dict[str, Any]], noise: float = NOISE) -> tuple[int, int]:
    """How well the time model (:mod:`fxremat.timing`) orders every point it can predict (min-cut's
    and fxremat's): of the pairs whose measured median steps differ by more than ``noise`` (a
    fraction of the faster), (pairs the predicted step time orders alike, all such pairs)."""
    xs = [(predicted[p.name]["predicted_step_s"], p.step_s) for p in points
          if predicted.get(p.name, {}).get("predicted_step_s") is not None]
    return _ordered_alike(xs, lambda a, b: abs(a[1] - b[1]) > noise * min(a[1], b[1]))


def _table(label: str, points: list[Point], predicted: dict[str, dict[str, Any]]) -> str:
    lines = [f"#### {label}", "",
             "| point | peak MiB | step ms | dominated by (peak, time ratio: median of per-round ratios) |",
             "|---|---:|---:|---|"]
    for p in points:
        if p.family == "fxremat":
            continue
        win = dominating(points, p)
        if win is not None:
            verdict = f"**{win.name}** ({win.peak_bytes / MIB:.2f} MiB, {time_ratio(win, p):.3f}x)"
        else:
            low = [q for q in points if q.family == "fxremat" and q.peak_bytes <= p.peak_bytes]
            near = min(low, key=lambda q: time_ratio(q, p)) if low else None
            verdict = "none" + (f" (nearest: {near.name}, {near.peak_bytes / MIB:.2f} MiB, "
                                f"{time_ratio(near, p):.3f}x)" if near else " (no fxremat point at or below its peak)")
        lines.append(f"| {p.name} | {p.peak_bytes / MIB:.2f} | {p.step_s * 1e3:.1f} | {verdict} |")
    def recompute(name: str) -> str:
        share = predicted.get(name, {}).get("recompute")
        return "" if share is None else f", {100 * share:.0f}% recompute predicted"

    def estimate(name: str) -> str:
        s = predicted.get(name, {}).get("predicted_step_s")
        return "" if s is None else f", step estimated {s * 1e3:.1f} ms"

    agree, pairs = recompute_order(points, predicted)
    t_agree, t_pairs = step_order(points, predicted)
    lines += ["", "fxremat's points: " + ", ".join(
        f"{p.name} {p.peak_bytes / MIB:.2f} MiB / {p.step_s * 1e3:.1f} ms{recompute(p.name)}{estimate(p.name)}"
        for p in points if p.family == "fxremat"), "",
        "min-cut's points: " + ", ".join(f"{p.name}{estimate(p.name)}" for p in points if p.family == "min-cut"), "",
        f"predicted recompute orders measured step time alike on {agree} of {pairs} pairs of fxremat points; "
        f"the estimated step time (fxremat.timing) on {t_agree} of {t_pairs} pairs of points (min-cut's and "
        f"fxremat's) whose medians differ by more than {100 * NOISE:.0f}%", ""]
    return "\n".join(lines)


def _plot(label: str, points: list[Point], out: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for family, color, marker, text in (("min-cut", "#1f77b4", "s", "min-cut (activation_memory_budget)"),
                                        ("fxremat", "#d62728", "D", "fxremat (memory_budget)")):
        ps = sorted((p for p in points if p.family == family), key=lambda p: p.step_s)
        ax.plot([p.step_s * 1e3 for p in ps], [p.peak_bytes / MIB for p in ps], marker=marker, color=color, label=text)
        for p in ps:
            ax.annotate(p.name.split("@")[-1] if "@" in p.name else "least peak",
                        (p.step_s * 1e3, p.peak_bytes / MIB), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for p in points:
        if p.family == "hf-ckpt":
            ax.plot([p.step_s * 1e3], [p.peak_bytes / MIB], "^", color="#2ca02c", markersize=9,
                    label="per-layer checkpointing (HF)")
    ax.set_xlabel("step time, median of interleaved steps (ms)")
    ax.set_ylabel("peak memory of one step (MiB)")
    ax.set_title(f"{label}: peak vs step time (through Inductor)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    path = out / f"dominance-{label}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _recompile_limit(limit: int):
    """Dynamo's per-code-object limit raised: every contender compiles the same ``forward`` with
    its own backend, one cache entry each; past the limit (8) Dynamo would run the rest eagerly."""
    import torch._dynamo.config as dynamo_config

    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    return dynamo_config.patch(**{name: max(limit, getattr(dynamo_config, name))})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.dominance", description=__doc__.splitlines()[0])
    p.add_argument("--models", help="comma-separated case labels (python -m bench.real --list)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="the tiny configs of python -m bench.real --quick")
    p.add_argument("--out", default="bench-out/dominance", help="output directory")
    p.add_argument("--rejudge", metavar="JSON", default=None,
                   help="measure nothing: print the tables of a dominance.json written before")
    p.add_argument("--budgets", default=None,
                   help="fxremat's points: comma-separated memory_budget fractions, 'least' for the least-peak "
                        "plan (default: " + ",".join("least" if b is None else str(b) for b in FXREMAT_POINTS) + ")")
    args = p.parse_args(argv)
    if args.rejudge is not None:
        doc = json.loads(Path(args.rejudge).read_text())
        for label, result in doc["cases"].items():
            print(_table(label, points_of(result), result.get("predicted", {})), flush=True)
        return 0
    if not args.models:
        p.error("--models is required (or --rejudge)")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    try:
        budgets = FXREMAT_POINTS if args.budgets is None else tuple(
            None if b.strip() == "least" else float(b) for b in args.budgets.split(",") if b.strip())
    except ValueError:
        p.error(f"--budgets: fractions or 'least', got {args.budgets!r}")
    if any(b is not None and not 0.0 < b <= 1.0 for b in budgets):
        p.error(f"--budgets: fractions in (0, 1], got {args.budgets!r}")
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    try:
        cases = select_cases(hf_cases(args.quick), [m.strip() for m in args.models.split(",") if m.strip()])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"machine": machine_info("cpu"), "rounds": args.rounds, "threads": args.threads,
           "time_slack": TIME_SLACK, "cases": {}}
    doc["machine"]["command"] = " ".join(["python", "-m", "bench.dominance", *(argv if argv is not None else sys.argv[1:])])
    tables = []
    with no_caches(), _recompile_limit(4 * (len(MIN_CUT_POINTS) + len(budgets) + 1)):
        for case in cases:
            result = measure_case(case, args.rounds, budgets)
            doc["cases"][case.label] = result
            points = points_of(result)
            tables.append(_table(case.label, points, result["predicted"]))
            print(tables[-1], flush=True)
            for name, err in result["errors"].items():
                print(f"  {name} failed: {err}", flush=True)
            _plot(case.label, points, out)
            (out / "dominance.json").write_text(json.dumps(doc, indent=1))
            (out / "dominance.md").write_text("\n".join(tables))
            torch._dynamo.reset()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
