"""fxremat's buffer-reuse rule for Inductor (``_torch._local_reuse``): in fxremat's backward graphs a
dead buffer is kept for a later allocation only where that makes no new local peak in Inductor's
estimate; its forward graphs and other compiles in the process keep Inductor's own rule."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import fxremat
from fxremat import _torch

MiB = 1 << 20


def _rule_on(levels: list[int]):
    """(decide(free_at, alloc_at, size) with the local rule on, calls to the wrapped rule)."""
    calls = []

    def original(self, free_line, size):
        calls.append((free_line.scheduler_node_index, self.scheduler_node_index))
        return "inductor's rule"

    rule = _torch._local_reuse(original)
    tree = SimpleNamespace(summarize_range=lambda i, j: max(levels[i:j + 1], default=0))
    estimate = SimpleNamespace(
        overall_peak_memory=max(levels), segmented_tree=tree,
        peak_between=lambda free, alloc: tree.summarize_range(free.scheduler_node_index + 1,
                                                             alloc.scheduler_node_index - 1))

    def decide(free_at: int, alloc_at: int, size: int):
        alloc = SimpleNamespace(scheduler_node_index=alloc_at, wrapper=SimpleNamespace(estimate_peak=estimate))
        return rule(alloc, SimpleNamespace(scheduler_node_index=free_at), size)

    return decide, calls


def test_rule_holds_a_buffer_only_in_a_valley():
    #          node: 0    1   2   3   4    5   6
    decide, _ = _rule_on([100, 90, 40, 30, 60, 100, 50])
    token = _torch._LOCAL_REUSE.set(True)
    try:
        assert decide(3, 4, 80) is True     # successor: nothing is held
        assert decide(1, 4, 20) is True     # 40 + 20 <= 60, the lower end
        assert decide(1, 4, 30) is False    # 40 + 30 <= 90 where freed, but > 60 where taken over
        assert decide(2, 4, 10) is True     # 30 + 10 <= 40, the lower end
        assert decide(2, 4, 11) is False
        assert decide(2, 6, 10) is False    # held through node 5, the graph's peak
    finally:
        _torch._LOCAL_REUSE.reset(token)


def test_rule_is_inductors_outside_fxremat_compiles():
    decide, calls = _rule_on([100, 10, 10, 100])
    assert decide(0, 3, 1) == "inductor's rule"
    assert calls == [(0, 3)]


def test_rule_refuses_when_the_estimate_is_not_there():
    rule = _torch._local_reuse(lambda *a: True)
    alloc = SimpleNamespace(scheduler_node_index=5, wrapper=SimpleNamespace())
    token = _torch._LOCAL_REUSE.set(True)
    try:
        assert rule(alloc, SimpleNamespace(scheduler_node_index=4), 8) is True
        assert rule(alloc, SimpleNamespace(scheduler_node_index=1), 8) is False
    finally:
        _torch._LOCAL_REUSE.reset(token)


def test_unknown_reuse_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="reuse_buffers"):
        _torch.compile_with_inductor(None, [], None, reuse_buffers="sometimes")


def test_planned_compile_reuses_buffers_and_matches_eager():
    """Through Inductor: fxremat's code reuses buffers (the rule is installed and on), the
    gradients equal eager's, and the flag is off again afterwards."""
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(64, 64), torch.nn.Tanh())])
    x = torch.randn(256, 64)
    ref = model(x).square().sum()
    ref.backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)

    compiled = torch.compile(model, backend=fxremat.backend)
    with _torch.caches_disabled():
        loss, code = run_and_get_code(lambda: compiled(x).square().sum().backward())
    assert any("# reuse" in c for c in code)
    for p, g in zip(model.parameters(), expected):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)
    assert _torch._LOCAL_REUSE.get() is False


def _compiles(model: torch.nn.Module, x: torch.Tensor, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[tuple]]:
    """(the pair fxremat chose, per graph Inductor compiled: backward?, local reuse on?, horizontal
    fusion's memory threshold) for one step of ``model`` through ``fxremat.backend``."""
    import torch._inductor.compile_fx as compile_fx
    from torch._inductor import config as inductor_config

    seen, original = [], compile_fx.compile_fx_inner

    def recording(gm, example_inputs, **kwargs):
        seen.append((bool(kwargs.get("is_backward")), _torch._LOCAL_REUSE.get(),
                     inductor_config.score_fusion_memory_threshold))
        return original(gm, example_inputs, **kwargs)

    monkeypatch.setattr(compile_fx, "compile_fx_inner", recording)
    fxremat.last_reports(clear=True)
    with _torch.caches_disabled():
        torch.compile(model, backend=fxremat.backend)(x).square().sum().backward()
    (report,) = fxremat.last_reports()
    return report.chosen, seen


@pytest.mark.parametrize("layers", [1, 6])
def test_min_cut_pair_compiled_as_the_default_compile(layers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the partitioner runs min-cut's own pair (it found nothing better), Inductor compiles
    it as the default compile does: no backward patch, Inductor's buffer reuse.  Compiled with
    fxremat's settings, HF BERT's tiny sequence classifier ran min-cut's pair 1.019x above
    min-cut's own peak (0.52 against 0.51 MiB); with the defaults, 1.000x.  fxremat's own plans keep
    its settings: the valley rule of buffer reuse in the backward (the forward keeps Inductor's),
    the backward's fusion threshold.  One layer is a linear layer alone (nothing to recompute: min-cut's pair runs),
    six are six with tanh between them (fxremat's plan runs)."""
    from torch._inductor import config as inductor_config

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(64, 64), torch.nn.Tanh())][:-1])
    chosen, seen = _compiles(model, torch.randn(256, 64), monkeypatch)
    assert chosen == ("min-cut" if layers == 1 else "fxremat")
    assert [backward for backward, _, _ in seen] == [False, True]
    default = inductor_config.score_fusion_memory_threshold
    if chosen == "min-cut":
        assert all(not local and threshold == default for _, local, threshold in seen)
    else:
        assert [local for _, local, _ in seen] == [False, True] and seen[1][2] != default
