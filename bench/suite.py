"""Which (case, contender) pairs a run measures, in what order, and running them against a deadline.

CPU default (``--compiler eager``): the ResNet depth sweep (eager, ckpt_seq, min-cut, fxremat at
every depth), the budget sweep (min-cut at each activation_memory_budget, fxremat at the same
fractions, fxremat-dp) on the models and sizes ``--sweep`` selects, and with ``--inductor`` the
Inductor pair (min-cut vs fxremat) on the smallest size of each model.  The GPU suite puts the
headline figures first and lets ``--deadline-s`` skip whatever would not finish in time.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

from . import contenders as C
from .measure import Reference, Timing, compare, fp64_reference, max_batch_under_cap, run_contender, tolerances
from .models import Case, make_case

__all__ = ["Job", "plan_jobs", "Runner", "DP_MAX_STAGES"]

DP_MAX_STAGES = 2000  # solve_dp is O(n^2): ~1.4 s at n = 2000 on a 2-core CPU


@dataclasses.dataclass
class Job:
    case: Case
    contender: C.Contender
    skip: str | None = None  # a reason decided when planning


def _cases(models: list[str], depths: list[int], device: str, quick: bool) -> list[Case]:
    out = []
    for m in models:
        if m == "resnet":
            out += [make_case("resnet", device, quick, depth=d) for d in depths]
        else:
            out.append(make_case(m, device, quick))
    return out


def plan_jobs(models: list[str], depths: list[int], device: str, quick: bool, compiler: str, sweep: str,
              inductor: bool, gpu_suite: bool = False) -> list[Job]:
    """Every (case, contender) of the run, skipped ones included with their reason."""
    cases = _cases(models, depths, device, quick)
    if gpu_suite:  # headline figures first: GPT-2 small, then the ResNet depths, then the rest
        order = {"gpt": 0, "resnet": 1, "resnet50": 3, "unet": 4}
        cases.sort(key=lambda c: (order[c.model], c.depth or 0))
    smallest_resnet = min((c.depth for c in cases if c.model == "resnet"), default=None)
    jobs: list[Job] = []
    for case in cases:
        case_compiler = compiler
        if device.startswith("cuda") and case.model == "resnet" and compiler == "inductor":
            # The depth sweep runs through the eager compiler at every depth, so its points are
            # comparable: Inductor on a graph of hundreds of blocks takes minutes per compile.
            case_compiler = "eager"
        contenders = C.base_contenders(case_compiler)
        in_sweep = sweep == "all" or (sweep == "smallest" and (case.model != "resnet" or case.depth == smallest_resnet))
        sweep_list = C.sweep_contenders(case_compiler)
        if in_sweep:
            contenders += sweep_list
        for con in contenders:
            jobs.append(Job(case, con, con.static_skip(case)))
        if not in_sweep:
            why = ("--sweep none" if sweep == "none" else
                   f"budget sweep runs on the smallest ResNet (depth {smallest_resnet}) only (--sweep all runs it here)")
            jobs += [Job(case, con, why) for con in sweep_list]
        if inductor and case_compiler != "inductor":
            smallest = case.model != "resnet" or case.depth == smallest_resnet
            why = None if smallest else "Inductor contenders run on the smallest size of each model only"
            jobs += [Job(case, con, why) for con in C.inductor_contenders()]
        elif compiler != "inductor" and not inductor:
            jobs += [Job(case, con, "Inductor compiles take 20-60 s each on this CPU; pass --inductor")
                     for con in C.inductor_contenders()]
    return jobs


class Runner:
    """Runs jobs in order, calls ``on_result()`` after every result (to write it out), and skips a job whose
    start (or estimated end) is past the deadline."""

    def __init__(self, device: str, timing: Timing, deadline: float | None,
                 on_result: Callable[[], None], log: Callable[[str], None] = print):
        self.device = device
        self.timing = timing
        self.deadline = deadline
        self.on_result = on_result
        self.log = log
        self.refs: dict[tuple[str, str], Reference] = {}  # (case, eager | min-cut/<compiler>)
        self.results: list[dict[str, Any]] = []
        self._durations: dict[tuple[str, str], tuple[int, float]] = {}  # (model, contender) -> (depth, s)

    def _estimate(self, job: Job) -> float:
        prev = self._durations.get((job.case.model, job.contender.key))
        if prev is None or not job.case.depth or not prev[0]:
            return 0.0
        return prev[1] * job.case.depth / prev[0]

    def _record(self, job: Job, result: dict[str, Any]) -> dict[str, Any]:
        case, con = job.case, job.contender
        row = {
            "case": case.label, "model": case.model, "depth": case.depth, "size": case.size,
            "contender": con.key, "name": con.name, "family": con.family, "compiler": con.compiler,
            "budget": con.budget, "solver": con.solver, **result,
        }
        self.results.append(row)
        self.on_result()
        return row

    def skip(self, job: Job, reason: str) -> dict[str, Any]:
        return self._record(job, {"status": "skipped", "reason": reason})

    def run(self, jobs: list[Job]) -> list[dict[str, Any]]:
        for job in jobs:
            self.run_one(job)
        return self.results

    def run_one(self, job: Job) -> dict[str, Any]:
        case, con = job.case, job.contender
        if job.skip:
            return self.skip(job, job.skip)
        reason = self._dynamic_skip(job)
        if reason:
            self.log(f"  {case.label:<12} {con.key:<24} skipped: {reason}")
            return self.skip(job, reason)
        t0 = time.perf_counter()
        same_graph = None
        if con.compiler is not None and con.key != f"min-cut/{con.compiler}":
            same_graph = self.refs.get((case.label, f"min-cut/{con.compiler}"))
        result, ref = run_contender(case, con, self.device, self.timing, self.refs.get((case.label, "eager")),
                                    same_graph)
        if ref is not None and con.key in ("eager", f"min-cut/{con.compiler}"):
            self.refs[(case.label, con.key)] = ref
        if con.family == "eager" and result.get("status") == "ok":
            result["check"] = {"reference": True}  # eager is what every other contender is checked against
        chk = result.get("check")
        if chk and not chk.get("correct", True) and ref is not None:
            self._fp64_check(job, result, ref)
        wall = time.perf_counter() - t0
        result["wall_s"] = wall
        self._durations[(case.model, con.key)] = (case.depth or 0, wall)
        self._annotate(job, result)
        self.log(_line(case, con, result))
        return self._record(job, result)

    def _fp64_check(self, job: Job, result: dict[str, Any], ref: Reference) -> None:
        """A mismatch with eager: measure both against float64, once per case for eager."""
        case = job.case
        if self.deadline is not None and time.time() > self.deadline - 60:
            result["check_vs_fp64"] = {"error": "skipped: too close to the suite deadline"}
            return
        if self.device.startswith("cuda") and (case.depth or 0) > 128:
            result["check_vs_fp64"] = {"error": "skipped: a float64 step of this depth would take minutes on a GPU"}
            return
        try:
            if (case.label, "fp64") not in self.refs:
                self.refs[(case.label, "fp64")] = fp64_reference(case, self.device)
                eager_ref, eager_row = self.refs.get((case.label, "eager")), self._find(case.label, "eager", None)
                if eager_ref is not None and eager_row is not None:
                    eager_row["check_vs_fp64"] = compare(self.refs[(case.label, "fp64")], eager_ref,
                                                         *tolerances(job.contender, self.device))
            result["check_vs_fp64"] = compare(self.refs[(case.label, "fp64")], ref,
                                              *tolerances(job.contender, self.device))
        except Exception as exc:  # noqa: BLE001 - the float64 yardstick is optional
            result["check_vs_fp64"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}

    def _dynamic_skip(self, job: Job) -> str | None:
        now = time.time()
        if self.deadline is not None:
            if now >= self.deadline:
                return "suite deadline (--deadline-s) reached"
            est = self._estimate(job)
            if est and now + est > self.deadline:
                return f"would end past the suite deadline (estimated {est:.0f} s from the previous depth)"
        con = job.contender
        if con.family == "fxremat" and con.solver == "dp":
            lin = self._find(job.case.label, "fxremat", con.compiler)
            if lin is None or lin.get("status") != "ok":
                return "needs the fxremat (linear) result of this case to size the chain first"
            stages = max(lin.get("stages") or [0])
            if stages > DP_MAX_STAGES:
                return f"chain of {stages} stages: solve_dp is O(n^2), run only up to {DP_MAX_STAGES} stages"
        return None

    def _find(self, label: str, name: str, compiler: str | None) -> dict[str, Any] | None:
        for r in self.results:
            if r["case"] == label and r["name"] == name and r["compiler"] == compiler:
                return r
        return None

    def _annotate(self, job: Job, result: dict[str, Any]) -> None:
        """Cross-references: min-cut's predicted peak from fxremat's report of the same case;
        whether fxremat-dp found the same plan as the linear solver."""
        con = job.contender
        if con.family == "fxremat" and con.solver == "linear" and con.budget is None and result.get("status") == "ok":
            mc = self._find(job.case.label, "min-cut", con.compiler)
            if mc is not None:
                mc["predicted_by_fxremat_report_bytes"] = result.get("predicted_min_cut_bytes")
                self.on_result()
        if con.solver == "dp" and result.get("status") == "ok":
            lin = self._find(job.case.label, "fxremat", con.compiler)
            if lin is not None:
                result["same_plan_as_linear"] = (lin.get("plan_peak_bytes") == result.get("plan_peak_bytes") and
                                                 _close(lin.get("recompute_share"), result.get("recompute_share")))

    def batch_cap(self, case: Case, contenders: list[C.Contender], cap_bytes: int, start: int) -> list[dict]:
        out = []
        for con in contenders:
            row = {"case": case.label, "size": case.size, "contender": con.key, "cap_bytes": cap_bytes}
            if self.deadline is not None and time.time() >= self.deadline:
                row.update(status="skipped", reason="suite deadline (--deadline-s) reached")
            else:
                t0 = time.perf_counter()
                try:
                    row.update(status="ok", **max_batch_under_cap(case, con, self.device, cap_bytes, start))
                except Exception as exc:  # noqa: BLE001
                    row.update(status="failed", reason=f"{type(exc).__name__}: {str(exc)[:300]}")
                row["wall_s"] = time.perf_counter() - t0
            self.log(f"  batch cap {case.label} {con.key}: {row.get('max_batch', row.get('reason'))}")
            out.append(row)
        return out


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a == b
    return len(a) == len(b) and all(abs(x - y) <= 1e-9 * max(1.0, abs(x)) for x, y in zip(a, b))


def _line(case: Case, con: C.Contender, r: dict[str, Any]) -> str:
    head = f"  {case.label:<12} {con.key:<24}"
    if r.get("status") != "ok":
        return f"{head} {r.get('status')}: {r.get('reason')}"
    chk = r.get("check") or {}
    ok = "reference" if chk.get("reference") else {True: "match", False: "MISMATCH", None: "unchecked"}[chk.get("correct")]
    same = r.get("check_vs_min_cut")
    if same is not None:
        ok += f" (vs min-cut: {'match' if same['correct'] else 'MISMATCH'}, max err {same['max_abs_err']:.0e})"
    f64 = r.get("check_vs_fp64") or {}
    if "max_abs_err" in f64:
        ok += f" (vs float64: max err {f64['max_abs_err']:.1e})"
    pred = r.get("predicted_peak_bytes")
    pred_s = f" (predicted {pred / 2**20:.1f})" if pred else ""
    return (f"{head} peak {r['peak_bytes'] / 2**20:8.2f} MiB{pred_s}  step {1e3 * r['step_s']:8.1f} ms  "
            f"first call {r['first_call_s']:6.1f} s  {ok}")
