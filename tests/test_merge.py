"""``merge.merge_duplicates``, ``merge.store_shared``, ``_torch.is_random`` and the saved twins
(``merge.forward_twins``, ``merge.reading_saved_twins``): the joint-graph facts that keep one
attention mask per graph under Inductor and keep the backward from rebuilding saved values.

Invariants: only data-only values an SDPA call reads as its mask (and their data-only ancestors)
are merged, each into the first identical node; values derived from parameters, and data-only
values no attention reads, are left alone; gradients are unchanged.  ``store_shared`` marks each
data-only value two or more ops read (not constants, not parameter-derived values), the mark is
the identity, and the memory model then counts the value as stored.  SDPA without dropout is not
random (no RNG replay wraps it); with dropout it is.  A backward copy of a forward value reads
the value only while the context is open and only where the value is saved (the joint graph is
restored on exit); on a tiny HF BERT with nothing recomputed the backward rebuilds no layer's
statistics or matmul and reads every value the forward saves.
"""

from __future__ import annotations

import functools
import unittest.mock

import pytest

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import fxremat
from fxremat import _torch
from fxremat.fusion import fused_values
from fxremat.analysis import analyze
from fxremat.merge import forward_twins, merge_duplicates, reading_saved_twins, store_shared
from fxremat.partitioner import partition

aten = torch.ops.aten


def _joint(fn, *args) -> fx.GraphModule:
    """A joint-like graph: placeholders named as AOTAutograd names primals, one gradient output
    per primal (None where the primal gets none)."""
    gm = make_fx(fn)(*args)
    for i, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        node.name = node.target = f"primals_{i + 1}"
    gm.recompile()
    return gm


def _attention_layers(q, mask, w):
    out = q
    for _ in range(3):  # each "layer" converts the boolean mask again, as HF models do
        bias = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
        out = F.scaled_dot_product_attention(out @ w, out, out, attn_mask=bias)
    scaled = (w * 2).sum() + (w * 2).sum()  # a parameter-derived duplicate: never merged
    return out, scaled, None, None, None  # (2 forward outputs) + one gradient per primal


def test_identical_masks_feeding_attention_are_merged_once():
    q, w = torch.randn(1, 2, 8, 4), torch.randn(4, 4)
    mask = torch.rand(1, 1, 8, 8) > 0.3
    gm = _joint(_attention_layers, q, mask, w)
    wheres = lambda: [n for n in gm.graph.nodes if n.target is aten.masked_fill.Scalar]  # noqa: E731
    assert len(wheres()) == 3
    before = gm(q, mask, w)
    merged = merge_duplicates(gm, num_fwd_outputs=2, static_inputs=frozenset())
    assert merged >= 2 and len(wheres()) == 1
    (fill,) = wheres()
    assert sum("scaled_dot_product" in str(u.target) for u in fill.users) == 3
    muls = [n for n in gm.graph.nodes if n.target is aten.mul.Tensor]
    assert len(muls) == 2, "a duplicate derived from a parameter must stay"
    after = gm(q, mask, w)
    torch.testing.assert_close(after[0], before[0], rtol=0, atol=0)


def test_no_gradient_pairing_no_merge():
    q, w = torch.randn(1, 2, 8, 4), torch.randn(4, 4)
    mask = torch.rand(1, 1, 8, 8) > 0.3
    gm = _joint(_attention_layers, q, mask, w)
    assert merge_duplicates(gm, num_fwd_outputs=3, static_inputs=frozenset()) == 0


def test_sdpa_without_dropout_is_not_random():
    def f(q, mask):
        return (F.scaled_dot_product_attention(q, q, q, attn_mask=mask, dropout_p=0.0),
                F.scaled_dot_product_attention(q, q, q, attn_mask=mask, dropout_p=0.1))

    q, mask = torch.randn(1, 2, 8, 4), torch.zeros(1, 1, 8, 8)
    gm = make_fx(f, decomposition_table=_torch.eager_decompositions())(q, mask)
    seeded = [n for n in gm.graph.nodes
              if n.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ())]
    assert len(seeded) == 2
    assert [_torch.is_random(n) for n in seeded] == [False, True]


class _MaskedAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(3))

    def forward(self, x, mask):
        h = x
        for p in self.proj:
            bias = torch.zeros(mask.shape, dtype=x.dtype).masked_fill(~mask, float("-inf"))
            q = p(h).view(2, 8, 2, 8).transpose(1, 2)
            h = h + F.scaled_dot_product_attention(q, q, q, attn_mask=bias).transpose(1, 2).reshape(2, 8, 16)
        return h.square().mean()


def test_merged_masks_train_like_eager():
    torch.manual_seed(0)
    model = _MaskedAttention()
    x = torch.randn(2, 8, 16)
    mask = torch.ones(2, 1, 8, 8, dtype=torch.bool).tril()
    model(x, mask).backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    with _torch.caches_disabled():
        torch.compile(model, backend=fxremat.make_backend(compiler="eager"))(x, mask).backward()
    for got, want in zip((p.grad for p in model.parameters()), expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def _eager_mask_layers(x, keep, w):
    """Eager attention as HF GPT-2 writes it: one float mask built from the boolean input, added
    to every layer's scores; and a parameter-derived value read twice (never marked)."""
    mask = torch.where(keep, 0.0, torch.finfo(x.dtype).min)
    h = x
    for _ in range(2):
        scores = (h @ w) @ h.transpose(-1, -2) + mask
        h = scores.softmax(-1) @ h
    w2 = w * 2
    return h.sum() + (w2 + w2.t()).sum(), None, None, torch.zeros_like(w)  # w gets a gradient


def test_a_mask_read_by_every_layer_is_stored_once():
    x, w = torch.randn(2, 8, 4), torch.randn(4, 4)
    keep = torch.rand(2, 1, 8) > 0.3
    gm = _joint(_eager_mask_layers, x, keep, w)
    before = gm(x, keep, w)
    assert store_shared(gm, num_fwd_outputs=1) == 1
    (mark,) = [n for n in gm.graph.nodes if _torch.is_realize(n)]
    where = mark.args[0]
    assert where.target is aten.where.self
    assert list(where.users) == [mark] and len(mark.users) == 2, "both layers read the stored mask"
    torch.testing.assert_close(gm(x, keep, w)[0], before[0], rtol=0, atol=0)
    own = lambda n: [id(n.meta["val"])] if isinstance(n.meta.get("val"), torch.Tensor) else []  # noqa: E731
    fused = fused_values(gm.graph, own)
    assert where not in fused and mark not in fused, "the memory model counts the stored mask"


def test_nothing_marked_without_gradient_pairing_or_twice_read_data():
    x, w = torch.randn(2, 8, 4), torch.randn(4, 4)
    keep = torch.rand(2, 1, 8) > 0.3
    gm = _joint(_eager_mask_layers, x, keep, w)
    assert store_shared(gm, num_fwd_outputs=2) == 0  # the outputs do not pair gradients with primals

    def one_layer(x, keep, w):
        mask = torch.where(keep, 0.0, -1e9)
        return ((x @ w) @ x.transpose(-1, -2) + mask).softmax(-1).sum(), None, None, torch.zeros_like(w)

    gm = _joint(one_layer, x, keep, w)
    assert store_shared(gm, num_fwd_outputs=1) == 0  # read once: Inductor's inlining is right

    def boolean_twice(x, keep, w):
        both = keep & keep.flip(-1)  # a boolean mask read by two layers: left to Inductor
        h = (x @ w).masked_fill(~both.transpose(-1, -2), 0.0)
        return (h.masked_fill(~both.transpose(-1, -2), 1.0) @ w).sum(), None, None, torch.zeros_like(w)

    gm = _joint(boolean_twice, x, keep, w)
    assert store_shared(gm, num_fwd_outputs=1) == 0


class _EagerMaskAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(4))

    def forward(self, x, keep):
        mask = torch.where(keep[:, None, None, :], 0.0, torch.finfo(x.dtype).min)
        h = x
        for p in self.proj:
            q = p(h).view(2, 64, 2, 8).transpose(1, 2)
            attn = (q @ q.transpose(-1, -2) + mask).softmax(-1).tanh().softmax(-1)  # activations dominate
            h = h + (attn @ q).transpose(1, 2).reshape(2, 64, 16)
        return h.square().mean()


def test_stored_mask_trains_like_eager_through_inductor():
    torch.manual_seed(0)
    model = _EagerMaskAttention()
    x, keep = torch.randn(2, 64, 16), torch.rand(2, 64) > 0.2
    model(x, keep).backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    seen = []
    original = fxremat.partitioner.handed_out

    def spy(fw, bw):
        seen.append(sum(_torch.is_realize(n) for n in fw.graph.nodes))
        return original(fw, bw)

    with _torch.caches_disabled(), unittest.mock.patch.object(fxremat.partitioner, "handed_out", spy):
        torch.compile(model, backend=fxremat.backend)(x, keep).backward()
    assert seen == [1], "the forward handed to Inductor stores the mask once"
    for got, want in zip((p.grad for p in model.parameters()), expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ saved twins


def _twin_joint() -> fx.GraphModule:
    """A joint-like graph whose backward computes ``sin(x)`` again (``sin_1``) and reads it twice."""
    def joint(primals_1, tangents_1):
        y = primals_1.sin()
        again = primals_1.sin()
        return y, again * tangents_1 + again

    gm = make_fx(joint, tracing_mode="fake")(torch.randn(4), torch.randn(4))
    for node, name in zip(gm.graph.find_nodes(op="placeholder"), ("primals_1", "tangents_1")):
        node.name = node.target = name
    gm.recompile()
    return gm


def test_backward_reads_a_saved_twin_only_inside_the_context():
    """``forward_twins`` maps the backward's copy to the forward's node; inside
    ``reading_saved_twins`` with the twin saved, the backward reads the twin (the copy has no
    reader); outside, and with the twin not saved, the graph is what it was."""
    gm = _twin_joint()
    jg = analyze(gm, num_fwd_outputs=1)
    by_name = {n.name: n for n in gm.graph.nodes}
    twins = forward_twins(jg)
    assert [(t.copy.name, t.of.name, [u.name for u in t.readers]) for t in twins] == [("sin_1", "sin", ["mul", "add"])]
    before = str(gm.graph)
    with reading_saved_twins(twins, []) as edited:
        assert edited == 0 and str(gm.graph) == before
    with reading_saved_twins(twins, [by_name["sin"]]) as edited:
        assert edited == 2  # the mul and the add
        assert not by_name["sin_1"].users and len(by_name["sin"].users) == 3
    assert str(gm.graph) == before
    assert [u.name for u in by_name["sin_1"].users] == ["mul", "add"]


@pytest.mark.usefixtures("fresh_compile")
def test_layer_norm_backward_reads_its_saved_twins():
    """Inductor's layer-norm backward normalizes its input again (``(x - mean) * rstd``; min-cut's
    CSE merges that copy into the forward's, fxremat's joint copy keeps it).  On a tiny HF BERT
    with nothing recomputed (``memory_budget=1.0``), fxremat's backward must read the saved
    normalized value, not rebuild the layer's input and statistics: no forward ``var_mean`` and no
    forward matmul in the backward; every value the forward saves is read; gradients as eager's."""
    from bench.hf_models import make_hf_case
    from fuzz_models import force_fxremat_plan
    from test_inductor_replay import inductor_mode_backend

    case = make_hf_case("bert", "tiny", mask=True, dropout=0.0)
    eager, compiled = case.build(), case.build()
    calls: list = []
    pf = functools.partial(partition, options=fxremat.Options(memory_budget=1.0))
    with force_fxremat_plan():
        torch.compile(compiled.module, backend=inductor_mode_backend(pf, calls))(*compiled.inputs).backward()
    eager.module(*eager.inputs).backward()
    for p, q in zip(eager.module.parameters(), compiled.module.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)
    ((fw, bw, _),) = calls
    assert fxremat.last_reports()[-1].plan.checkpoints == ()
    forward_names = {node.name for node in fw.graph.nodes}
    rebuilt = [node.name for node in bw.graph.nodes if node.op == "call_function" and node.name in forward_names
               and node.target in (aten.var_mean.correction, aten.addmm.default, aten.mm.default)]
    assert not rebuilt
    assert all(node.users for node in bw.graph.nodes if node.op == "placeholder"
               and not _torch.is_tangent(node) and not _torch.is_sym_node(node))
