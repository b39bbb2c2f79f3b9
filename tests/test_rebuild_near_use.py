"""``schedule.recompute_just_in_time(bw, jg, held=...)`` and its ``_rebuild_near_use``: inside a
recomputed segment only what the base plan saves is held; the backward reads just-in-time copies
(``*_rebuilt``) of cheap recomputed values.

Structural invariants are checked on backward graphs extracted for several checkpoint sets from
recorded joint graphs (a GPT, a Llama-style RMSNorm LM, a padded encoder with dropout), each
scheduled twice, without and with ``held`` (min-cut's saved names, as the partitioner passes):

* no recomputed forward value that is cheap (not random, not banned, not a matmul, convolution or
  attention) and not held is read both by a recomputed node and by a backward node (the check
  finds such values in the schedule without ``held``, so it is not vacuous);
* every added node is a ``*_rebuilt`` copy of a cheap, non-random, non-held recomputed value
  (same target, arguments mapped to their copies), read only by backward nodes and other copies;
* the backward nodes, the placeholders and the recomputed originals are the same as without
  ``held``, backward nodes in the same order; the graph lints (topological).

End to end (no Inductor kernel compiled): the backward the partitioner returns contains copies and
the gradients equal eager's (no-Inductor path) and min-cut's bit for bit (both paths).
"""

from __future__ import annotations

import functools
import operator

import pytest
import torch
import torch.fx as fx
from helpers import RecordingPartitioner
from test_inductor_replay import inductor_mode_backend
from test_long_lived_choice import _cases, least_peak, recorded

import fxremat
from fxremat import _torch
from fxremat.analysis import JointGraph, Role
from fxremat.backend import min_cut_backend
from fxremat.linearize import linearize
from fxremat.partitioner import partition
from fxremat.saved import close_over_bans
from fxremat.schedule import recompute_just_in_time


@pytest.fixture(autouse=True)
def rebuild_near_use(monkeypatch):
    """The partitioner passes ``held`` only with ``REBUILD_NEAR_USE`` (off by default: see its
    comment in fxremat/partitioner.py); the end-to-end tests here run with it on."""
    monkeypatch.setattr(fxremat.partitioner, "REBUILD_NEAR_USE", True)

aten = torch.ops.aten
HEAVY = {aten.mm, aten.bmm, aten.addmm, aten.baddbmm, aten.convolution}
SUFFIX = "_rebuilt"


def _random(node: fx.Node) -> bool:
    """A random op (or an output of one)."""
    if node.target is operator.getitem and isinstance(node.args[0], fx.Node):
        return _random(node.args[0])
    return _torch.is_random(node)


def _heavy(node: fx.Node) -> bool:
    """A matmul, convolution or attention (or an output of one)."""
    if node.target is operator.getitem and isinstance(node.args[0], fx.Node):
        return _heavy(node.args[0])
    packet = getattr(node.target, "overloadpacket", None)
    return packet in HEAVY or (packet is not None and "scaled_dot_product" in packet.__name__)


class Scheduled:
    """One extracted backward scheduled without and with ``held``."""

    def __init__(self, jg: JointGraph, base: list[fx.Node], checkpoints: tuple[int, ...], lin,
                 held: set[str] | None = None) -> None:
        saved = close_over_bans(jg, lin.saved_values(checkpoints, base))
        self.jg, self.held = jg, {n.name for n in base} if held is None else held
        self.forward = {n.name for n, f in jg.facts.items() if f.role is Role.FORWARD}
        self.joint = {n.name: n for n in jg.module.graph.nodes}
        self.plain = recompute_just_in_time(self._extract(saved), jg)
        self.rebuilt = recompute_just_in_time(self._extract(saved), jg, held=self.held)

    def _extract(self, saved: list[fx.Node]) -> fx.GraphModule:
        jg = self.jg
        return _torch.extract_fwd_bwd(jg.module, list(saved), [], num_fwd_outputs=jg.num_fwd_outputs,
                                      static_lifetime_input_nodes=jg.static_inputs)[1]

    def is_copy(self, node: fx.Node) -> bool:
        return node.op == "call_function" and node.name.endswith(SUFFIX) and node.name[: -len(SUFFIX)] in self.forward

    def recomputed(self, gm: fx.GraphModule) -> set[fx.Node]:
        return {n for n in gm.graph.nodes if n.op == "call_function" and (n.name in self.forward or self.is_copy(n))}

    def cheap(self, node: fx.Node) -> bool:
        joint = self.joint[node.name]
        return not (node.name in self.held or _random(node) or self.jg.facts[joint].recompute_ban or _heavy(node))

    def held_across(self, gm: fx.GraphModule) -> list[str]:
        """Cheap, non-held recomputed values read both by recomputation and by backward nodes."""
        rec = self.recomputed(gm)
        out = []
        for node in rec:
            if self.is_copy(node) or not self.cheap(node):
                continue
            early = [u for u in node.users if u in rec]
            late = [u for u in node.users if u not in rec and u.op != "output"]
            if early and late:
                out.append(node.name)
        return out

    def backward_nodes(self, gm: fx.GraphModule) -> list[str]:
        rec = self.recomputed(gm)
        return [n.name for n in gm.graph.nodes if n.op == "call_function" and n not in rec]


def _checkpoint_sets(n: int) -> list[tuple[int, ...]]:
    return list(dict.fromkeys([(), tuple(range(1, n)), (n // 2,) if n > 1 else (), tuple(range(1, n, 2)), tuple(range(2, n, 3))]))


CASES = ["gpt", "rmsnorm_lm", "padded_dropout", "dropout_mlp"]
HELD = ["base", "nothing"]  # held: min-cut's saved names (as the partitioner passes), or none at all


@functools.lru_cache(maxsize=None)
def _scheduled(name: str, held: str = "base") -> list[tuple[tuple[int, ...], Scheduled]]:
    """``held="nothing"`` is the adversarial case: every recomputed value is a candidate for a
    copy, so only the cheapness test (random, banned, matmul/convolution/attention) stops one."""
    jg, base, always = recorded(name)
    lin = linearize(jg, base, always, score=least_peak)
    hold = None if held == "base" else set()
    return [(cps, Scheduled(jg, base, cps, lin, hold)) for cps in _checkpoint_sets(lin.chain.n)]


@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize("name", CASES)
def test_cheap_unheld_values_not_held_from_rebuild_to_backward(name, held):
    copies_seen = violations_without = 0
    for cps, s in _scheduled(name, held):
        s.rebuilt.graph.lint()
        assert not s.held_across(s.rebuilt), (cps, s.held_across(s.rebuilt))
        violations_without += len(s.held_across(s.plain))
        copies_seen += sum(map(s.is_copy, s.rebuilt.graph.nodes))
    if name != "dropout_mlp":  # there, every value read both ways is random or a matmul's
        assert violations_without > 0 and copies_seen > 0, "the case exercises nothing"


@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize("name", ["padded_dropout", "dropout_mlp"])
def test_random_and_heavy_values_never_copied(name, held):
    """With dropout, random ops are recomputed (their RNG state replayed later), never copied;
    nor is a matmul or attention output, even when nothing is held."""
    random_recomputed = 0
    for cps, s in _scheduled(name, held):
        rec = s.recomputed(s.rebuilt)
        random_recomputed += sum(map(_random, rec))
        assert not [n.name for n in rec if s.is_copy(n) and (_random(n) or _heavy(n))], cps
    assert random_recomputed > 0, "no random op recomputed: the case exercises nothing"


def test_adversarial_case_has_random_and_heavy_values_read_both_ways():
    """With nothing held, dropout_mlp's schedule without copies holds random and matmul values
    from the rebuild to the backward: the test above is not vacuous for them."""
    random_both = heavy_both = 0
    for cps, s in _scheduled("dropout_mlp", "nothing"):
        rec = s.recomputed(s.plain)
        for node in rec:
            if [u for u in node.users if u in rec] and [u for u in node.users if u not in rec and u.op != "output"]:
                random_both += _random(node)
                heavy_both += _heavy(node)
    assert random_both > 0 and heavy_both > 0


@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize("name", CASES)
def test_copies_are_cheap_faithful_and_read_late(name, held):
    for cps, s in _scheduled(name, held):
        gm = s.rebuilt
        by_name = {n.name: n for n in gm.graph.nodes}
        rec = s.recomputed(gm)
        original = {n: by_name[n.name[: -len(SUFFIX)]] for n in gm.graph.nodes if s.is_copy(n)}
        added = {n.name for n in gm.graph.nodes} - {n.name for n in s.plain.graph.nodes}
        assert added == {c.name for c in original}, f"nodes added besides copies: {added - {c.name for c in original}}"
        for copy, orig in original.items():
            assert orig in rec and s.cheap(orig), (cps, copy.name)
            assert copy.target is orig.target and copy.kwargs == orig.kwargs
            # arguments: the original's, or their copies
            flat_copy, flat_orig = [], []
            fx.node.map_aggregate(copy.args, flat_copy.append)
            fx.node.map_aggregate(orig.args, flat_orig.append)
            assert len(flat_copy) == len(flat_orig)
            for a, b in zip(flat_copy, flat_orig):
                if isinstance(a, fx.Node):
                    assert a is b or (s.is_copy(a) and original[a] is b), (copy.name, a.name, b.name)
                else:
                    assert a == b, (copy.name, a, b)
            assert [u for u in orig.users if u in rec], f"{orig.name} copied but read by no recomputation"
            for user in copy.users:
                assert user.op != "output" and (user not in rec or s.is_copy(user)), (copy.name, user.name)


@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize("name", CASES)
def test_only_copies_change_the_backward(name, held):
    for cps, s in _scheduled(name, held):
        assert s.backward_nodes(s.rebuilt) == s.backward_nodes(s.plain), cps
        plain_rec = {n.name for n in s.recomputed(s.plain)}
        assert {n.name for n in s.recomputed(s.rebuilt) if not s.is_copy(n)} == plain_rec, cps
        placeholders = lambda gm: [n.name for n in gm.graph.nodes if n.op == "placeholder"]  # noqa: E731
        assert placeholders(s.rebuilt) == placeholders(s.plain), cps
        out = lambda gm: [a.name if isinstance(a, fx.Node) else a for a in gm.graph.find_nodes(op="output")[0].args[0]]  # noqa: E731
        assert out(s.rebuilt) == out(s.plain), cps


def test_without_held_nothing_is_copied():
    for cps, s in _scheduled("rmsnorm_lm"):
        assert not any(s.is_copy(n) for n in s.plain.graph.nodes), cps


# ------------------------------------------------------------------ end to end


def _step(model: torch.nn.Module, compiled, inputs) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(0)
    compiled(*inputs).float().square().mean().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def _copies(bw: fx.GraphModule) -> int:
    return sum(n.name.endswith(SUFFIX) for n in bw.graph.nodes)


@pytest.mark.usefixtures("fresh_compile")
@pytest.mark.parametrize("name", ["rmsnorm_lm", "padded_dropout", "gpt"])
def test_gradients_equal_eager_and_min_cut_no_inductor(name):
    case = _cases()[name]()
    model, inputs = case.model, case.inputs
    ref = _step(model, model, inputs)
    backend = fxremat.make_backend(compiler="eager")
    recorder = RecordingPartitioner(backend.partitioner)
    backend.partitioner = recorder
    ours = _step(model, torch.compile(model, backend=backend), inputs)
    (report,) = fxremat.last_reports()
    (call,) = recorder.calls
    assert report.chosen == "fxremat" and report.plan.checkpoints, report
    assert _copies(call.bw) > 0, "the backward that ran reads no just-in-time copy"
    call.bw.graph.lint()
    torch._dynamo.reset()
    theirs = _step(model, torch.compile(model, backend=min_cut_backend(compiler="eager")), inputs)
    for key in ref:
        torch.testing.assert_close(ours[key], ref[key], rtol=1e-5, atol=1e-6, msg=key)
        torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0, msg=key)


@pytest.mark.usefixtures("fresh_compile")
def test_gradients_equal_min_cut_inductor_mode():
    """Planned for Inductor (Inductor's decompositions; the graphs run as FX code): copies in the
    backward, gradients equal min-cut's in the same mode bit for bit and eager's closely."""
    case = _cases()["rmsnorm_lm"]()
    model, inputs = case.model, case.inputs
    ref = _step(model, model, inputs)
    calls: list = []
    ours = _step(model, torch.compile(model, backend=inductor_mode_backend(partition, calls)), inputs)
    (report,) = fxremat.last_reports()
    ((fw, bw, _),) = calls
    assert report.chosen == "fxremat" and _copies(bw) > 0, report
    torch._dynamo.reset()
    theirs = _step(model, torch.compile(model, backend=inductor_mode_backend(_torch.min_cut, [])), inputs)
    for key in ref:
        torch.testing.assert_close(ours[key], ref[key], rtol=1e-4, atol=1e-6, msg=key)
        torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0, msg=key)
