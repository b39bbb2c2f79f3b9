"""Measure one contender on one case: compile time, correctness, peak memory, step time.

Protocol for one (case, contender), each on a fresh model built from the case's seed:

1. reset Dynamo and fxremat's report list; build the model and wrap/compile it;
2. first call: one training step (forward, loss, backward), timed: the compile time (it includes
   that one step); its loss and gradients are compared with eager's (the reference);
3. the partitioner's predicted peak: fxremat's reports (``fxremat.last_reports(clear=True)``); for
   min-cut the recording partitioner's replay of its graphs through fxremat's memory model;
4. peak memory of one more step (gradients set to None first, so they count):
   :func:`fxremat.profiling.measure_peak` (CUDA: ``max_memory_allocated`` after a reset, above the
   memory allocated at the start; CPU: torch.profiler's allocator events);
5. ``warm`` more steps, then up to ``timed`` timed steps (fewer once ``max_timed_s`` is spent,
   never fewer than ``min_timed``); the median is the step time.

On-disk caches are off for the whole run (:func:`no_caches`), so every contender really compiles
and really partitions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import statistics
import time
import traceback
from typing import Any, Callable

import torch

import fxremat
from fxremat import _torch
from fxremat.partitioner import BudgetError
from fxremat.profiling import measure_peak
from fxremat.report import captured_warnings

from .contenders import Contender
from .models import Built, Case

__all__ = ["Timing", "Reference", "no_caches", "run_contender", "max_batch_under_cap", "tolerances", "fp64_reference",
           "compare"]


@dataclasses.dataclass(frozen=True)
class Timing:
    warm: int = 1  # steps after the peak-measuring step, untimed
    timed: int = 5
    min_timed: int = 2
    max_timed_s: float = 6.0  # stop timing once this much is spent (and min_timed are done)


@dataclasses.dataclass
class Reference:
    """Eager's loss and gradients for a case (on CPU, so they never count against a GPU peak)."""

    loss: torch.Tensor
    grads: dict[str, torch.Tensor | None]


@contextlib.contextmanager
def no_caches():
    """Inductor's FX graph cache and AOTAutograd's cache off (a hit would skip the partitioner);
    TF32 off on CUDA so compiled and eager math agree to the tolerance."""
    import torch._inductor.config as inductor_config

    with contextlib.ExitStack() as stack:
        stack.enter_context(_torch.caches_disabled())
        if hasattr(inductor_config, "autotune_local_cache"):
            stack.enter_context(inductor_config.patch(autotune_local_cache=False))
        if torch.cuda.is_available():
            old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
            stack.callback(lambda: _restore_tf32(old))
        yield


def _restore_tf32(old: tuple[bool, bool]) -> None:
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def tolerances(contender: Contender, device: str) -> tuple[float, float]:
    """(rtol, atol): 1e-4 for the eager-code paths on CPU; Inductor and CUDA reorder float math."""
    if contender.compiler == "inductor" or device.startswith("cuda"):
        return 1e-3, 1e-3
    return 1e-4, 1e-4


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _cleanup(device: str) -> None:
    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def _step_fn(case: Case, built: Built, module: torch.nn.Module) -> Callable[[], torch.Tensor]:
    def forward_backward() -> torch.Tensor:
        out = module(*built.inputs)
        loss = case.loss(out, built.target)
        loss.backward()
        return loss.detach()

    return forward_backward


def _grads(module: torch.nn.Module) -> dict[str, torch.Tensor | None]:
    return {n: (None if p.grad is None else p.grad.detach().cpu().clone()) for n, p in module.named_parameters()}


def _compare(ref: Reference, loss: torch.Tensor, grads: dict[str, torch.Tensor | None], rtol: float,
             atol: float) -> dict[str, Any]:
    """allclose of the loss and of every gradient; the worst absolute and relative errors."""
    pairs = [("loss", loss.cpu().reshape(1), ref.loss.reshape(1))]
    missing = []
    for name, r in ref.grads.items():
        g = grads.get(name)
        if (r is None) != (g is None):
            missing.append(name)
        elif r is not None:
            pairs.append((name, g, r))
    ok = not missing and len(grads) == len(ref.grads)
    max_abs = max_rel = 0.0
    worst = None
    for name, a, b in pairs:
        a, b = a.double(), b.double()
        err = (a - b).abs().max().item() if a.numel() else 0.0
        rel = err / max(b.abs().max().item(), 1e-12) if b.numel() else 0.0
        if not torch.allclose(a, b, rtol=rtol, atol=atol):
            ok = False
            worst = worst or name
        if err > max_abs:
            max_abs = err
        max_rel = max(max_rel, rel)
    return {"correct": ok, "rtol": rtol, "atol": atol, "loss": float(loss), "max_abs_err": max_abs,
            "max_rel_err": max_rel, "first_mismatch": worst, "missing_grads": missing[:5]}


def run_contender(case: Case, contender: Contender, device: str, timing: Timing,
                  reference: Reference | None, same_graph_reference: Reference | None = None,
                  ) -> tuple[dict[str, Any], Reference | None]:
    """Measure ``contender`` on ``case``; never raises (a failure is a result with its traceback).

    ``reference``: eager's loss and gradients (``check``); ``same_graph_reference``: min-cut's under
    the same compiler (``check_vs_min_cut``): a difference from eager that min-cut shares comes
    from the compiled graph's arithmetic (decompositions), not from what the partitioner saved.
    Returns the result and this contender's own loss and gradients (a reference for later ones)."""
    result: dict[str, Any] = {"status": "ok"}
    produced_ref = None
    with captured_warnings() as warned:
        _cleanup(device)
        try:
            built = case.build(device)
            module, recorder = contender.prepare(built.module)
            step = _step_fn(case, built, module)

            _sync(device)
            t0 = time.perf_counter()
            loss = step()
            _sync(device)
            result["first_call_s"] = time.perf_counter() - t0
            grads = _grads(built.module)
            produced_ref = Reference(loss.cpu(), grads)
            # Bytes of the parameter gradients: alive at the end of every step whatever the plan
            # (a floor under every peak; the real-model table judges "activations dominate" by it).
            result["grad_bytes"] = sum(g.numel() * g.element_size() for g in grads.values() if g is not None)
            rtol, atol = tolerances(contender, device)
            result["check"] = _compare(reference, loss, grads, rtol, atol) if reference is not None else None
            if same_graph_reference is not None:
                result["check_vs_min_cut"] = _compare(same_graph_reference, loss, grads, rtol, atol)
            result.update(_predictions(contender, recorder))
            del grads

            built.module.zero_grad(set_to_none=True)
            gc.collect()
            m = measure_peak(step, device=device)
            result["peak_bytes"] = m.peak_bytes
            result["baseline_bytes"] = m.baseline_bytes
            if device.startswith("cuda"):
                result["abs_peak_bytes"] = torch.cuda.max_memory_allocated()

            for _ in range(timing.warm):
                built.module.zero_grad(set_to_none=True)
                step()
            times: list[float] = []
            spent = 0.0
            while len(times) < timing.timed and (len(times) < timing.min_timed or spent < timing.max_timed_s):
                built.module.zero_grad(set_to_none=True)
                _sync(device)
                t0 = time.perf_counter()
                step()
                _sync(device)
                times.append(time.perf_counter() - t0)
                spent += times[-1]
            result["step_s"] = statistics.median(times)
            result["step_s_all"] = times
        except Exception as exc:  # noqa: BLE001 - one contender's failure must not end the suite
            budget = BudgetError.behind(exc)
            if budget is not None:  # a budget below every feasible peak: a fact about the budget, not a failure
                result.update(status="infeasible", reason=str(budget))
            else:
                inner = getattr(exc, "inner_exception", None) or exc  # unwrap BackendCompilerFailed
                text = str(inner).strip().splitlines()
                result.update(status="failed", reason=f"{type(inner).__name__}: {text[0] if text else ''}"[:400],
                              traceback=traceback.format_exc()[-4000:])
        finally:
            built = module = step = None  # noqa: F841 - drop the model before the next contender
            _cleanup(device)
    if warned:
        result["fxremat_warnings"] = warned
    return result, produced_ref


def fp64_reference(case: Case, device: str) -> Reference:
    """Eager's loss and gradients in float64: the yardstick for telling a real mismatch from fp32
    rounding (deep BatchNorm networks at initialisation amplify rounding; eager fp32 itself then
    differs from float64 by as much as a compiled graph does)."""
    _cleanup(device)
    built = case.build(device)
    module = built.module.double()
    inputs = tuple(t.double() if t.is_floating_point() else t for t in built.inputs)
    target = built.target.double() if built.target.is_floating_point() else built.target
    loss = case.loss(module(*inputs), target)
    loss.backward()
    ref = Reference(loss.detach().cpu(), _grads(module))
    del built, module, inputs, target, loss
    _cleanup(device)
    return ref


def compare(ref: Reference, other: Reference, rtol: float, atol: float) -> dict[str, Any]:
    return _compare(ref, other.loss, other.grads, rtol, atol)


def _predictions(contender: Contender, recorder: Any) -> dict[str, Any]:
    """The partitioner's predicted peak for the graphs just compiled (max over graphs)."""
    reports = fxremat.last_reports(clear=True)
    out: dict[str, Any] = {}
    if contender.family == "fxremat":
        if not reports:
            out["predicted_peak_bytes"] = None
            out["predicted_note"] = "no fxremat report: planning fell back to min-cut (see fxremat_warnings)"
            return out
        out["graphs"] = len(reports)
        out["predicted_peak_bytes"] = max(r.predicted_peak_bytes for r in reports)
        out["predicted_min_cut_bytes"] = max(r.min_cut.peak_bytes for r in reports)
        out["chosen"] = [r.chosen for r in reports]
        out["stages"] = [r.stages for r in reports]
        out["checkpoints"] = [len(r.plan.checkpoints) if r.plan else None for r in reports]
        out["plan_peak_bytes"] = [r.plan.peak_bytes if r.plan else None for r in reports]
        out["recompute_share"] = [
            (r.plan.recompute_cost / r.forward_cost) if r.plan and r.forward_cost else 0.0 for r in reports
        ]
        forward = sum(r.forward_cost for r in reports)
        # the whole step's recomputation, as a share of one forward (the solver's cost model)
        out["recompute"] = sum(r.plan.recompute_cost for r in reports if r.plan) / forward if forward else 0.0
        out["partition_s"] = sum(r.seconds for r in reports)
        steps = [r.predicted_step_s for r in reports]
        # fxremat.timing's estimate of the whole step (every graph, the pair that runs)
        out["predicted_step_s"] = sum(steps) if None not in steps else None
    elif contender.family == "min-cut" and recorder is not None:
        out["graphs"] = len(recorder.predicted)
        out["predicted_peak_bytes"] = max(recorder.predicted) if recorder.predicted else None
        out["predicted_step_s"] = sum(recorder.step_s) if recorder.step_s and not recorder.errors else None
        if recorder.errors:
            out["predicted_note"] = recorder.errors[0][:300]
    return out


# ------------------------------------------------------------------ largest batch under a cap


def _probe(case: Case, contender: Contender, device: str, batch: int) -> tuple[bool, int | None, str | None]:
    """One training step at ``batch``: (completed, bytes attributable to this model, error)."""
    _cleanup(device)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    built = module = None
    try:
        built = case.build(device, batch=batch)
        module, _ = contender.prepare(built.module)
        step = _step_fn(case, built, module)
        if cuda:
            step()
            torch.cuda.synchronize()
            return True, torch.cuda.max_memory_allocated() - before, None
        fixed = sum(t.numel() * t.element_size() for t in [*built.module.parameters(), *built.inputs])
        return True, measure_peak(step, device=device).peak_bytes + fixed, None
    except torch.cuda.OutOfMemoryError as exc:
        return False, None, f"OOM: {str(exc).splitlines()[0][:200]}"
    finally:
        built = module = None  # noqa: F841
        fxremat.last_reports(clear=True)
        _cleanup(device)


def max_batch_under_cap(case: Case, contender: Contender, device: str, cap_bytes: int, start: int,
                        max_probes: int = 7, rel_tol: float = 0.05) -> dict[str, Any]:
    """Largest batch whose training step stays within ``cap_bytes`` (model, inputs, activations,
    gradients).  Probes grow the batch (by linear extrapolation of the measured peaks, at most 4x
    at a time) until one exceeds the cap, then bisect (secant-guided) until the bracket is within
    ``rel_tol``; every probe compiles afresh."""
    probes: list[dict[str, Any]] = []
    lo, hi = 0, None
    fits_at: dict[int, int] = {}
    batch = start
    for _ in range(max_probes):
        done, peak, err = _probe(case, contender, device, batch)
        fits = done and peak is not None and peak <= cap_bytes
        probes.append({"batch": batch, "peak_bytes": peak, "fits": fits, "error": err})
        if fits:
            lo, fits_at[batch] = batch, peak
        else:
            hi = batch
        if hi is not None and hi - lo <= max(1, int(rel_tol * max(lo, 1))):
            break
        batch = _next_batch(lo, hi, fits_at, probes, cap_bytes)
        if batch is None:
            break
    return {"cap_bytes": cap_bytes, "max_batch": lo, "bracket": [lo, hi], "probes": probes}


def _next_batch(lo, hi, fits_at, probes, cap) -> int | None:
    pts = sorted(fits_at.items())
    guess = None
    if len(pts) >= 2:  # linear model of peak vs batch through the two largest fitting batches
        (b1, p1), (b2, p2) = pts[-2], pts[-1]
        if p2 > p1:
            guess = int(b2 + (cap - p2) * (b2 - b1) / (p2 - p1))
    elif len(pts) == 1 and pts[0][1] > 0:
        guess = int(pts[0][0] * cap / pts[0][1])  # proportional (an overestimate: fixed costs)
    if hi is None:
        nxt = max(lo + 1, min(guess if guess else 2 * lo, 4 * max(lo, 1)))
    else:
        mid = (lo + hi) // 2
        nxt = guess if guess is not None and lo < guess < hi else mid
        if nxt in (lo, hi):
            nxt = mid
    if nxt <= 0 or any(p["batch"] == nxt for p in probes):
        nxt = (lo + hi) // 2 if hi is not None else 2 * max(lo, 1)
        if nxt <= lo or any(p["batch"] == nxt for p in probes):
            return None
    return nxt
