"""Hygiene (issue 11): nothing of fxremat's rides in the graphs it returns, the report list is
bounded, a saved value missing from the joint graph is loud, and ``measure_peak`` prints no
libkineto ``USDT`` lines."""

from __future__ import annotations

import collections
import subprocess
import sys

import pytest
import torch
import torch._dynamo
import torch.nn as nn
from helpers import RecordingPartitioner, loss_of

import fxremat
import fxremat.partitioner
import fxremat.rivals
from fxremat import Options, _torch, make_backend
from fxremat.profiling import measure_peak
from fxremat.report import captured_warnings

pytestmark = pytest.mark.usefixtures("fresh_compile")


def deep() -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)) for _ in range(6)])
    return model, (torch.randn(128, 64),)


def grads(model: nn.Module, inputs: tuple, backend=None) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    fn = model if backend is None else torch.compile(model, backend=backend)
    loss_of(fn(*inputs)).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def test_no_fxremat_meta_in_any_graph():
    """Analysis keeps its facts (with ``StorageWeakRef`` keys) to itself: no node of the joint graph
    or of the forward and backward graphs handed on carries ``meta["fxremat"]``."""
    joints = []
    backend = make_backend(compiler="eager")
    inner = backend.partitioner

    def keep_joint(joint, joint_inputs, **kwargs):
        joints.append(joint)
        return inner(joint, joint_inputs, **kwargs)

    backend.partitioner = recorder = RecordingPartitioner(keep_joint)
    model, inputs = deep()
    grads(model, inputs, backend)
    (report,) = fxremat.last_reports()
    assert report.chosen == "fxremat" and report.plan.checkpoints, "fxremat's own pair must be the one checked"
    (call,) = recorder.calls
    for gm in (*joints, call.fw, call.bw):
        assert not [n.name for n in gm.graph.nodes if "fxremat" in n.meta]


def test_report_list_is_bounded(monkeypatch):
    assert fxremat.partitioner._REPORTS.maxlen == fxremat.partitioner.MAX_REPORTS == 256
    monkeypatch.setattr(fxremat.partitioner, "_REPORTS", collections.deque(maxlen=2))
    budgets = (None, 0.9, 0.8)

    def three(joint, joint_inputs, **kwargs):
        for b in budgets:
            fxremat.partition(joint, joint_inputs, options=Options(memory_budget=b), **kwargs)
        return _torch.min_cut(joint, joint_inputs, **kwargs)

    backend = make_backend(compiler="eager")
    backend.partitioner = three
    model, inputs = deep()
    torch.compile(model, backend=backend)(*inputs)
    reports = fxremat.last_reports()
    assert len(reports) == 2 and [r.budget_bytes is None for r in reports] == [False, False], reports
    assert reports[0].budget_bytes > reports[1].budget_bytes  # the two newest, oldest first


def test_partition_memo_dies_with_the_joint_graph():
    """Partition calls on one joint graph share min-cut's pairs and the extracted plans (a budget
    sweep partitions one graph many times); the memo holds them only while the graph lives, and
    every pair handed out is a copy, never a memoized object."""
    import gc

    import weakref

    handed: list[torch.fx.GraphModule] = []
    joints: list[weakref.ref] = []

    def twice(joint, joint_inputs, **kwargs):
        joints.append(weakref.ref(joint))
        for b in (None, 0.5, None):
            handed.extend(fxremat.partition(joint, joint_inputs, options=Options(memory_budget=b), **kwargs))
        memo = fxremat.rivals._MEMOS[joint]
        layouts = list(memo.layouts.values())  # one per CPU layout planned
        assert memo.min_cuts and layouts and all(m.extracted and m.rivals for m in layouts)
        memoized = {id(g) for pair in memo.min_cuts.values() for g in pair}
        memoized |= {id(g) for m in layouts for e in m.extracted.values() for g in (e.fw, e.bw)}
        assert not memoized & {id(g) for g in handed}, "a memoized graph was handed out"
        return handed[-2], handed[-1]

    backend = make_backend(compiler="eager")
    backend.partitioner = twice
    model, inputs = deep()
    with captured_warnings():
        grads(model, inputs, backend)
    handed.clear()
    torch._dynamo.reset()
    gc.collect()
    (joint,) = joints
    assert joint() is None, "the joint graph outlives its compile (and with it the memo)"


def test_saved_value_missing_from_joint_graph_falls_back_loudly(monkeypatch):
    real = _torch.saved_names

    def with_a_stranger(fw, num_fwd_outputs):
        return [*real(fw, num_fwd_outputs), "no_such_node"]

    monkeypatch.setattr(_torch, "saved_names", with_a_stranger)
    model, inputs = deep()
    expected = grads(model, inputs)
    with captured_warnings() as warned:
        actual = grads(model, inputs, make_backend(compiler="eager"))
    assert len(warned) == 1, warned
    assert "falling back to PyTorch's min-cut partitioner" in warned[0] and "no_such_node" in warned[0], warned
    assert not fxremat.last_reports()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=1e-5, atol=1e-5, msg=name)


def test_measure_peak_prints_no_usdt_lines(capfd):
    """libkineto writes ``USDT: ... profiler_start`` / ``profiler_stop`` to stderr for every
    profiling session; measure_peak holds them back (only them) and measures the same."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        torch.ones(1000)
    if "USDT" not in capfd.readouterr().err:
        pytest.skip(f"torch {torch.__version__}'s profiler prints no USDT lines: nothing to hold back")

    def fn():
        print("a line of the measured function", file=sys.stderr, flush=True)
        return torch.ones(1000)

    assert measure_peak(fn).peak_bytes == 4000
    captured = capfd.readouterr()
    assert "USDT" not in captured.err + captured.out, captured
    assert "a line of the measured function" in captured.err


def test_measure_peak_one_liner_prints_no_usdt_line():
    code = "import fxremat.profiling as p, torch; print(p.measure_peak(lambda: torch.ones(1000)).peak_bytes)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4000"
    assert "USDT" not in done.stdout + done.stderr, done.stderr
