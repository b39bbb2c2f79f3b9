"""The run's record: machine facts, the JSON (rewritten after every result), the Markdown table.

Ratios are always against min-cut (PyTorch's default partitioner, default budget) measured in the
same run on the same case: ``peak / peak(min-cut)`` and ``step time / step time(min-cut)``.  A
compiled contender is compared with min-cut under the same compiler; eager and ckpt_seq with the
case's first min-cut row (the run's main compiler).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

__all__ = ["machine_info", "write_json", "markdown", "baseline_of", "MIB"]

MIB = 2**20


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() + (" (+uncommitted changes)" if dirty.stdout.strip() else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def machine_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "processor": _cpu_name(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else _cpu_name(),
        "git_commit": _git_commit(),
        "command": " ".join([os.path.basename(sys.executable), "-m", "bench", *sys.argv[1:]]),
    }
    if hasattr(os, "getloadavg"):
        info["load_avg_at_start"] = os.getloadavg()
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        info["device_memory_bytes"] = props.total_memory
        info["cuda"] = torch.version.cuda
    return info


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Atomic rewrite (a crash mid-run leaves the last complete JSON)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=_jsonable))
    os.replace(tmp, path)


def _jsonable(x: Any) -> Any:
    if isinstance(x, (tuple, set)):
        return list(x)
    if isinstance(x, torch.Tensor):
        return x.tolist()
    return str(x)


# -------------------------------------------------------------------------------- Markdown


def baseline_of(row: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """min-cut (default budget) of the same case: same compiler, or the case's main compiler."""
    mcs = [r for r in rows if r["case"] == row["case"] and r["name"] == "min-cut"]
    if row.get("compiler") is not None:
        mcs = [r for r in mcs if r["compiler"] == row["compiler"]]
    else:
        mcs = mcs[:1]
    return mcs[0] if mcs and mcs[0].get("status") == "ok" else None


def _status(r: dict[str, Any]) -> str:
    """A failed or infeasible row in a few words (the full reason and traceback are in the JSON)."""
    reason = r.get("reason") or ""
    m = re.search(r"budget_bytes=(\d+) is infeasible: the smallest peak any plan reaches is (\d+) bytes", reason)
    if r["status"] == "infeasible" and m:
        return f"infeasible: budget {int(m[1]) / MIB:.2f} MiB < least feasible peak {int(m[2]) / MIB:.2f} MiB"
    return f"{r['status']}: {reason[:100]}{'…' if len(reason) > 100 else ''}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.3f}" if a is not None and b else "–"


def _mib(x: float | None) -> str:
    return f"{x / MIB:.2f}" if x is not None else "–"


def _check(chk: dict[str, Any] | None, row: dict[str, Any] | None = None, rows: list | None = None) -> str:
    if not chk:
        return "–"
    if chk.get("reference"):
        return "(reference)"
    if chk["correct"]:
        return "identical" if chk["max_abs_err"] == 0 else f"yes ({chk['max_abs_err']:.0e})"
    own = (row or {}).get("check_vs_fp64") or {}
    eager = next((r.get("check_vs_fp64") for r in rows or () if r["case"] == row["case"] and r["name"] == "eager"),
                 None) or {}
    if "max_abs_err" in own and "max_abs_err" in eager:
        # As close to a float64 step as eager fp32 itself: fp32 rounding, not a wrong gradient.
        if own["max_abs_err"] <= 1.5 * eager["max_abs_err"]:
            return (f"yes, fp32 rounding ({chk['max_abs_err']:.0e} vs eager; vs float64 {own['max_abs_err']:.1e}, "
                    f"eager fp32's own {eager['max_abs_err']:.1e})")
        return (f"**NO** ({chk.get('first_mismatch')}: {chk['max_abs_err']:.1e}; vs float64: "
                f"{own['max_abs_err']:.1e}, eager fp32's own {eager['max_abs_err']:.1e})")
    return f"**NO** ({chk.get('first_mismatch')}: {chk['max_abs_err']:.1e})"


_LEGEND = (
    "Peak: bytes allocated above the step's starting point, gradients included.  Predicted: the "
    "partitioner's replay of its forward/backward graphs (fxremat's memory model; for min-cut rows the "
    "same replay of min-cut's graphs).  Step: median over the timed steps.  First call: compile plus one "
    "step.  Ratios are against min-cut (default budget) of the same case in this run.  vs eager / vs "
    "min-cut: loss and every gradient allclose (rtol, atol in results.json) to eager's, and to min-cut's "
    "under the same compiler; the largest absolute difference in parentheses.  On a mismatch with eager, "
    "the same difference against a float64 eager step is given for this contender and for eager fp32 "
    "itself: when they are alike, the mismatch is fp32 rounding, not a wrong gradient."
)


def markdown(rows: list[dict[str, Any]], batch_cap: list[dict[str, Any]] | None = None) -> str:
    """The results table (measured, failed and infeasible rows) and the list of skipped ones."""
    lines = [
        "| case | contender | compiler | peak MiB | peak / min-cut | predicted MiB | step ms | time / min-cut "
        "| first call s | loss & grads vs eager | vs min-cut |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    skipped = []
    for r in rows:
        if r["status"] == "skipped":
            skipped.append(r)
            continue
        comp = r.get("compiler") or "–"
        if r["status"] != "ok":
            lines.append(f"| {r['case']} | {r['name']} | {comp} | {_status(r)} | | | | | | | |")
            continue
        base = baseline_of(r, rows)
        pred = r.get("predicted_peak_bytes")
        lines.append(
            f"| {r['case']} | {r['name']} | {comp} | {_mib(r['peak_bytes'])} "
            f"| {_ratio(r['peak_bytes'], base and base['peak_bytes'])} | {_mib(pred)} "
            f"| {1e3 * r['step_s']:.1f} | {_ratio(r['step_s'], base and base['step_s'])} "
            f"| {r['first_call_s']:.1f} | {_check(r.get('check'), r, rows)} | {_check(r.get('check_vs_min_cut'))} |"
        )
    out = "\n".join(lines) + "\n\n" + _LEGEND
    if batch_cap:
        out += "\n\nLargest batch within the memory cap:\n\n| case | contender | cap MiB | largest batch | probes |\n|---|---|---:|---:|---:|\n"
        out += "\n".join(
            f"| {b['case']} | {b['contender']} | {b['cap_bytes'] / MIB:.0f} | " if b.get("cap_bytes") else
            f"| {b['case']} | {b['contender']} | – | "
            f"{b.get('max_batch', b.get('status') + ': ' + str(b.get('reason')))} | {len(b.get('probes', []))} |"
            for b in batch_cap
        )
    if skipped:
        out += "\n\nSkipped:\n\n" + "\n".join(_skipped_lines(skipped))
    return out + "\n"


def _skipped_lines(skipped: list[dict[str, Any]]) -> list[str]:
    """One line per reason, listing the (case, contender) pairs it applies to."""
    by_reason: dict[str, list[str]] = {}
    for r in skipped:
        name = r["name"] + (f"/{r['compiler']}" if r.get("compiler") else "")
        by_reason.setdefault(r["reason"], []).append(f"{r['case']}: {name}")
    return [f"- {reason} — {', '.join(items)}" for reason, items in by_reason.items()]
