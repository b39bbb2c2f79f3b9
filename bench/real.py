"""Real-model suite: HF transformers architectures through Inductor, fxremat against min-cut and HF's checkpointing.

    python -m bench.real                               # every case of bench/hf_models.py (hours on 2 CPU cores)
    python -m bench.real --quick                       # tiny configs of every family (LMs masked): a smoke test
    python -m bench.real --models llama-s256,vit-i128-b4   # a subset: labels, families or globs ('llama*')
    python -m bench.real --contenders min-cut,fxremat  # a subset of the contenders (eager always runs)
    python -m bench.real --from-json OUT/results.json  # re-render the tables of an earlier run
    python -m bench.real --list                        # the case labels

Cases: :mod:`bench.hf_models` (random weights from configs, no downloads).  Contenders
(:func:`bench.contenders.real_contenders`), each on its own fresh copy, all through Inductor:
``min-cut`` (PyTorch's default partitioner), ``min-cut@0.5`` (its activation_memory_budget),
``hf-ckpt`` (``gradient_checkpointing_enable(use_reentrant=False)`` then the default compile),
``fxremat`` and ``fxremat@0.5``; ``eager`` runs first as the reference for the loss and gradients.
What is measured and how: bench/measure.py (exact CPU peaks of one training step, gradients
included; median step time of each contender's own timed steps, taken one contender after another).
Output in --out (default bench-out/real): results.json (rewritten after every result) and
results.md (the summary table, then every row).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from . import contenders as C
from .hf_models import hf_cases, select_cases
from .measure import Timing, no_caches
from .report import _check, _mib, _ratio, _status, machine_info, markdown, write_json
from .suite import Job, Runner

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "bench-out" / "real"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.real", description=__doc__.splitlines()[0])
    p.add_argument("--models", default=None, help="comma-separated case labels, families (e.g. llama) or globs "
                   "('gpt2-*-mask'); default: every case (see --list)")
    p.add_argument("--contenders", default=None, help="comma-separated subset of "
                   f"{','.join(c.name for c in C.real_contenders() if c.family != 'eager')} (eager always runs: "
                   "it is the reference for the gradients)")
    p.add_argument("--quick", action="store_true", help="tiny configs (2 layers, width 32, sequence 32; language "
                   "models with the padding mask only) and few timed steps: a smoke test (~15 min on 2 cores for the "
                   "first twelve families, measured before the held-out ones were added)")
    p.add_argument("--out", default=None, help=f"output directory (default {DEFAULT_OUT})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--deadline-s", type=float, default=None,
                   help="skip contenders that would start later than this many seconds after the start")
    p.add_argument("--timed", type=int, default=None, help="timed steps per contender (median reported)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1, as python -m bench)")
    p.add_argument("--fallback-random", action="store_true",
                   help="Inductor's fallback_random=True: dropout masks drawn as eager draws them, so models with "
                        "dropout (BERT) are checked against eager; not the default path, and min-cut under an "
                        "activation_memory_budget then recomputes dropout with fresh masks (wrong gradients)")
    p.add_argument("--from-json", default=None, metavar="RESULTS_JSON", help="measure nothing: re-render results.md")
    p.add_argument("--list", action="store_true", help="print the case labels and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    args = parse_args(argv)
    if args.from_json:
        import json

        path = Path(args.from_json)
        doc = json.loads(path.read_text())
        out = Path(args.out) if args.out else path.parent
        out.mkdir(parents=True, exist_ok=True)
        print(render(doc, out))
        return 0
    import transformers

    transformers.logging.set_verbosity_error()  # config notices, and no logging calls inside compiled code
    cases = hf_cases(args.quick, args.seed)
    if args.list:
        print("\n".join(f"{c.label:28s} {c.describe()}" for c in cases))
        return 0
    try:
        if args.models:
            cases = select_cases(cases, [m.strip() for m in args.models.split(",") if m.strip()])
        contenders = _select_contenders(args.contenders)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    started = time.time()
    device = "cpu"
    torch.set_num_threads(args.threads)
    timing = Timing(warm=1, timed=args.timed or (2 if args.quick else 5), min_timed=1 if args.quick else 2,
                    max_timed_s=2.0 if args.quick else 6.0)
    out = Path(args.out) if args.out else DEFAULT_OUT
    out.mkdir(parents=True, exist_ok=True)
    jobs = [Job(case, con, con.static_skip(case)) for case in cases for con in contenders]

    machine = machine_info(device)
    machine["command"] = " ".join([os.path.basename(sys.executable), "-m", "bench.real", *sys.argv[1:]])
    machine["transformers"] = transformers.__version__
    doc: dict[str, Any] = {
        "machine": machine,
        "config": {
            "device": device, "compiler": "inductor", "cases": [c.label for c in cases],
            "sizes": {c.label: c.size for c in cases}, "contenders": [c.key for c in contenders],
            "threads": torch.get_num_threads(), "quick": args.quick, "seed": args.seed,
            "timing": dataclasses.asdict(timing),
            "tolerance": "rtol=atol=1e-3 through Inductor (bench.measure.tolerances)",
            "fallback_random": args.fallback_random,
            "peak": "CPU: fxremat.profiling.measure_peak (torch.profiler allocator events), bytes allocated during "
                    "the step and not yet freed, max over the step; gradients are set to None before the step, "
                    "so they count",
            "step_time": "median of each contender's own timed steps, contenders one after another (not interleaved)",
        },
        "results": [],
    }
    json_path = out / "results.json"

    def flush() -> None:
        doc["results"] = runner.results
        doc["wall_s"] = time.time() - started
        write_json(json_path, doc)

    deadline = started + args.deadline_s if args.deadline_s else None
    runner = Runner(device, timing, deadline, flush)
    print(f"fxremat real-model suite: cpu, Inductor, torch {torch.__version__}, transformers "
          f"{transformers.__version__}, {len(cases)} cases x {len(contenders)} contenders -> {out}", flush=True)
    import torch._inductor.config as inductor_config

    with no_caches(), inductor_config.patch(fallback_random=args.fallback_random):
        for job in jobs:
            if job.skip is None and (deadline is None or time.time() < deadline):
                print(f"[{time.time() - started:6.0f} s] {job.case.label} {job.contender.key}", flush=True)
            runner.run_one(job)
    doc["finished"] = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    flush()
    table = render(doc, out)
    flush()
    print("\n" + table)
    print(f"wall time {doc['wall_s']:.0f} s; wrote {json_path}, {out / 'results.md'}")
    return 0


def _select_contenders(spec: str | None) -> list[C.Contender]:
    every = C.real_contenders()
    if not spec:
        return every
    names = [s.strip() for s in spec.split(",") if s.strip()]
    known = {c.name for c in every}
    bad = [n for n in names if n not in known]
    if bad:
        raise ValueError(f"unknown contenders {bad}; expected a subset of {sorted(known - {'eager'})}")
    return [c for c in every if c.family == "eager" or c.name in names]


# ------------------------------------------------------------------------------- tables


def _row(rows: list[dict[str, Any]], case: str, name: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["case"] == case and r["name"] == name), None)


def _peak(r: dict[str, Any] | None) -> str:
    if r is None:
        return "–"
    if r["status"] == "ok":
        return _mib(r["peak_bytes"])
    if r["status"] == "skipped":
        return "skipped"
    least = re.search(r"smallest peak any plan reaches is (\d+) bytes", r.get("reason") or "")
    if r["status"] == "infeasible" and least:
        return f"infeasible (least {_mib(int(least[1]))})"
    return _status(r)[:60]


def _ok(r: dict[str, Any] | None) -> bool:
    return r is not None and r["status"] == "ok"


def _peak_ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    return _ratio(a["peak_bytes"], b["peak_bytes"]) if _ok(a) and _ok(b) else "–"


def _time_ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    return _ratio(a["step_s"], b["step_s"]) if _ok(a) and _ok(b) else "–"


def _predicted(r: dict[str, Any] | None) -> str:
    if not _ok(r) or not r.get("predicted_peak_bytes"):
        return "–"
    pred, meas = r["predicted_peak_bytes"], r["peak_bytes"]
    return f"{_mib(pred)} / {_mib(meas)} ({pred / meas:.2f})"


def _grads(rows: list[dict[str, Any]], case: str, fallback_random: bool) -> str:
    """Every compiled contender's loss and gradients against eager: 'all match', or what did not.

    A contender off eager exactly as min-cut is (same gradients as min-cut's run) is counted as such:
    the difference is the compiled arithmetic's, not the partitioner's.  With dropout and Inductor's
    own RNG (the default) no compiled run draws eager's masks: each is checked against min-cut's run,
    whose masks it shares."""
    mine = [r for r in rows if r["case"] == case and r.get("compiler")]
    vs_min_cut = not fallback_random and any((r.get("size") or {}).get("dropout") for r in mine)
    mc = _row(rows, case, "min-cut")
    mc_off = _ok(mc) and not (mc.get("check") or {}).get("correct", True)
    bad, matched, rounding, as_min_cut = [], 0, 0, 0
    for r in mine:
        if r["status"] == "failed":
            bad.append(f"{r['name']}: failed")
            continue
        if r["status"] != "ok" or (vs_min_cut and r["name"] == "min-cut"):
            continue
        same = r.get("check_vs_min_cut") or {}
        if vs_min_cut:
            if same.get("correct"):
                matched += 1
            else:
                bad.append(f"{r['name']}: {_check(same)} vs min-cut")
            continue
        text = _check(r.get("check"), r, rows)
        if (r.get("check") or {}).get("correct"):
            matched += 1
        elif text.startswith("yes"):
            rounding += 1
        elif mc_off and r["name"] != "min-cut" and same.get("correct"):
            as_min_cut += 1
        else:
            bad.append(f"{r['name']}: {text}")
    notes = []
    if matched:
        notes.append(f"{matched} match min-cut (dropout: Inductor's RNG)" if vs_min_cut else f"{matched} match")
    if rounding:
        notes.append(f"{rounding} off by eager's own fp32 rounding")
    if as_min_cut:
        notes.append(f"{as_min_cut} off exactly as min-cut")
    return "; ".join(bad + notes) or "–"


def _grad_floor(rows: list[dict[str, Any]], case: str, hf: dict[str, Any] | None) -> str:
    """The parameter gradients' bytes (every contender's run records the same), and "(A)" where
    activations dominate: the gradients are under a third of the per-layer-checkpointing peak
    (issue 10's definition)."""
    grad = next((r["grad_bytes"] for r in rows if r["case"] == case and r.get("grad_bytes")), None)
    if grad is None:
        return "–"
    return _mib(grad) + (" (A)" if _ok(hf) and 3 * grad < hf["peak_bytes"] else "")


def summary(rows: list[dict[str, Any]], fallback_random: bool = False) -> str:
    lines = [
        "| model | weight grads | min-cut peak | hf-ckpt peak | fxremat peak | fxremat / min-cut | fxremat / hf-ckpt "
        "| min-cut@0.5 | fxremat@0.5 | time fxremat / min-cut | time fxremat / hf-ckpt "
        "| fxremat predicted / measured | grads vs eager |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for case in dict.fromkeys(r["case"] for r in rows):
        mc, hf, fx = (_row(rows, case, n) for n in ("min-cut", "hf-ckpt", "fxremat"))
        mc5, fx5 = _row(rows, case, "min-cut@0.5"), _row(rows, case, "fxremat@0.5")
        lines.append(
            f"| {case} | {_grad_floor(rows, case, hf)} | {_peak(mc)} | {_peak(hf)} | {_peak(fx)} "
            f"| {_peak_ratio(fx, mc)} | {_peak_ratio(fx, hf)} "
            f"| {_peak(mc5)} | {_peak(fx5)} | {_time_ratio(fx, mc)} | {_time_ratio(fx, hf)} | {_predicted(fx)} "
            f"| {_grads(rows, case, fallback_random)} |"
        )
    return "\n".join(lines) + "\n"


_SUMMARY_LEGEND = (
    "Peaks in MiB: exact CPU-allocator peak of one training step above its start, gradients included. "
    "Weight grads: the parameter gradients' bytes, alive at the step's end whatever the plan (a floor "
    "under every peak); (A): activations dominate, the gradients are under a third of the hf-ckpt peak.  "
    "Every compiled contender runs through Inductor.  Step-time ratios: medians of each contender's own "
    "timed steps, contenders run one after another (not interleaved; indicative on a shared machine).  "
    "Predicted: fxremat's memory model (max over the compiled graphs) against the measured peak.  Grads: "
    "loss and every gradient of each compiled contender against eager's (rtol = atol = 1e-3); for a model "
    "with dropout, unless --fallback-random, against min-cut's run (Inductor draws its own dropout masks, "
    "the same in every compiled run, not eager's)."
)


def render(doc: dict[str, Any], out: Path) -> str:
    """Write results.md from a run's record; returns the summary table."""
    m, rows = doc["machine"], doc["results"]
    table = summary(rows, doc["config"].get("fallback_random", False))
    header = (f"# fxremat real-model suite, {m['date']}\n\n"
              f"- machine: {m['device_name']}, {m['cores']} cores ({m.get('torch_threads')} torch threads), "
              f"{m['platform']}; Python {m['python']}, torch {m['torch']}, transformers {m.get('transformers')}\n"
              f"- fxremat commit: {m.get('git_commit')}\n"
              f"- command: `{m['command']}`; wall time {doc.get('wall_s', 0):.0f} s\n"
              f"- sizes: see results.json (config.sizes) or `python -m bench.real --list`\n\n")
    (out / "results.md").write_text(header + table + "\n" + _SUMMARY_LEGEND + "\n\n## Every row\n\n" + markdown(rows))
    return table


if __name__ == "__main__":
    sys.exit(main())
