"""fxremat.explain, the Report it returns, and ``python -m fxremat explain``.

One small zoo model is explained once per module (a few seconds); the CLI runs in-process through
``fxremat.__main__.main(argv)`` on tiny models, plus one real ``python -m fxremat`` subprocess.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest
import torch
from zoo import ZOO

import fxremat
import fxremat.demo
import fxremat.partitioner
from fxremat.__main__ import main, parse_budget

pytestmark = pytest.mark.usefixtures("fresh_compile")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def case():
    return ZOO["resnet_bn"]()


@pytest.fixture(scope="module")
def report(case):
    bn = case.model[0][1]
    before = bn.running_mean.clone(), bn.num_batches_tracked.clone()
    rep = fxremat.explain(case.model, *case.inputs, name="resnet_bn")
    # explain leaves the module as it found it: no gradients, BatchNorm statistics unchanged
    assert all(p.grad is None for p in case.model.parameters())
    assert torch.equal(bn.running_mean, before[0]) and torch.equal(bn.num_batches_tracked, before[1])
    return rep


_tiny_demo = functools.partial(fxremat.demo.make_demo, blocks=3, channels=8, image=8, batch=2)


# ---------------------------------------------------------------------------------- explain
def test_report_numbers_are_consistent(report):
    assert isinstance(report, fxremat.Report)
    assert report.model == "resnet_bn" and report.solver == "linear" and report.memory_budget is None
    assert len(report.graphs) >= 1 and report.warnings == ()
    with pytest.raises(AttributeError):  # frozen
        report.model = "x"
    for r in report.graphs:
        assert r.chosen in ("fxremat", "min-cut")
        assert r.stages >= 2 and r.plan is not None and r.fxremat is not None
        assert all(1 <= c <= r.stages - 1 for c in r.plan.checkpoints)
        assert 0 <= r.plan.recompute_cost <= r.forward_cost
        assert r.plan.peak_bytes <= r.chain_no_recompute_peak
        if r.chosen == "fxremat" and r.reason == "lower predicted peak":
            assert r.fxremat.peak_bytes <= r.min_cut.peak_bytes
        if r.chosen == "min-cut":
            assert r.predicted_peak_bytes == r.min_cut.peak_bytes
        for t in (r.fxremat, r.min_cut):
            assert len(t.labels) == len(t.bytes_alive) and 0 < t.forward_steps < len(t.labels)
    # resnet_bn is deep enough for fxremat to beat min-cut clearly
    assert report.graphs[0].chosen == "fxremat"


def test_report_str_has_the_key_lines(report):
    text = str(report)
    r = report.graphs[0]
    assert text.startswith("fxremat explain: resnet_bn")
    for needle in (
        "solver=linear", f"chose {r.chosen} ({r.reason})", f"stages found      {r.stages}",
        "checkpoints", "predicted peak", "fxremat", "min-cut (PyTorch)", "no recomputation", "MiB",
        "x min-cut", "% of one forward", "step (estimate)", "budget", "planning time",
    ):
        assert needle in text, needle
    assert f"{r.min_cut.peak_bytes / 2**20:.2f} MiB" in text
    assert f"{r.fxremat.peak_bytes / 2**20:.2f} MiB" in text
    assert ", ".join(map(str, r.plan.checkpoints)) in text


def test_report_to_json(report):
    data = json.loads(json.dumps(report.to_json()))
    g = data["graphs"][0]
    r = report.graphs[0]
    assert data["model"] == "resnet_bn" and data["memory_budget"] is None
    assert g["chosen"] == r.chosen and g["stages"] == r.stages
    assert g["plan"]["checkpoints"] == list(r.plan.checkpoints)
    assert g["predicted_peak_bytes"] == {
        "chosen": r.predicted_peak_bytes, "fxremat": r.fxremat.peak_bytes, "min_cut": r.min_cut.peak_bytes,
        "no_recompute_chain": r.chain_no_recompute_peak,
    }
    assert g["predicted_step_s"] == {
        "chosen": r.predicted_step_s, "fxremat": r.step.step_s, "min_cut": r.min_cut_step.step_s,
    }
    for key in ("fxremat", "min_cut"):
        t = g["timelines"][key]
        assert len(t["labels"]) == len(t["bytes_alive"]) and max(t["bytes_alive"]) == t["peak_bytes"]


def test_report_plot_writes_png(report, tmp_path):
    out = report.plot(tmp_path / "timeline.png")
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_plot_without_matplotlib_says_how_to_install(report, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(RuntimeError, match=r"pip install 'fxremat\[plot\]'"):
        report.plot(tmp_path / "x.png")


def test_explain_unwraps_budget_error():
    case = ZOO["mlp"]()
    with pytest.raises(fxremat.BudgetError, match=r"memory_budget=1: .*infeasible.*smallest peak"):
        fxremat.explain(case.model, *case.inputs, memory_budget=1, strict_budget=True)
    with pytest.raises(ValueError, match="unknown solver 'foo'"):
        fxremat.explain(case.model, *case.inputs, solver="foo")


def test_explain_lists_fallbacks(monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(fxremat.partitioner, "_plan", broken)
    case = ZOO["mlp"]()
    rep = fxremat.explain(case.model, *case.inputs)
    assert rep.graphs == ()
    assert len(rep.warnings) == 1 and "falling back" in rep.warnings[0] and "RuntimeError: boom" in rep.warnings[0]
    assert "fell back to PyTorch's partitioner" in str(rep) and "RuntimeError: boom" in str(rep)
    assert json.loads(json.dumps(rep.to_json()))["warnings"] == list(rep.warnings)
    with pytest.raises(ValueError, match="nothing to plot"):
        rep.plot(tmp_path / "x.png")


# ---------------------------------------------------------------------------------- CLI
def test_cli_default_demo_json_and_plot(tmp_path, monkeypatch, capsys):
    # the default demo, shrunk so that the test stays fast (the real one takes seconds to compile)
    monkeypatch.setattr(fxremat.demo, "make_demo", _tiny_demo)
    assert main(["explain"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"fxremat explain: {fxremat.demo.DEMO_NAME}")
    assert "predicted peak" in out and "chose " in out

    js, png = tmp_path / "r.json", tmp_path / "r.png"
    assert main(["explain", "--solver", "dp", "--memory-budget", "1.0", "--json", str(js), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "solver=dp  memory_budget=1.0" in out
    data = json.loads(js.read_text())
    assert data["solver"] == "dp" and data["memory_budget"] == 1.0 and data["graphs"]
    assert png.read_bytes()[:8] == PNG_MAGIC


def test_cli_factory_from_a_file(tmp_path, capsys):
    mod = tmp_path / "my_case.py"
    mod.write_text(
        "import torch\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    model = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(3)])\n"
        "    return model, (torch.randn(4, 32),)\n"
    )
    assert main(["explain", f"{mod}:make"]) == 0
    assert capsys.readouterr().out.startswith(f"fxremat explain: {mod}:make")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["explain", "--solver", "foo"], "argument --solver: invalid choice: 'foo' (choose from"),
        (["explain", "--memory-budget", "-1"], "argument --memory-budget: invalid value '-1': expected an int"),
        (["explain", "--memory-budget", "1.5"], "a float fraction in (0, 1]"),
        (["explain", "--memory-budget", "lots"], "invalid value 'lots'"),
        (["explain", "no_colon"], "invalid factory 'no_colon': expected MODULE:FACTORY"),
        (["explain", "no_such_module_xyz:make"], "no module named 'no_such_module_xyz'"),
        (["explain", "fxremat.demo:nope"], "has no callable 'nope'"),
        (["explain", "--json", "/no/such/dir/r.json"], "does not exist"),
        (["explain", "--memory-budget", "1", "--strict-budget"],
         "memory_budget=1: budget_bytes=1 is infeasible: the smallest peak"),
    ],
)
def test_cli_bad_options(argv, message, monkeypatch, capsys):
    monkeypatch.setattr(fxremat.demo, "make_demo", _tiny_demo)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert message in err and err.startswith("python -m fxremat") and "\n" not in err, err
    assert captured.out == ""


def test_cli_plot_without_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit) as exit_info:
        main(["explain", "--plot", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2
    assert "pip install 'fxremat[plot]'" in capsys.readouterr().err


def test_parse_budget():
    assert parse_budget("1000") == 1000 and isinstance(parse_budget("1000"), int)
    assert parse_budget("64MiB") == 64 * 2**20 and parse_budget("0.5") == 0.5 and parse_budget("25%") == 0.25
    assert parse_budget("none") is None and parse_budget("1.0") == 1.0


def test_cli_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "fxremat", "explain", "--solver", "foo"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "python -m fxremat explain: error: argument --solver: invalid choice: 'foo' "
        "(choose from 'chen', 'dp', 'linear') (see --help)"
    ]
    assert proc.stdout == ""
