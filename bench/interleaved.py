"""Step time of contenders measured interleaved: every contender compiled in one process, then
rounds in which each takes one training step, in an order that rotates every round.

    python -m bench.interleaved --models gpt2-eager-s256,llama-s1024 --contenders hf-ckpt,fxremat --rounds 7

A shared machine slows whatever runs while it is busy; interleaving spreads that over every
contender alike, so the ratio of medians is the fair comparison (``python -m bench.real`` times
contenders one after another).  Cases and contenders are those of ``bench.real``
(:mod:`bench.hf_models`, :func:`bench.contenders.real_contenders`); each contender gets its own
copy of the model built from the same seed.  Memory is not measured here.  Prints one line per
case: the median step of each contender and each one's ratio to the first; ``--out`` writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from . import contenders as C
from .hf_models import hf_cases, select_cases
from .measure import no_caches
from .report import machine_info


def _stepper(case, contender):
    built = case.build("cpu")
    module, _ = contender.prepare(built.module)

    def step() -> float:
        built.module.zero_grad(set_to_none=True)
        start = time.perf_counter()
        case.loss(module(*built.inputs), built.target).backward()
        return time.perf_counter() - start

    return step


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.interleaved", description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True, help="comma-separated case labels (python -m bench.real --list)")
    p.add_argument("--contenders", default="hf-ckpt,fxremat", help="comma-separated; the first is the reference")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="the tiny configs of python -m bench.real --quick")
    p.add_argument("--out", default=None, help="JSON file for the step times")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    by_name = {c.name: c for c in C.real_contenders()}
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown or not names:
        print(f"error: unknown contenders {unknown}; known: {sorted(by_name)}", file=sys.stderr)
        return 2
    try:
        cases = select_cases(hf_cases(args.quick), [m.strip() for m in args.models.split(",") if m.strip()])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    doc = {"machine": machine_info("cpu"), "rounds": args.rounds, "threads": args.threads, "cases": {}}
    doc["machine"]["command"] = " ".join(["python", "-m", "bench.interleaved", *(argv if argv is not None else sys.argv[1:])])
    with no_caches():
        for case in cases:
            steppers = {}
            for name in names:
                skip = by_name[name].static_skip(case)
                if skip is None:
                    steppers[name] = _stepper(case, by_name[name])
                    steppers[name]()  # compile and warm up
            times: dict[str, list[float]] = {name: [] for name in steppers}
            order = list(steppers)
            for r in range(args.rounds):
                for name in order[r % len(order):] + order[: r % len(order)]:
                    times[name].append(steppers[name]())
            median = {name: statistics.median(ts) for name, ts in times.items()}
            ref = median[order[0]]
            doc["cases"][case.label] = {"step_s": times, "median_s": median}
            line = "  ".join(f"{name} {median[name] * 1e3:8.1f} ms ({median[name] / ref:.3f})" for name in order)
            print(f"{case.label:24s} {line}", flush=True)
            torch._dynamo.reset()
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
