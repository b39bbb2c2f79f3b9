"""Plots (matplotlib, optional): peak memory vs ResNet depth; step time vs peak memory per case.

``make_plots(rows, out_dir)`` returns the files written, or raises :class:`PlotsUnavailable` with a
clear message when matplotlib is not installed (``pip install -e '.[plot]'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["PlotsUnavailable", "make_plots"]

MIB = 2**20
_STYLE = {  # family -> (label, color, marker)
    "eager": ("eager (no checkpointing)", "#7f7f7f", "o"),
    "ckpt_seq": ("checkpoint_sequential, √n segments", "#2ca02c", "^"),
    "min-cut": ("min-cut (PyTorch default partitioner)", "#1f77b4", "s"),
    "fxremat": ("fxremat", "#d62728", "D"),
}


class PlotsUnavailable(RuntimeError):
    pass


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotsUnavailable(
            f"plots skipped: matplotlib is not installed ({exc}); pip install matplotlib "
            "(or pip install -e '.[plot]') and rerun, or read the JSON and Markdown"
        ) from None
    return plt


def _ok(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "ok"]


def _main_compiler(rows: list[dict[str, Any]], case: str) -> str | None:
    for r in rows:
        if r["case"] == case and r["name"] == "min-cut":
            return r["compiler"]
    return None


def make_plots(rows: list[dict[str, Any]], out_dir: Path, title_suffix: str = "") -> list[Path]:
    plt = _plt()
    written = []
    p = _peak_vs_depth(plt, rows, out_dir, title_suffix)
    if p:
        written.append(p)
    for case in dict.fromkeys(r["case"] for r in rows):
        p = _pareto(plt, rows, case, out_dir, title_suffix)
        if p:
            written.append(p)
    return written


def _peak_vs_depth(plt, rows, out_dir: Path, suffix: str) -> Path | None:
    res = [r for r in _ok(rows) if r["model"] == "resnet" and r["depth"]]
    if len({r["depth"] for r in res}) < 2:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    size = None
    for fam, name in (("eager", "eager"), ("ckpt_seq", "ckpt_seq"), ("min-cut", "min-cut"), ("fxremat", "fxremat")):
        pts = sorted(
            (r["depth"], r["peak_bytes"] / MIB) for r in res
            if r["name"] == name and r["compiler"] == (None if fam in ("eager", "ckpt_seq") else _main_compiler(rows, r["case"]))
        )
        if not pts:
            continue
        label, color, marker = _STYLE[fam]
        if fam == "eager":  # drawn dashed and hollow on top: it coincides with min-cut (which saves everything)
            ax.plot(*zip(*pts), marker=marker, color=color, label=label, linewidth=1.2, linestyle="--",
                    markerfacecolor="none", markersize=9, zorder=5)
        else:
            ax.plot(*zip(*pts), marker=marker, color=color, label=label, linewidth=1.6)
        size = size or next(r["size"] for r in res)
    ax.set_xlabel("ResNet depth (BasicBlocks; 2 conv layers each)")
    ax.set_ylabel("peak memory of one training step (MiB)")
    depths = sorted({r["depth"] for r in res})
    ax.set_xticks(depths)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    if size:
        desc = f"{size.get('channels')} ch, {size.get('image')}x{size.get('image')}, batch {size.get('batch')}"
        ax.set_title(f"Peak memory vs depth: ResNet ({desc}){suffix}", fontsize=10)
    fig.tight_layout()
    path = out_dir / "peak_vs_depth.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def _pareto(plt, rows, case: str, out_dir: Path, suffix: str) -> Path | None:
    comp = _main_compiler(rows, case)
    rs = [r for r in _ok(rows) if r["case"] == case]
    mc = [r for r in rs if r["family"] == "min-cut" and r["compiler"] == comp]
    fx = [r for r in rs if r["family"] == "fxremat" and r["compiler"] == comp and r["solver"] == "linear"]
    if len(mc) + len(fx) < 2:
        return None
    not_ok = [r for r in rows if r["case"] == case and r.get("status") in ("failed", "infeasible")
              and r["family"] in ("min-cut", "fxremat") and r["compiler"] == comp]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)

    def label_of(r):
        return "least peak" if r["budget"] is None and r["family"] == "fxremat" else (
            "default" if r["budget"] is None else f"{r['budget']:g}")

    for fam, pts, line in (("min-cut", mc, False), ("fxremat", fx, True)):
        if not pts:
            continue
        name, color, marker = _STYLE[fam]
        pts = sorted(pts, key=lambda r: r["peak_bytes"])
        xs = [r["peak_bytes"] / MIB for r in pts]
        ys = [1e3 * r["step_s"] for r in pts]
        extra = " at budgets" if fam == "min-cut" else ": least peak and budgets"
        ax.plot(xs, ys, marker=marker, color=color, linestyle="-" if line else "none", label=name + extra,
                markersize=7, linewidth=1.4)
        seen: dict[tuple[int, int], int] = {}
        for r, x, y in zip(pts, xs, ys):
            k = (round(x), round(y / max(ys) * 20))
            n = seen.get(k, 0)
            seen[k] = n + 1
            ax.annotate(label_of(r), (x, y), textcoords="offset points", xytext=(5, 4 + 9 * n), fontsize=7,
                        color=color)
    for fam in ("eager", "ckpt_seq"):
        for r in (r for r in rs if r["family"] == fam):
            name, color, marker = _STYLE[fam]
            ax.plot([r["peak_bytes"] / MIB], [1e3 * r["step_s"]], marker=marker, color=color, linestyle="none",
                    label=name, markersize=7)
    ax.set_xlabel("peak memory of one training step (MiB)")
    ax.set_ylabel("median step time (ms)")
    ax.set_xlim(left=0)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    size = rs[0]["size"] if rs else {}
    desc = ", ".join(f"{k}={v}" for k, v in size.items() if k not in ("depth",))
    if not_ok:
        names = ", ".join(f"{r['name']} ({r['status']})" for r in not_ok)
        fig.text(0.01, 0.01, "not plotted: " + names, fontsize=6, color="#555555", wrap=True)
    ax.set_title(f"Step time vs peak memory: {case} (compiler: {comp}){suffix}\n{desc}", fontsize=9)
    fig.tight_layout(rect=(0, 0.05 if not_ok else 0, 1, 1))
    path = out_dir / f"pareto_{case}.png"
    fig.savefig(path)
    plt.close(fig)
    return path
