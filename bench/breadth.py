"""Breadth check: every case of bench/breadth_models.py, breadth_more.py, breadth_round6_{a,b}.py, breadth_round7.py,
breadth_round8.py and breadth_round9.py through fxremat and min-cut.

    python -m bench.breadth                      # eager compiler: planned?  gradients equal?  (247 cases)
    python -m bench.breadth --inductor           # through Inductor, exact CPU peaks too (~30 min on 2 cores)
    python -m bench.breadth --inductor mistral swin   # a subset, by name
    python -m bench.breadth --list
    python -m bench.breadth --medium --inductor --hf-ckpt   # 94 cases at an activation-dominated size

For each case: two training steps (seeded, so random ops draw alike) in eager, through
``min_cut_backend`` and through ``fxremat.make_backend`` (the same compiler); the largest gradient
error of each against eager, relative to each gradient's largest entry, and fxremat's against
min-cut's; whether fxremat planned every graph (a fallback logs a warning, printed); with
``--inductor`` the measured peak of one step of each (fxremat.profiling.peak_of_training_step) and
the predicted peaks; with ``--hf-ckpt`` also the peak of HF's per-layer checkpointing
(``gradient_checkpointing_enable(use_reentrant=False)``, default compile) where the model has it
(round 7's DenseNet has the same switch: torchvision's ``memory_efficient``), on a copy of the model;
with ``--timed N`` the median step time of each contender over N interleaved rounds (one process, the
order rotating every round; ratios against hf-ckpt where it ran, else min-cut).
``--medium``: the cases of :mod:`bench.breadth_medium`, ``_medium_more``, ``_medium_round6``,
:mod:`bench.breadth_round7`'s ``MEDIUM_ROUND7`` and :mod:`bench.breadth_round9`'s ``MEDIUM_ROUND9`` instead.
Under Inductor random ops (dropout, stochastic depth) draw other numbers than eager's unless
``--fallback-random``: compare such cases with min-cut, not eager.  A gradient is compared relative to
its largest entry, or to NOISE_FLOOR of the model's largest gradient entry where that is more (a
gradient zero in exact arithmetic is rounding noise).  A JSON line per case goes to --json if given.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from typing import Any

import numpy as np
import torch

import fxremat
from fxremat.backend import min_cut_backend
from fxremat.profiling import output_loss, peak_of_training_step
from fxremat.report import captured_warnings

from .breadth_models import CASES as _CASES
from .breadth_more import MORE
from .breadth_round6_a import ROUND6_A
from .breadth_round6_b import ROUND6_B
from .breadth_round7 import ROUND7
from .breadth_round8 import ROUND8
from .breadth_round9 import ROUND9

# round 5 (bench.breadth_more): 41 families added 2026-12-05; rounds 6 and 7: added 2026-12-06
CASES = {**_CASES, **MORE, **ROUND6_A, **ROUND6_B, **ROUND7, **ROUND8, **ROUND9}

MIB = 2**20


def _step(model: torch.nn.Module, inputs: tuple, loss_fn, fn, seed: int):
    model.zero_grad(set_to_none=True)
    for t in inputs:  # an input's gradient from an earlier step (or a peak measurement) must not accumulate
        if isinstance(t, torch.Tensor):
            t.grad = None
    torch.manual_seed(seed)
    np.random.seed(seed)  # HF's SpecAugment and BigBird's random blocks draw with numpy
    out = fn(*inputs)
    loss = loss_fn(out) if loss_fn else output_loss(out)
    loss.backward()
    grads = {n: _dense(p.grad) for n, p in model.named_parameters() if p.grad is not None}
    grads.update({f"input {i}": t.grad.clone() for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.grad is not None})
    return loss.detach().clone(), grads


def _dense(grad: torch.Tensor) -> torch.Tensor:
    """A copy of ``grad``, dense (a sparse embedding's gradient is compared entry by entry)."""
    return grad.to_dense() if grad.is_sparse else grad.clone()


NOISE_FLOOR = 1e-6  # of the model's largest gradient entry: below it, a gradient is rounding noise


def _error(a, b) -> tuple[float, str]:
    """Largest difference of ``a`` from ``b``: the loss's, then each gradient's relative to its largest
    entry, or to NOISE_FLOOR times the largest entry of any gradient where that is more.  A gradient
    that is zero in exact arithmetic (an attention key's bias: softmax ignores a constant added to
    every score) is rounding noise of about 1e-12 in float32, which differs between any two kernel
    orders; relative to its own largest entry it would read as an error of order 1."""
    (la, ga), (lb, gb) = a, b
    if ga.keys() != gb.keys():
        return float("inf"), f"gradients of {sorted(set(ga) ^ set(gb))} on one side only"
    worst = ((la - lb).abs().item(), "loss")
    floor = NOISE_FLOOR * max((g.abs().max().item() for g in gb.values() if g.numel()), default=0.0)
    for k, g in gb.items():
        scale = max(g.abs().max().item() if g.numel() else 0.0, floor, 1e-12)
        worst = max(worst, ((ga[k] - g).abs().max().item() / scale, k))
    return worst


def run_case(name: str, compiler: str, cases: dict | None = None, hf_ckpt: bool = False, timed: int = 0) -> dict[str, Any]:
    model, inputs, loss_fn = (cases or CASES)[name]()
    model.train()
    # Each contender starts from the same state: a forward may update buffers or weights in place
    # (spectral norm's power iteration, BatchNorm's statistics, Embedding's max_norm).
    state = copy.deepcopy(model.state_dict())

    def steps(fn):
        model.load_state_dict(state)
        return [_step(model, inputs, loss_fn, fn, seed) for seed in (1, 2)]

    out: dict[str, Any] = {"case": name, "compiler": compiler}
    eager = steps(model)
    torch._dynamo.reset()
    mc = torch.compile(model, backend=min_cut_backend(compiler=compiler))
    mc_steps = steps(mc)
    if compiler == "inductor":
        out["min_cut_peak_mib"] = peak_of_training_step(mc, inputs, loss_fn) / MIB
    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
    fx = torch.compile(model, backend=fxremat.make_backend(compiler=compiler))
    with captured_warnings() as warnings:  # fxremat's fallbacks, logged when it compiles
        fx_steps = steps(fx)
    if compiler == "inductor":
        out["fxremat_peak_mib"] = peak_of_training_step(fx, inputs, loss_fn) / MIB
    reports = fxremat.last_reports()
    out["graphs"] = [{"chosen": r.chosen, "stages": r.stages, "predicted_mib": r.predicted_peak_bytes / MIB,
                      "min_cut_predicted_mib": r.min_cut.peak_bytes / MIB} for r in reports]
    out["fallback_warnings"] = " | ".join(warnings)
    out["fxremat_vs_eager"] = max(_error(a, b) for a, b in zip(fx_steps, eager))
    out["min_cut_vs_eager"] = max(_error(a, b) for a, b in zip(mc_steps, eager))
    out["fxremat_vs_min_cut"] = max(_error(a, b) for a, b in zip(fx_steps, mc_steps))
    contenders = {"min-cut": mc, "fxremat": fx}
    if hf_ckpt and compiler == "inductor" and getattr(getattr(model, "hf", model), "supports_gradient_checkpointing", False):
        # a copy of its own: switching checkpointing on in `model` would make Dynamo recompile mc and fx
        ck_model = copy.deepcopy(model)
        getattr(ck_model, "hf", ck_model).gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        contenders["hf-ckpt"] = ck = torch.compile(ck_model)
        out["hf_ckpt_peak_mib"] = peak_of_training_step(ck, inputs, loss_fn) / MIB
    if timed and compiler == "inductor":
        out["step_ms"] = _interleaved_steps(contenders, inputs, loss_fn, timed)
    return out


def _interleaved_steps(contenders: dict, inputs: tuple, loss_fn, rounds: int) -> dict[str, float]:
    """Median step time (ms) of each compiled contender, measured in ``rounds`` rounds in which each
    takes one step, in an order that rotates every round (as ``bench.interleaved`` does)."""

    def step(fn) -> float:
        fn.zero_grad(set_to_none=True)  # a compiled nn.Module: zeroes the model's own gradients
        for t in inputs:
            if isinstance(t, torch.Tensor):
                t.grad = None
        start = time.perf_counter()
        out = fn(*inputs)
        (loss_fn(out) if loss_fn else output_loss(out)).backward()
        return time.perf_counter() - start

    names = list(contenders)
    times: dict[str, list[float]] = {n: [] for n in names}
    for n in names:  # warm: the compiled graphs exist already; this takes the first-call costs out
        step(contenders[n])
    for r in range(rounds):
        for n in names[r % len(names):] + names[: r % len(names)]:
            times[n].append(step(contenders[n]))
    return {n: 1e3 * float(np.median(ts)) for n, ts in times.items()}


def _line(r: dict[str, Any]) -> str:
    graphs = " ".join(f"{g['chosen']}({g['stages']})" for g in r["graphs"]) or "no graph"
    peaks = ""
    if "fxremat_peak_mib" in r:
        peaks = (f"  peak {r['fxremat_peak_mib']:7.2f} vs min-cut {r['min_cut_peak_mib']:7.2f} MiB "
                 f"({r['fxremat_peak_mib'] / r['min_cut_peak_mib']:.3f})")
        if "hf_ckpt_peak_mib" in r:
            peaks += f", hf-ckpt {r['hf_ckpt_peak_mib']:7.2f} ({r['fxremat_peak_mib'] / r['hf_ckpt_peak_mib']:.3f})"
    if "step_ms" in r:
        ms = r["step_ms"]
        ref = ms.get("hf-ckpt", ms["min-cut"])
        peaks += "  step " + ", ".join(f"{n} {v:.0f} ms ({v / ref:.3f})" for n, v in ms.items())
    errs = (f"  err vs eager {r['fxremat_vs_eager'][0]:.1e} (min-cut {r['min_cut_vs_eager'][0]:.1e}), "
            f"vs min-cut {r['fxremat_vs_min_cut'][0]:.1e}")
    warn = f"\n      warning: {r['fallback_warnings']}" if r["fallback_warnings"] else ""
    return f"{r['case']:20s} {graphs}{peaks}{errs}{warn}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.breadth", description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", help=f"case names (default: all {len(CASES)})")
    p.add_argument("--inductor", action="store_true", help="compile with Inductor and measure peaks")
    p.add_argument("--fallback-random", action="store_true", help="Inductor's fallback_random=True")
    p.add_argument("--json", default=None, help="append one JSON line per case to this file")
    p.add_argument("--medium", action="store_true",
                   help="the cases of bench.breadth_medium, _more, _round6, and rounds 7 and 9 (activation-dominated sizes)")
    p.add_argument("--hf-ckpt", action="store_true", help="with --inductor: also HF per-layer checkpointing's peak")
    p.add_argument("--timed", type=int, default=0, metavar="ROUNDS",
                   help="with --inductor: median step time of each contender over ROUNDS interleaved rounds")
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    if args.timed < 0:
        p.error("--timed must be at least 0")
    if args.medium:
        from .breadth_medium import MEDIUM
        from .breadth_medium_more import MEDIUM_MORE
        from .breadth_medium_round6 import MEDIUM_ROUND6
        from .breadth_round7 import MEDIUM_ROUND7
        from .breadth_round9 import MEDIUM_ROUND9

        cases = {**MEDIUM, **MEDIUM_MORE, **MEDIUM_ROUND6, **MEDIUM_ROUND7, **MEDIUM_ROUND9}
    else:
        cases = CASES
    if args.list:
        print("\n".join(cases))
        return 0
    unknown = [c for c in args.cases if c not in cases]
    if unknown:
        print(f"error: unknown cases {unknown}; see --list", file=sys.stderr)
        return 2
    import torch._inductor.config as inductor_config
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    compiler = "inductor" if args.inductor else "eager"
    print(f"bench.breadth: torch {torch.__version__}, transformers {transformers.__version__}, {compiler}", flush=True)
    failed = 0
    with fxremat._torch.caches_disabled(), inductor_config.patch(fallback_random=args.fallback_random):
        for name in args.cases or list(cases):
            start = time.time()
            try:
                r = run_case(name, compiler, cases, args.hf_ckpt, args.timed)
            except Exception as exc:  # noqa: BLE001 - a failing case is reported, the rest still run
                failed += 1
                r = {"case": name, "error": f"{type(exc).__name__}: {exc}"[:500]}
                print(f"{name:20s} FAILED {r['error']}", flush=True)
            else:
                print(f"{_line(r)}  [{time.time() - start:.0f} s]", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
