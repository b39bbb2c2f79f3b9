"""End-to-end benchmark: fxremat against eager, checkpoint_sequential and PyTorch's min-cut partitioner.

    python -m bench                          # CPU default suite (compiler "eager"), < 15 min on 2 cores
    python -m bench --quick                  # smoke test: tiny sizes, a minute or two
    python -m bench --inductor               # also Inductor: min-cut vs fxremat on the smallest sizes
    python -m bench --device cuda --gpu-suite    # GPU suite (see bench/gpu.sh), deadline 450 s
    python -m bench --from-json OUT/results.json # re-render the table and plots of a run

Every contender runs a full training step (forward, loss, backward) on its own identical copy of
the model and inputs; see bench/measure.py for what is measured and how.  Output in --out: results.json
(machine, configuration, every figure; rewritten after each contender), results.md (the table,
ratios against min-cut from the same run) and PNG plots (if matplotlib is installed).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from . import contenders as C
from .measure import Timing, no_caches
from .models import MODELS, default_depths, make_case
from .report import machine_info, markdown, write_json
from .suite import Job, Runner, plan_jobs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {','.join(MODELS)}")
    p.add_argument("--depths", default=None, help="ResNet depths in BasicBlocks, comma-separated "
                   "(default CPU 8,16,32; CUDA 32,128,500; --quick 2,4)")
    p.add_argument("--device", default=None, help="cpu or cuda[:i] (default: cuda if available)")
    p.add_argument("--compiler", choices=("eager", "inductor"), default=None,
                   help="compiler behind the partitioners (default: eager on CPU, inductor on CUDA)")
    p.add_argument("--inductor", action="store_true",
                   help="on CPU, also run min-cut vs fxremat through Inductor on the smallest size of each model")
    p.add_argument("--out", default=None, help="output directory (default bench/out/<date>)")
    p.add_argument("--quick", action="store_true", help="tiny sizes and few steps: a smoke test")
    p.add_argument("--sweep", choices=("smallest", "all", "none"), default="smallest",
                   help="where to run the budget sweep: every model but only the smallest ResNet (default), "
                        "every case, or nowhere")
    p.add_argument("--gpu-suite", action="store_true",
                   help="the GPU suite: CUDA sizes, headline figures first, largest batch under a memory cap, "
                        "--deadline-s 450 unless given")
    p.add_argument("--deadline-s", type=float, default=None, help="skip contenders that would start (or, by "
                   "estimate, end) later than this many seconds after the start")
    p.add_argument("--batch-cap", action="store_true", help="run the largest-batch-under-a-cap search "
                   "(on by default with --gpu-suite; on CPU only for testing the search itself)")
    p.add_argument("--cap-mib", type=float, default=None, help="memory cap for the batch search "
                   "(default 4096 MiB on CUDA, 48 MiB on CPU)")
    p.add_argument("--cap-depth", type=int, default=None, help="ResNet depth for the batch search (default 16)")
    p.add_argument("--warm", type=int, default=None, help="untimed steps after the peak-measuring step")
    p.add_argument("--timed", type=int, default=None, help="timed steps (median reported; fewer when slow)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default 1 on CPU: on a shared 2-core machine OpenMP spin-waits make "
                        "2-thread step times ~3x slower and erratic; torch's default on CUDA)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--from-json", default=None, metavar="RESULTS_JSON",
                   help="measure nothing: re-render results.md and the plots from an earlier run's results.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    args = parse_args(argv)
    if args.from_json:
        return from_json(Path(args.from_json), Path(args.out) if args.out else None, not args.no_plots)
    started = time.time()
    device = args.device or ("cuda" if (args.gpu_suite or torch.cuda.is_available()) else "cpu")
    cuda = device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("error: --device cuda but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    if cuda and torch.device(device).index is not None:  # set_device("cuda") without an index raises
        torch.cuda.set_device(torch.device(device))
    if args.threads or not cuda:
        torch.set_num_threads(args.threads or 1)
    compiler = args.compiler or ("inductor" if cuda else "eager")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in models if m not in MODELS]
    if bad:
        print(f"error: unknown models {bad}; expected a subset of {list(MODELS)}", file=sys.stderr)
        return 2
    depths = [int(d) for d in args.depths.split(",")] if args.depths else list(default_depths(device, args.quick))
    deadline_s = args.deadline_s if args.deadline_s is not None else (450.0 if args.gpu_suite else None)
    timing = Timing(
        warm=args.warm if args.warm is not None else (1 if not cuda else 3),
        timed=args.timed if args.timed is not None else (3 if args.quick else (5 if not cuda else 10)),
        min_timed=1 if args.quick else 2,
        max_timed_s=2.0 if args.quick else (6.0 if not cuda else 5.0),
    )
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "out" / f"{_dt.datetime.now():%Y-%m-%d_%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)

    jobs = plan_jobs(models, depths, device, args.quick, compiler, args.sweep, args.inductor and not cuda
                     and compiler != "inductor", gpu_suite=args.gpu_suite)
    want_cap = args.batch_cap or args.gpu_suite
    if args.gpu_suite:
        jobs = _gpu_order(jobs)

    doc: dict[str, Any] = {
        "machine": machine_info(device),
        "config": {
            "device": device, "compiler": compiler, "models": models, "depths": depths,
            "threads": torch.get_num_threads(), "quick": args.quick, "sweep": args.sweep, "inductor": args.inductor, "gpu_suite": args.gpu_suite, "deadline_s": deadline_s,
            "timing": dataclasses.asdict(timing),
            "tolerance": "rtol=atol=1e-4 for the eager-compiler paths on CPU; 1e-3 with Inductor or on CUDA",
            "peak": ("CUDA: max_memory_allocated after reset_peak_memory_stats, above memory allocated at the step's "
                     "start" if cuda else "CPU: fxremat.profiling.measure_peak (torch.profiler allocator events), "
                     "bytes allocated during the step and not yet freed, max over the step") +
                    "; gradients are set to None before the step, so they count",
        },
        "results": [],
        "batch_cap": [],
    }
    json_path = out / "results.json"

    def flush() -> None:
        doc["results"] = runner.results
        doc["wall_s"] = time.time() - started
        write_json(json_path, doc)

    runner = Runner(device, timing, started + deadline_s if deadline_s else None, flush)
    print(f"fxremat bench: {device} ({doc['machine']['device_name']}), compiler {compiler}, torch {torch.__version__}, "
          f"{len(jobs)} (case, contender) pairs -> {out}", flush=True)
    cap_done = False
    with no_caches():
        for job in jobs:
            if job is _CAP_MARKER:
                doc["batch_cap"] = _batch_cap(runner, args, device, want_cap)
                cap_done = True
                flush()
                continue
            if job.skip is None and (runner.deadline is None or time.time() < runner.deadline):
                print(f"[{time.time() - started:6.0f} s] {job.case.label} {job.contender.key}", flush=True)
            runner.run_one(job)
        if not cap_done:
            doc["batch_cap"] = _batch_cap(runner, args, device, want_cap)
    doc["finished"] = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    if hasattr(os, "getloadavg"):
        doc["machine"]["load_avg_at_end"] = os.getloadavg()
    flush()

    table = render(doc, out, plots=not args.no_plots)
    flush()
    print("\n" + table)
    print(f"wall time {doc['wall_s']:.0f} s; wrote {json_path}, {out / 'results.md'}"
          + "".join(f", {p}" for p in doc.get("plots", [])))
    return 0


def render(doc: dict[str, Any], out: Path, plots: bool = True) -> str:
    """Write results.md (and the plots, into ``doc["plots"]``) from a run's record; returns the table."""
    m = doc["machine"]
    table = markdown(doc["results"], doc.get("batch_cap"))
    header = (f"# fxremat bench, {m['date']}\n\n"
              f"- machine: {m['device_name']}, {m['cores']} cores ({m.get('torch_threads')} torch threads), "
              f"{m['platform']}; Python {m['python']}, torch {m['torch']}\n"
              f"- command: `{m['command']}`; wall time {doc.get('wall_s', 0):.0f} s\n"
              f"- compiler behind the partitioners: {doc['config']['compiler']}\n"
              f"- peak: {doc['config']['peak']}\n\n")
    (out / "results.md").write_text(header + table)
    if plots:
        try:
            from .plots import PlotsUnavailable, make_plots

            doc["plots"] = [str(p) for p in make_plots(doc["results"], out)]
        except PlotsUnavailable as exc:
            doc["plots"] = []
            doc["plots_note"] = str(exc)
            print(exc, file=sys.stderr)
    return table


def from_json(path: Path, out: Path | None, plots: bool) -> int:
    """Re-render results.md and the plots of an earlier (possibly interrupted) run."""
    import json

    doc = json.loads(path.read_text())
    if not plots:
        doc.pop("plots", None)
    out = out or path.parent
    out.mkdir(parents=True, exist_ok=True)
    print(render(doc, out, plots))
    print(f"wrote {out / 'results.md'}" + "".join(f", {p}" for p in doc.get("plots", [])))
    return 0


_CAP_MARKER: Any = object()  # where the batch-cap search runs in the GPU suite's order


def _gpu_order(jobs: list[Job]) -> list[Any]:
    """GPT base contenders, ResNet base up to depth 128, the batch-cap search, deeper ResNets,
    the other models, then the budget sweeps."""
    base_names = {"eager", "ckpt_seq", "min-cut", "fxremat"}

    def prio(job: Job) -> int:
        if job.contender.name not in base_names:
            return 5 if job.case.model == "gpt" else 6
        if job.case.model == "gpt":
            return 0
        if job.case.model == "resnet":
            return 1 if (job.case.depth or 0) <= 128 else 3
        return 4

    ordered: list[Any] = sorted(jobs, key=prio)
    cut = next((i for i, j in enumerate(ordered) if prio(j) > 1), len(ordered))
    ordered.insert(cut, _CAP_MARKER)
    return ordered


def _batch_cap(runner: Runner, args: argparse.Namespace, device: str, want: bool) -> list[dict[str, Any]]:
    cuda = device.startswith("cuda")
    case = make_case("resnet", device, args.quick, depth=args.cap_depth or (16 if not args.quick else 4))
    cons = [C.Contender("min-cut", "min-cut", "eager"), C.Contender("fxremat", "fxremat", "eager")]
    if not want:
        reason = "no GPU: the largest-batch search needs a CUDA device (--batch-cap forces it on CPU)" if not cuda \
            else "not requested (--batch-cap or --gpu-suite)"
        return [{"case": case.label, "contender": c.key, "status": "skipped", "reason": reason,
                 "cap_bytes": 0} for c in cons]
    cap = int((args.cap_mib or (4096 if cuda else 48)) * 2**20)
    print(f"largest batch under {cap / 2**20:.0f} MiB: {case.label} ({case.describe()}), compiler eager", flush=True)
    return runner.batch_cap(case, cons, cap, start=case.size["batch"])


if __name__ == "__main__":
    sys.exit(main())
