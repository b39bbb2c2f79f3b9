"""``lowering.keep_matmuls_in_place``: a matmul read only by an add whose other operand comes later
is rewritten as the transpose of the transposed product, so Inductor's post-grad pass does not
turn the pair into one ``addmm`` at the add (which keeps the matmul's operands alive until then).
``lowering.accumulate_into_addend``: ``x + put_acc(zeros, ...)`` (a tied embedding's gradient
added to its head's) becomes ``put_acc(x, ...)``: one weight-sized buffer instead of three.
``lowering.merge_accumulating_puts``: two accumulations into one buffer (a token embedding tied
three ways: encoder, decoder, head) become one accumulation of the concatenated rows, which
Inductor runs in place (the second of a chain it runs on a copy).
``lowering.sum_small_dims_by_matmul``: a sum over a batch of 2 (which Inductor inlines into its
readers) becomes ``mm(ones, x)``, and its accumulation into an earlier sum ``addmm``: each layer's
contribution to a shared position bias is reduced and added where it is computed.
``lowering.defer_returned_products``: a returned matmul of operands at most half its size (a
classifier's weight gradient) moves to the end of the graph, where Inductor's peak-memory
reordering runs it; one with larger operands, another reader, or an operand Inductor would compute
for it alone stays.  A convolution's returned weight gradient of small operands gets a
``convolution_backward`` call of its own at the end (the input gradient's call stays in place).
``lowering.split_shared_transcendentals``: a heavy pointwise value (``sigmoid``) read by two
pointwise ops gets one copy per reader, so Inductor inlines it instead of storing it; a light
one, one with an extern or reduction reader, or a returned one is left alone.
``lowering.store_extern_fanout``: a pointwise value (an attention mask) that two or more calls
with layout constraints read is marked stored once, every reader reading the mark, smallest values
first within a byte limit; one read by a single such call or only by matmuls, a returned one, or
one that is no pointwise loop is left alone.

Invariants: the rewrite is exact in value (checked against the original graph on real tensors),
every new node has a ``meta["val"]`` of the right shape, the graph lints, and matmuls whose add
operand is already available, or whose operands are no larger than the product, are left alone.
End to end (Inductor mode, no kernel compiled): on an LM whose head is tied to its embedding the
backward fxremat returns has no such matmul-add pair (min-cut's has one: the check is not
vacuous), and gradients equal eager's.
"""

from __future__ import annotations

import copy
import functools
import operator

import pytest
import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx
from helpers import loss_of, measured_with_min_cut
from test_inductor_replay import inductor_mode_backend

from fxremat import _torch, lowering
from fxremat.lowering import (accumulate_into_addend, accumulate_sums_by_addmm, keep_matmuls_in_place, store_permuted_fanout,
                              sum_small_dims_by_matmul)
from fxremat.partitioner import partition
from torch._functorch.partitioners import min_cut_rematerialization_partition

aten = torch.ops.aten


def _deferred_pairs(gm: fx.GraphModule) -> list[fx.Node]:
    """mm nodes read only by an add (directly, or through transposes that cancel out, which
    Inductor removes) whose other operand is computed after the mm."""
    pos = {n: i for i, n in enumerate(gm.graph.nodes)}
    out = []
    for n in gm.graph.nodes:
        if n.target is not aten.mm.default:
            continue
        node, flips = n, 0
        while len(node.users) == 1 and next(iter(node.users)).target in (aten.permute.default, aten.t.default):
            node, flips = next(iter(node.users)), flips + 1
        if len(node.users) == 1 and flips % 2 == 0:
            (u,) = node.users
            if u.target is aten.add.Tensor and any(isinstance(a, fx.Node) and a is not node and pos[a] > pos[n] for a in u.args):
                out.append(n)
    return out


def _late_add(a, b, x):
    grad = a.t() @ b  # (64, 256) @ (256, 32): operands 96 KiB, product 8 KiB
    late = torch.tanh(x).exp()  # computed after the matmul
    return (grad + late,)


ARGS = (torch.randn(256, 64), torch.randn(256, 32), torch.randn(64, 32))


def rewritten_exactly(fn, args, rewrite, pending) -> fx.GraphModule:
    """Trace ``fn``, check that ``pending`` finds something, ``rewrite`` rewrites it once and
    ``pending`` then finds nothing, and that the rewritten graph equals the original on ``args``."""
    gm = make_fx(fn, tracing_mode="fake")(*args)
    ref = make_fx(fn)(*args)
    assert pending(gm)
    assert rewrite(gm) == 1
    gm.graph.lint()
    assert not pending(gm)
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))  # run the rewritten graph on real tensors
    torch.testing.assert_close(real(*args)[0], ref(*args)[0])
    return gm


def test_late_add_is_rewritten_exactly():
    gm = rewritten_exactly(_late_add, ARGS, keep_matmuls_in_place, _deferred_pairs)
    for n in gm.graph.nodes:
        if n.op == "call_function":
            assert isinstance(n.meta.get("val"), torch.Tensor), n
    (mm,) = [n for n in gm.graph.nodes if n.target is aten.mm.default]
    assert tuple(mm.meta["val"].shape) == (32, 64)


def _shared_weight_gradient(a1, b1, a2, b2, a3, b3, x):
    """A weight used by three layers (ALBERT's shared layer): its gradient is a sum of matmuls,
    each added to the sum of the ones before, which the previous rewrite produced."""
    g = a1.t() @ b1
    g = a2.t() @ b2 + g
    return (a3.t() @ b3 + g + torch.tanh(x),)


def test_rewrites_that_read_earlier_rewrites():
    args = tuple(torch.randn(256, k) for k in (64, 32) * 3) + (torch.randn(64, 32),)
    gm = make_fx(_shared_weight_gradient, tracing_mode="fake")(*args)
    ref = make_fx(_shared_weight_gradient)(*args)
    keep_matmuls_in_place(gm)  # a new node read by a later add has the position of the mm it replaced
    gm.graph.lint()
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*args)[0], ref(*args)[0])


def test_early_operand_or_small_operands_are_left_alone():
    def early(a, b, x):
        late = torch.tanh(x)
        return (a.t() @ b + late,)  # the add's other operand exists before the matmul

    def small(a, b, x):
        return ((a @ b.t()) + torch.tanh(x.t() @ x).sum(),)  # (64, 32) @ (32, 64): product larger

    gm = make_fx(early, tracing_mode="fake")(*ARGS)
    assert keep_matmuls_in_place(gm) == 0
    gm = make_fx(small, tracing_mode="fake")(torch.randn(64, 32), torch.randn(64, 32), torch.randn(8, 64))
    assert keep_matmuls_in_place(gm) == 0


def _tied_weight_gradient(head_grad_in, idx, values):
    head = head_grad_in.t() @ head_grad_in.new_ones(16, 64)  # (vocab, 64), early
    emb = torch.ops.aten._unsafe_masked_index_put_accumulate(
        torch.zeros(32, 64), (idx >= 0).unsqueeze(-1), [idx], torch.tanh(values))  # later
    return (head + emb,)


TIED_ARGS = (torch.randn(16, 32), torch.tensor([3, 3, 7, 0, 31, 3]), torch.randn(6, 64))


def _masked_put(node: object) -> bool:
    """An embedding's accumulating put of rows: ``_unsafe_masked_index_put_accumulate`` (torch 2.13's
    decomposition of its backward) or ``index_put(..., accumulate=True)`` (torch 2.11's)."""
    return lowering._is_accumulating_put(node)


def _put_values(put: fx.Node) -> fx.Node:
    return put.args[3] if _torch.index_put_name(put) == "_unsafe_masked_index_put_accumulate" else put.args[2]


def _accumulating_puts_read_by_an_add(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if _masked_put(n) and any(u.target is aten.add.Tensor for u in n.users)]


def test_tied_embedding_gradient_accumulates_into_the_head_gradient():
    gm = rewritten_exactly(_tied_weight_gradient, TIED_ARGS, accumulate_into_addend, _accumulating_puts_read_by_an_add)
    assert not [n for n in gm.graph.nodes if n.target in (aten.zeros.default, aten.full.default)]


def test_accumulation_left_alone_when_the_addend_is_read_again():
    def read_again(a, idx, values):
        head = a.t() @ a.new_ones(16, 64)
        emb = torch.ops.aten._unsafe_masked_index_put_accumulate(
            torch.zeros(32, 64), (idx >= 0).unsqueeze(-1), [idx], values)
        return head + emb, head.sum()

    gm = make_fx(read_again, tracing_mode="fake")(*TIED_ARGS)
    assert accumulate_into_addend(gm) == 0  # the head gradient is read after the add: not written over


def _three_way_tied_gradient(head_grad_in, idx, values, idx2, values2):
    """A token embedding shared by an encoder, a decoder and the head (BART, T5): the head's gradient,
    then the decoder's rows accumulated into it, then the encoder's (accumulate_into_addend's output)."""
    head = head_grad_in.t() @ head_grad_in.new_ones(16, 64)
    put = torch.ops.aten._unsafe_masked_index_put_accumulate
    dec = put(head, (idx != 3).unsqueeze(-1), [idx], torch.tanh(values))
    return (put(dec, (idx2 >= 0).unsqueeze(-1), [idx2], values2 * 2),)


THREE_WAY_ARGS = (torch.randn(16, 128), torch.tensor([[3, 3, 7], [0, 127, 3]]), torch.randn(2, 3, 64),
                  torch.tensor([1, 3, 3, 30]), torch.randn(4, 64))  # 10 rows of 64 into a (128, 64) buffer


def _chained_puts(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if _masked_put(n) and _masked_put(n.args[0])]


def test_chained_accumulations_into_one_buffer_become_one():
    gm = rewritten_exactly(_three_way_tied_gradient, THREE_WAY_ARGS, lowering.merge_accumulating_puts, _chained_puts)
    (put,) = [n for n in gm.graph.nodes if _masked_put(n)]
    assert put.args[0].target is aten.mm.default  # accumulates into the head's gradient itself
    assert tuple(_put_values(put).meta["val"].shape) == (10, 64)  # 6 decoder rows, then 4 encoder rows


def test_chained_accumulations_of_more_rows_than_the_buffer_are_left_alone():
    many = (torch.randn(16, 128), torch.randint(0, 128, (2, 20)), torch.randn(2, 20, 64),
            torch.randint(0, 128, (10,)), torch.randn(10, 64))  # 50 rows of 64 into a (128, 64) buffer
    gm = make_fx(_three_way_tied_gradient, tracing_mode="fake")(*many)
    assert lowering.merge_accumulating_puts(gm) == 0  # the concatenated rows would outweigh the copy saved


@pytest.mark.usefixtures("fresh_compile")
def test_tied_lm_head_gradient_is_not_deferred():
    """Tiny HF GPT-2 (LM head tied to the token embedding), planned for Inductor."""
    pytest.importorskip("transformers")
    from bench.hf_models import make_hf_case

    case = make_hf_case("gpt2-sdpa", "tiny", mask=True)
    ref = case.build()
    case.loss(ref.module(*ref.inputs), ref.target).backward()

    def planned(partition_fn):
        torch._dynamo.reset()
        built, calls = case.build(), []
        compiled = torch.compile(built.module, backend=inductor_mode_backend(partition_fn, calls))
        case.loss(compiled(*built.inputs), built.target).backward()
        return built, [bw for _, bw, _ in calls]

    mc, mc_bws = planned(min_cut_rematerialization_partition)
    assert any(_deferred_pairs(bw) for bw in mc_bws), "min-cut's backward has the tied head's matmul-add pair"
    fx_built, fx_bws = planned(partition)
    assert not any(_deferred_pairs(bw) for bw in fx_bws)
    # and the embedding's gradient is accumulated into the head's, not into zeros then added
    assert any(_accumulating_puts_read_by_an_add(bw) for bw in mc_bws), "min-cut's backward adds the two"
    assert not any(_accumulating_puts_read_by_an_add(bw) for bw in fx_bws)
    for (name, p), q in zip(fx_built.module.named_parameters(), ref.module.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)


class _SharedLayer(torch.nn.Module):
    """One pre-norm transformer layer applied six times (ALBERT's weight sharing)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True, norm_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(6):
            x = self.layer(x)
        return x


@pytest.mark.usefixtures("fresh_compile")
def test_layer_shared_across_depth_is_planned_for_inductor():
    """Each shared weight's gradient is a chain of matmul-adds, each add reading the previous
    rewrite: planned for Inductor (no kernel compiled), fxremat plans it (no fallback) and the
    gradients equal eager's (to 1e-6 of each gradient's largest entry: six applications make them
    large, ~1e3).  No shared bias's or norm's gradient is an add of a reduction: each application's
    reduction is accumulated by an ``addmm`` (``lowering.accumulate_sums_by_addmm``)."""
    torch.manual_seed(0)
    model, x = _SharedLayer(), torch.randn(4, 32, 64)
    loss_of(model(x)).backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    import fxremat

    calls = []
    loss_of(torch.compile(model, backend=inductor_mode_backend(partition, calls))(x)).backward()
    assert calls and [r.chosen for r in fxremat.last_reports()] == ["fxremat"], "fxremat fell back"
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, ref[name], rtol=1e-5, atol=1e-6 * ref[name].abs().max().item(), msg=name)
    (bw,) = [bw for _, bw, _ in calls]
    sums = {n for n in bw.graph.nodes if n.target is aten.sum.dim_IntList}
    assert not [n.name for n in bw.graph.nodes if n.target is aten.add.Tensor
                and any(a in sums or (a.target is aten.view.default and a.args[0] in sums) for a in n.all_input_nodes)]
    assert sum(n.target is aten.addmm.default and tuple(n.args[1].meta["val"].shape) == (1, 1) for n in bw.graph.nodes) >= 5


def _shared_bias_gradient(c1, c2, c3, keep):
    """Three layers' contributions to the gradient of a (1, H, S, S) bias every layer adds to its
    (B, H, S, S) scores (T5's position bias): each masked, summed over the batch, added up."""
    total = None
    for c in (c1, c2, c3):
        part = torch.where(keep, torch.tanh(c), 0.0).sum(0, keepdim=True)
        total = part if total is None else total + part
    return (total,)


BIAS_ARGS = (*(torch.randn(2, 4, 128, 512) for _ in range(3)), torch.rand(2, 1, 128, 512) > 0.3)  # 2 MiB each


def _batch_sums(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.target is aten.sum.dim_IntList and list(n.args[1]) == [0]]


def test_batch_sums_become_matmuls_that_accumulate():
    gm = make_fx(_shared_bias_gradient, tracing_mode="fake")(*BIAS_ARGS)
    ref = make_fx(_shared_bias_gradient)(*BIAS_ARGS)
    assert len(_batch_sums(gm)) == 3
    assert sum_small_dims_by_matmul(gm) == 3
    gm.graph.lint()
    assert not _batch_sums(gm)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(aten.mm.default) == 1 and targets.count(aten.addmm.default) == 2, targets
    assert aten.add.Tensor not in targets  # every accumulation is an addmm
    for n in gm.graph.nodes:
        if n.op == "call_function":
            assert isinstance(n.meta.get("val"), torch.Tensor), n
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*BIAS_ARGS)[0], ref(*BIAS_ARGS)[0])


def _full_size_bias_gradient(c1, c2, c3, c4):
    """HF MPNet's pattern: the bias is expanded to the scores' full (B, H, S, S) size once, so its
    gradient is the layers' contributions added up at that size (a placeholder among them), and
    only then summed over the batch."""
    total = torch.tanh(c1) + torch.tanh(c2)
    total = total + c3
    total = total + torch.tanh(c4)
    return (total.sum(0, keepdim=True),)


def test_sum_of_added_contributions_is_distributed_then_accumulated():
    args = BIAS_ARGS[:3] + (torch.randn(2, 4, 128, 512),)
    gm = make_fx(_full_size_bias_gradient, tracing_mode="fake")(*args)
    ref = make_fx(_full_size_bias_gradient)(*args)
    assert len(_batch_sums(gm)) == 1
    assert sum_small_dims_by_matmul(gm) == 4  # one sum per contribution
    gm.graph.lint()
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(aten.mm.default) == 1 and targets.count(aten.addmm.default) == 3, targets
    assert aten.add.Tensor not in targets and not _batch_sums(gm)
    # each contribution is reduced right after it is computed: nothing full-size waits for the end
    pos = {n: i for i, n in enumerate(gm.graph.nodes)}
    for tanh in (n for n in gm.graph.nodes if n.target is aten.tanh.default):
        (reader,) = tanh.users
        assert pos[reader] == pos[tanh] + 1 and reader.target is aten.view.default
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*args)[0], ref(*args)[0])


@pytest.mark.parametrize("case", ["read_elsewhere", "broadcast_term", "not_contiguous"])
def test_sums_of_other_adds_are_not_distributed(case):
    x = torch.randn(2, 4, 128, 512)
    fn, args = {
        # the add is read again: it must exist anyway
        "read_elsewhere": (lambda a, b: (lambda t: (t.sum(0), t.exp()))(a + b), (x, x.clone())),
        # a broadcast term has no sum over the batch of its own
        "broadcast_term": (lambda a, b: ((torch.tanh(a) + b).sum(0),), (x, torch.randn(1, 4, 128, 512))),
        # a transposed term would stay Inductor's pointwise sum (and its add with it)
        "not_contiguous": (lambda a, b: ((torch.tanh(a) + b.transpose(2, 3)).sum(0),), (x, torch.randn(2, 4, 512, 128))),
    }[case]
    gm = make_fx(fn, tracing_mode="fake")(*args)
    sum_small_dims_by_matmul(gm)
    assert any(n.target is aten.add.Tensor for n in gm.graph.nodes)


@pytest.mark.parametrize("case", ["trailing_dim", "many_rows", "small"])
def test_other_sums_are_left_alone(case):
    fn, args = {
        "trailing_dim": (lambda x: (torch.tanh(x).sum(-1, keepdim=True),), (torch.randn(2, 4, 128, 512),)),
        "many_rows": (lambda x: (torch.tanh(x).sum(0),), (torch.randn(16, 4, 128, 128),)),  # 16 > unroll threshold
        "small": (lambda x: (torch.tanh(x).sum(0),), (torch.randn(2, 4, 32, 32),)),  # 32 KiB
    }[case]
    gm = make_fx(fn, tracing_mode="fake")(*args)
    assert sum_small_dims_by_matmul(gm) == 0


def _position_bias(w, s0, s1):
    """T5's pattern: a lookup of shape (seq, seq, heads), permuted to (1, heads, seq, seq), read by
    two layers' scores."""
    idx = (torch.arange(64)[None, :] - torch.arange(64)[:, None]).abs().clamp(max=31)
    bias = torch.nn.functional.embedding(idx, w).permute(2, 0, 1).unsqueeze(0)
    first = torch.softmax(s0 + bias, -1)
    return (torch.softmax(first @ s1 + bias, -1),)


BIAS_LOOKUP_ARGS = (torch.randn(32, 4), torch.randn(2, 4, 64, 64), torch.randn(2, 4, 64, 64))


def _copies(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.target is aten.clone.default]


def test_permuted_lookup_read_twice_is_copied_once_contiguously():
    gm = make_fx(_position_bias, tracing_mode="fake")(*BIAS_LOOKUP_ARGS)
    ref = make_fx(_position_bias)(*BIAS_LOOKUP_ARGS)
    assert store_permuted_fanout(gm) == 1
    (copy_,) = _copies(gm)
    assert copy_.meta["val"].is_contiguous() and copy_.meta["val"].shape == (1, 4, 64, 64)
    assert len(copy_.users) == 2 and len(copy_.args[0].users) == 1
    assert store_permuted_fanout(gm) == 0  # nothing left to copy
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*BIAS_LOOKUP_ARGS)[0], ref(*BIAS_LOOKUP_ARGS)[0])


@pytest.mark.parametrize("case", ["read_once", "not_permuted", "returned", "broadcast"])
def test_other_views_are_not_copied(case):
    def lookup(w):
        idx = (torch.arange(64)[None, :] - torch.arange(64)[:, None]).abs().clamp(max=31)
        return torch.nn.functional.embedding(idx, w)

    fn = {
        "read_once": lambda w, s: (torch.softmax(s + lookup(w).permute(2, 0, 1), -1),),
        "not_permuted": lambda w, s: (lambda b: (b.exp() + b.sin(),))(lookup(w).unsqueeze(0)),
        "returned": lambda w, s: (lambda b: (s + b, b))(lookup(w).permute(2, 0, 1)),
        "broadcast": lambda w, s: (lambda b: (s + b, s * b))(lookup(w).permute(2, 0, 1).expand(2, 4, 64, 64)),
    }[case]
    gm = make_fx(fn, tracing_mode="fake")(torch.randn(32, 4), torch.randn(2, 4, 64, 64))
    assert store_permuted_fanout(gm) == 0


def test_sum_added_to_another_dtype_is_a_plain_matmul():
    """A half-precision batch sum added to a float32 value (type promotion at the add) becomes
    ``mm``, never an ``addmm`` mixing dtypes."""
    def fn(x, acc):
        return (acc + x.sum(0, keepdim=True),)

    args = (torch.randn(2, 4, 256, 256, dtype=torch.bfloat16), torch.randn(1, 4, 256, 256))
    gm = make_fx(fn, tracing_mode="fake")(*args)
    ref = make_fx(fn)(*args)
    assert sum_small_dims_by_matmul(gm) == 1
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert aten.mm.default in targets and aten.addmm.default not in targets
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*args)[0], ref(*args)[0], rtol=1e-2, atol=1e-2)


@pytest.mark.usefixtures("fresh_compile")
def test_t5_position_bias_gradient_planned_for_inductor(monkeypatch):
    """Tiny HF T5 (its position bias shared by every layer), planned for Inductor with every batch
    sum rewritten (the size floor lowered to 0): no batch sum left in fxremat's backwards, and the
    gradients equal eager's."""
    pytest.importorskip("transformers")
    from bench.hf_models import make_hf_case

    monkeypatch.setattr(lowering, "SUM_BY_MATMUL_MIN_BYTES", 0)
    bws = _backwards_planned_for_inductor(make_hf_case("t5", "tiny", mask=True))
    assert any(n.target is aten.addmm.default for bw in bws for n in bw.graph.nodes)
    assert not [n.name for bw in bws for n in _batch_sums(bw) if n.args[0].meta["val"].shape[0] == 2]


def _layer_sums(x1, x2, x3):
    """Three uses' bias gradients of one shared bias, accumulated: what a shared layer's backward returns."""
    return ((x1.sum([0, 1]) + x2.sum([0, 1])) + x3.sum([0, 1]),)


def test_reductions_accumulated_over_uses_become_addmms():
    """Each add of a reduction to the earlier uses' total is an ``addmm`` of the two (times a 1x1
    one): no add of a sum is left for Inductor to fuse into one kernel with every use's reduction,
    and the values are the adds' (multiplying by 1.0 is exact)."""
    args = tuple(torch.randn(4, 64, 32) for _ in range(3))
    gm = make_fx(_layer_sums, tracing_mode="fake")(*args)
    ref = make_fx(_layer_sums)(*args)
    assert accumulate_sums_by_addmm(gm) == 2
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(aten.addmm.default) == 2 and aten.add.Tensor not in targets
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*args)[0], ref(*args)[0], rtol=0, atol=0)


def _batch_norm_weight_gradients(x1, x2, w1, w2):
    """Two applications' batch-norm weight gradients (each a sum over N, H, W times a per-channel
    scale, the sum read by the input gradient too), accumulated, and an input gradient."""
    s1, s2 = x1.sum([0, 2, 3]), x2.sum([0, 2, 3])
    return (s1 * w1 + s2 * w2, x1 * s1[None, :, None, None] + x2 * s2[None, :, None, None])


def test_batch_norm_style_terms_become_addmms():
    """A term that is a sum times a scale (the sum also read elsewhere) is accumulated by an
    ``addmm`` too (a siamese CNN's shared batch norm: 82.9 -> 47.1 MiB measured), exactly."""
    args = (torch.randn(4, 8, 16, 16), torch.randn(4, 8, 16, 16), torch.randn(8), torch.randn(8))
    gm = make_fx(_batch_norm_weight_gradients, tracing_mode="fake")(*args)
    ref = make_fx(_batch_norm_weight_gradients)(*args)
    assert accumulate_sums_by_addmm(gm) == 1
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    for got, want in zip(real(*args), ref(*args)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("case", ["not_returned", "term_computed_later", "no_reduction", "broadcast", "promoted",
                                  "row_sums"])
def test_other_adds_of_sums_stay(case):
    """Left alone: an add whose value is not a returned gradient (it feeds an ``exp``), an add whose
    other operand is computed after the reduction, an add of two non-reductions, a broadcast add,
    a type-promoting one and a full-size add whose term computes from row sums."""
    fns = {
        "not_returned": lambda a, b, c: ((a.sum([0, 1]) + b.sum([0, 1])).exp(),),
        "term_computed_later": lambda a, b, c: (a.sum([0, 1]) + c[0, 0] * 3,),
        "no_reduction": lambda a, b, c: (a[0, 0] * 2 + b[0, 0],),
        "broadcast": lambda a, b, c: (a.sum([0, 1]) + b.sum([0, 1, 2]),),
        "promoted": lambda a, b, c: (a.sum([0, 1]).double() + b.sum([0, 1]),),
        "row_sums": lambda a, b, c: (a * 2 + b * b.sum(-1, keepdim=True),),  # an input gradient, not a parameter's
    }
    args = tuple(torch.randn(4, 64, 32) for _ in range(3))
    gm = make_fx(fns[case], tracing_mode="fake")(*args)
    assert accumulate_sums_by_addmm(gm) == 0


class _SharedMLP(torch.nn.Module):
    """ALBERT in small: one post-norm residual MLP layer (its linear biases and norm weights
    shared) applied ``depth`` times."""

    def __init__(self, d=32, depth=4):
        super().__init__()
        self.depth = depth
        self.fc1, self.fc2, self.norm = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d), torch.nn.LayerNorm(d)

    def forward(self, x):
        for _ in range(self.depth):
            x = self.norm(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))
        return x


@pytest.mark.inductor
@pytest.mark.usefixtures("fresh_compile")
def test_shared_layer_measured_through_inductor():
    """Compiled by Inductor, one thread: fxremat's measured peak at most half min-cut's, and the
    prediction within 10% of it (2026-12-05; before each use's reductions were accumulated by an
    ``addmm``, Inductor computed every use's bias and norm gradients in one kernel at the first
    layer, and the backward held every layer's operands until then: HF ALBERT at sequence 512,
    53.6 MiB measured, 22.8 since)."""
    torch.manual_seed(0)
    peaks, report = _measured_with_min_cut(_SharedMLP(d=64, depth=6), torch.randn(8, 256, 64))
    assert abs(peaks["fxremat"] - report.predicted_peak_bytes) <= 0.1 * peaks["fxremat"], (peaks, report.predicted_peak_bytes)
    assert peaks["fxremat"] <= 0.5 * peaks["min-cut"], peaks


def _measured_with_min_cut(model: torch.nn.Module, x: torch.Tensor):
    """:func:`helpers.measured_with_min_cut` of ``model(x)``; fxremat's plan must be its own."""
    peaks, (report,) = measured_with_min_cut(model, (x,))
    assert report.chosen == "fxremat"
    return peaks, report


class _SharedBiasEncoder(torch.nn.Module):
    """HF MPNet's attention in small: one relative-position bias, looked up from buckets computed
    with ``arange`` and expanded to the scores' full (batch, heads, seq, seq) size once, added to
    the scores of every layer."""

    def __init__(self, d=32, heads=4, layers=3, buckets=32):
        super().__init__()
        self.heads = heads
        self.bias = torch.nn.Embedding(buckets, heads)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(d, 3 * d) for _ in range(layers))
        self.out = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(layers))

    def forward(self, x):
        b, s, d = x.shape
        rel = (torch.arange(s)[None, :] - torch.arange(s)[:, None]).abs().clamp(max=self.bias.num_embeddings - 1)
        bias = self.bias(rel).permute(2, 0, 1).unsqueeze(0).expand(b, -1, s, s).contiguous()
        for qkv, out in zip(self.qkv, self.out):
            q, k, v = qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5 + bias
            x = x + out((torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, s, d))
        return x


@pytest.mark.usefixtures("fresh_compile")
def test_shared_full_size_bias_is_copied_per_layer_and_its_gradient_reduced_per_layer():
    """Planned for Inductor (no kernel compiled): the backward reads the recomputed bias through one
    copy per layer that recomputes it (``*_segment<k>``: a producer shared by the layers' softmax kernels would be
    fused with all of them, computing every layer's recomputed scores up front), each copy's
    readers between the same two matmuls; the bias gradient is reduced over the batch and
    accumulated per layer (``addmm``); gradients equal eager's."""
    torch.manual_seed(0)
    model, x = _SharedBiasEncoder(), torch.randn(2, 256, 32)  # the bias: 2 MiB
    loss_of(model(x)).backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    calls = []
    loss_of(torch.compile(model, backend=inductor_mode_backend(partition, calls))(x)).backward()
    (bw,) = [bw for _, bw, _ in calls]
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, ref[name], rtol=1e-4, atol=1e-5, msg=name)
    nodes = list(bw.graph.nodes)
    heavy_before, count = {}, 0
    for n in nodes:
        count += n.target in (aten.bmm.default, aten.mm.default, aten.addmm.default) and n.meta["val"].numel() > 4096
        heavy_before[n] = count
    biases = [n for n in nodes if n.target is aten.clone.default and tuple(n.meta["val"].shape) == (2, 4, 256, 256)]
    # one per layer whose scores the backward recomputes (the plan may save the last layer's)
    assert len(biases) >= 2 and sum("_segment" in n.name for n in biases) == len(biases) - 1, [n.name for n in biases]
    for bias in biases:
        assert len({heavy_before[u] for u in bias.users}) == 1, (bias.name, [u.name for u in bias.users])
    assert sum(n.target is aten.addmm.default and n.meta["val"].shape[0] == 1 for n in nodes) == 2


@pytest.mark.inductor
@pytest.mark.usefixtures("fresh_compile")
def test_shared_full_size_bias_measured_through_inductor():
    """Compiled by Inductor, one thread: fxremat's measured peak at most half min-cut's (7.58 MiB
    against 18.90, 2026-12-05; 18.52 before the per-layer copies and the distributed batch sum:
    one kernel computed every layer's recomputed softmax with the shared bias, their scores alive
    at once, and every layer's bias-gradient contribution was alive at the end; HF MPNet at
    sequence 512: 80.2 -> 35.4 MiB, min-cut 99.5).  The prediction is 1.5 MiB under the measured
    peak here, before the change as after (6.08 / 16.95 MiB predicted; not explained): within 25%."""
    torch.manual_seed(0)
    peaks, report = _measured_with_min_cut(_SharedBiasEncoder(layers=4), torch.randn(2, 256, 32))
    assert abs(peaks["fxremat"] - report.predicted_peak_bytes) <= 0.25 * peaks["fxremat"], (peaks, report.predicted_peak_bytes)
    assert peaks["fxremat"] <= 0.5 * peaks["min-cut"], peaks


class _SqueezeExcite(torch.nn.Module):
    """Blocks whose expanded activation is read by a pooled branch and, after two 1x1
    convolutions, by the product that rescales it: two readers a convolution apart, but the second
    computes from the first, so fusion cannot move it up (nothing to copy)."""

    def __init__(self, c=32, blocks=3):
        super().__init__()
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(c, c, 3, padding=1, bias=False) for _ in range(blocks))
        self.bns = torch.nn.ModuleList(torch.nn.BatchNorm2d(c) for _ in range(blocks))
        self.se = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Conv2d(c, 8, 1), torch.nn.SiLU(), torch.nn.Conv2d(8, c, 1))
                                      for _ in range(blocks))

    def forward(self, x):
        for conv, bn, se in zip(self.convs, self.bns, self.se):
            h = torch.nn.functional.silu(bn(conv(x)))  # 2 MiB
            x = x + h * torch.sigmoid(se(h.mean((2, 3), keepdim=True)))
        return x


@pytest.mark.usefixtures("fresh_compile")
def test_squeeze_excite_activation_is_not_copied():
    """Chen's segments, fxremat's plan forced (the blocks are recomputed), planned for Inductor: no
    ``*_segment`` copy, gradients equal eager's."""
    from fuzz_models import force_fxremat_plan
    from fxremat.options import Options

    torch.manual_seed(0)
    model, x = _SqueezeExcite(), torch.randn(2, 32, 64, 64)
    loss_of(model(x)).backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    calls = []
    chen = functools.partial(partition, options=Options("chen"))
    with force_fxremat_plan():
        loss_of(torch.compile(model, backend=inductor_mode_backend(chen, calls))(x)).backward()
    (bw,) = [bw for _, bw, _ in calls]
    assert any(n.target is aten.convolution.default for n in bw.graph.nodes)  # recomputed
    assert not [n.name for n in bw.graph.nodes if "_segment" in n.name]
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, ref[name], rtol=1e-4, atol=1e-5 * ref[name].abs().max().item(), msg=name)


def _backwards_planned_for_inductor(case) -> list[fx.GraphModule]:
    """The backward graphs fxremat returns for an HF ``case`` planned for Inductor (no kernel
    compiled), after checking that its gradients equal eager's."""
    ref = case.build()
    case.loss(ref.module(*ref.inputs), ref.target).backward()
    torch._dynamo.reset()
    built, calls = case.build(), []
    compiled = torch.compile(built.module, backend=inductor_mode_backend(partition, calls))
    case.loss(compiled(*built.inputs), built.target).backward()
    for (name, p), q in zip(built.module.named_parameters(), ref.module.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    return [bw for _, bw, _ in calls]


@pytest.mark.usefixtures("fresh_compile")
def test_three_way_tied_embedding_accumulates_once():
    """Tiny HF BART (token embedding shared by encoder, decoder and head), planned for Inductor: the
    backward fxremat returns accumulates both embeddings' rows into the head's gradient in one
    put (no put into another put's output), and the gradients equal eager's."""
    pytest.importorskip("transformers")
    from bench.hf_models import make_hf_case

    case = make_hf_case("bart", "tiny", mask=True, vocab=1024)  # 96 rows of 32 into a (1024, 32) table
    bws = _backwards_planned_for_inductor(case)
    assert not any(_chained_puts(bw) for bw in bws)
    assert any(_masked_put(n) and _put_values(n).target is aten.cat.default
               for bw in bws for n in bw.graph.nodes), "the two embeddings' rows are accumulated by one put"


def _assert_gradients(model: torch.nn.Module, ref: dict[str, torch.Tensor], rtol: float, atol: float) -> None:
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, ref[name], rtol=rtol, atol=atol, msg=name)


def _classifier_head(go, feats, w, x):
    """A classifier head's weight gradient (1000 x 256 from 8-row operands), then a larger backward
    that the returned gradient would otherwise be alive through."""
    head = go.t() @ feats  # (1000, 256): 1000 KiB from 40 KiB of operands
    rest = torch.tanh(x @ w).sum(0)
    return (head, rest)


HEAD_ARGS = (torch.randn(8, 1000), torch.randn(8, 256), torch.randn(256, 256), torch.randn(512, 256))


def _products_before_the_end(gm: fx.GraphModule) -> list[fx.Node]:
    """Returned matmuls followed by some node other than a transpose before the output."""
    nodes = list(gm.graph.nodes)
    return [n for i, n in enumerate(nodes) if n.target is aten.mm.default and nodes[-1] in n.users
            and any(m.target not in (aten.permute.default, aten.t.default) for m in nodes[i + 1:-1])]


def test_returned_product_of_small_operands_moves_to_the_end():
    gm = rewritten_exactly(_classifier_head, HEAD_ARGS, lowering.defer_returned_products, _products_before_the_end)
    assert lowering.defer_returned_products(gm) == 0  # already last: nothing moved twice
    ref = make_fx(_classifier_head)(*HEAD_ARGS)
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*HEAD_ARGS)[1], ref(*HEAD_ARGS)[1])


@pytest.mark.parametrize("case", ["large_operands", "read_again", "operand_computed_for_it"])
def test_other_products_stay_in_place(case):
    fn = {
        # a hidden layer's weight gradient: its operands (512 x 256 each) outweigh it (256 x 256)
        "large_operands": lambda go, feats, w, x: (x.t() @ torch.tanh(x), torch.tanh(x @ w).sum(0)),
        "read_again": lambda go, feats, w, x: (lambda h: (h, torch.tanh(x @ w).sum(0) + h[:1, :].sum()))(go.t() @ feats),
        # Inductor would compute the scaled operand where the product runs, holding its input
        "operand_computed_for_it": lambda go, feats, w, x: ((go * 2).t() @ feats, torch.tanh(x @ w).sum(0)),
    }[case]
    gm = make_fx(fn, tracing_mode="fake")(*HEAD_ARGS)
    assert lowering.defer_returned_products(gm) == 0


def _late_convolution(go, x, w, other):
    """A last-stage convolution's backward (a 3x3, 64 -> 64 weight gradient of 144 KiB from two
    2 x 64 x 4 x 4 operands of 8 KiB), then a larger backward the returned gradient would
    otherwise be alive through."""
    gi, gw, _ = aten.convolution_backward(go, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
    return (gw, torch.tanh(gi.sum() + other @ other).sum(0))


CONV_ARGS = (torch.randn(2, 64, 4, 4), torch.randn(2, 64, 4, 4), torch.randn(64, 64, 3, 3), torch.randn(256, 256))


def _weight_gradients_before_the_end(gm: fx.GraphModule) -> list[fx.Node]:
    """Convolution backwards computing a returned weight gradient, followed by nodes other than
    their own ``getitem``s before the output."""
    nodes = list(gm.graph.nodes)
    return [n for i, n in enumerate(nodes) if n.target is aten.convolution_backward.default and n.args[10][1]
            and any(m.target is not operator.getitem or m.args[0] is not n for m in nodes[i + 1:-1])]


def test_convolution_weight_gradient_gets_its_own_call_at_the_end():
    """The weight is a parameter (a placeholder the caller holds), so only the two activations
    count as held: the weight gradient moves to the end in a call of its own, the input gradient
    stays where it was, and every value is unchanged."""
    gm = make_fx(_late_convolution, tracing_mode="fake")(*CONV_ARGS)
    assert lowering.defer_returned_products(gm) == 0, "the weight itself counts unless the caller holds it"
    weight = frozenset({"w_1"})
    gm = rewritten_exactly(_late_convolution, CONV_ARGS, lambda g: lowering.defer_returned_products(g, weight),
                           _weight_gradients_before_the_end)
    assert lowering.defer_returned_products(gm, weight) == 0  # already last: nothing moved twice
    calls = [n for n in gm.graph.nodes if n.target is aten.convolution_backward.default]
    assert [n.args[10] for n in calls] == [[True, False, False], [False, True, False]]
    assert list(gm.graph.nodes)[-3] is calls[1]  # the call, its getitem, the output
    ref = make_fx(_late_convolution)(*CONV_ARGS)
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*CONV_ARGS)[1], ref(*CONV_ARGS)[1])


def test_min_cut_pair_is_deferred_on_a_copy():
    """A safe min-cut budget pair fxremat runs as it is gets the same deferral as fxremat's own
    backwards, on a copy: the memo's pair (min-cut's own, the report's baseline) is untouched."""
    from types import SimpleNamespace

    from fxremat.rivals import deferred as _deferred

    bw = make_fx(_late_convolution, tracing_mode="fake")(*CONV_ARGS)
    before = str(bw.graph)
    weight = next(n for n in bw.graph.nodes if n.name == "w_1")
    out = _deferred(bw, SimpleNamespace(primals=(weight,)))
    assert out is not bw and str(bw.graph) == before
    assert not _weight_gradients_before_the_end(out) and _weight_gradients_before_the_end(bw)
    assert _deferred(bw, SimpleNamespace(primals=())) is bw  # nothing to move: the pair itself


@pytest.mark.usefixtures("fresh_compile")
def test_deferral_that_raises_the_last_peak_is_undone(monkeypatch):
    """HF Speech2Text at a tiny size, planned for Inductor (no kernel compiled): its peak is its
    last gradients, and with its convolutions' weight gradients deferred the operands they hold
    while they wait raise it by 256 bytes above min-cut's pair.  The partitioner replays the pair
    without the deferral when the peak falls among the deferred nodes and keeps the lower: no
    higher than min-cut's (here min-cut's own pair is unsafe, so fxremat's runs)."""
    pytest.importorskip("transformers")
    from bench.breadth_models import CASES
    from fxremat import partitioner as P
    from fxremat import rivals
    from fxremat.profiling import output_loss

    def predicted(guard: bool) -> tuple[int, int]:
        module, inputs, loss_fn = CASES["speech2text"]()
        torch._dynamo.reset()
        with monkeypatch.context() as m:
            if not guard:
                m.setattr(rivals, "deferred_tail", lambda bw: frozenset())
            out = torch.compile(module, backend=inductor_mode_backend(partition, []))(*inputs)
            (loss_fn(out) if loss_fn else output_loss(out)).backward()
        report = P.last_reports()[-1]
        return report.fxremat.peak_bytes, report.min_cut.peak_bytes

    ours, min_cut = predicted(guard=False)
    assert ours > min_cut, "without the check the deferral raises the peak (the test is not vacuous)"
    ours, min_cut = predicted(guard=True)
    assert ours <= min_cut


@pytest.mark.parametrize("case", ["large_operands", "read_again"])
def test_other_convolution_weight_gradients_stay(case):
    if case == "large_operands":  # an early layer: 2 x 64 x 32 x 32 operands (512 KiB each) for a 144 KiB gradient
        args = (torch.randn(2, 64, 32, 32), torch.randn(2, 64, 32, 32), *CONV_ARGS[2:])
        gm = make_fx(_late_convolution, tracing_mode="fake")(*args)
    else:  # the gradient is also read by the backward, not only returned
        def fn(go, x, w, other):
            gw, rest = _late_convolution(go, x, w, other)
            return (gw, rest + gw.sum())
        gm = make_fx(fn, tracing_mode="fake")(*CONV_ARGS)
    assert lowering.defer_returned_products(gm, frozenset({"w_1"})) == 0


@pytest.mark.usefixtures("fresh_compile")
def test_last_stage_weight_gradients_run_last_when_planned_for_inductor():
    """A CNN whose last stage holds most of its weights on 2 x 2 pixels, planned for Inductor (no
    kernel compiled): that stage's 3x3 weight gradients (576 KiB each, from 4 KiB operands) are
    computed by calls of their own after every other convolution backward, where min-cut's backward
    computes them first; the gradients equal eager's."""
    torch.manual_seed(0)
    conv = lambda i, o, s=1: (torch.nn.Conv2d(i, o, 3, s, 1, bias=False), torch.nn.BatchNorm2d(o), torch.nn.ReLU())
    model = torch.nn.Sequential(*conv(3, 16), *conv(16, 32, 2), *conv(32, 128, 2), *conv(128, 128, 2), *conv(128, 128),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 10))
    x = torch.randn(2, 3, 16, 16)
    loss_of(model(x)).backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}

    def late_weight_gradients(partition_fn) -> tuple[list[int], int]:
        """Positions of the backward's calls computing a 128 x 128 x 3 x 3 weight gradient, and
        of its last call computing an input gradient."""
        model.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        calls = []
        loss_of(torch.compile(model, backend=inductor_mode_backend(partition_fn, calls))(x)).backward()
        (_, bw, _), = calls
        convs = [n for n in bw.graph.nodes if n.target is aten.convolution_backward.default]
        late = [i for i, n in enumerate(convs) if n.args[10][1] and tuple(n.args[2].meta["val"].shape) == (128, 128, 3, 3)]
        return late, max(i for i, n in enumerate(convs) if n.args[10][0])

    late, last_input_gradient = late_weight_gradients(min_cut_rematerialization_partition)
    assert min(late) < last_input_gradient, "min-cut's backward computes them before the early layers' gradients"
    late, last_input_gradient = late_weight_gradients(partition)
    assert len(late) == 2 and min(late) > last_input_gradient
    _assert_gradients(model, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.usefixtures("fresh_compile")
def test_classifier_weight_gradient_runs_last_when_planned_for_inductor():
    """A small convolutional classifier with a wide head (2 x 16 features to 8000 classes), planned
    for Inductor (no kernel compiled): the head's weight gradient (500 KiB, from 63 KiB of
    operands) is the last product of fxremat's backward, where min-cut's computes it first, and the
    gradients equal eager's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 8000))
    x = torch.randn(2, 3, 32, 32)
    loss_of(model(x)).backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}

    def head_gradient_position(partition_fn) -> tuple[int, int]:
        model.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        calls = []
        loss_of(torch.compile(model, backend=inductor_mode_backend(partition_fn, calls))(x)).backward()
        (_, bw, _), = calls
        nodes = [n for n in bw.graph.nodes if n.op == "call_function"]
        (head,) = [i for i, n in enumerate(nodes) if n.target is aten.mm.default and n.meta["val"].numel() == 8000 * 16]
        return head, len(nodes)

    head, total = head_gradient_position(min_cut_rematerialization_partition)
    assert head < total // 2, "min-cut's backward computes the head's weight gradient early"
    head, total = head_gradient_position(partition)
    assert head >= total - 3  # the product, then at most the views that return it
    _assert_gradients(model, ref, rtol=1e-5, atol=1e-6)


def _silu_backward(x, grad):
    """A SiLU's backward as Inductor decomposes it: ``sigmoid(x)`` read twice."""
    s = torch.sigmoid(x)
    return (grad * (s * (1 + x * (1 - s))),)


def _sigmoids(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.target is aten.sigmoid.default]


def test_shared_transcendental_gets_one_copy_per_reader():
    args = (torch.randn(4, 8, 16, 16), torch.randn(4, 8, 16, 16))
    gm = make_fx(_silu_backward, tracing_mode="fake")(*args)
    ref = make_fx(_silu_backward)(*args)
    (shared,) = _sigmoids(gm)
    assert len(shared.users) == 2
    assert lowering.split_shared_transcendentals(gm) == 1
    gm.graph.lint()
    assert [len(s.users) for s in _sigmoids(gm)] == [1, 1]
    assert lowering.split_shared_transcendentals(gm) == 0
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*args)[0], ref(*args)[0])


@pytest.mark.parametrize("case", ["light", "extern_reader", "returned"])
def test_other_shared_values_are_not_split(case):
    fn = {
        "light": lambda x, g: (lambda r: (g * r + r.sum(),))(torch.relu(x)),  # not heavy: Inductor inlines it anyway
        "extern_reader": lambda x, g: (lambda s: (s.flatten(1) @ g.flatten(1).t() + s.sum(),))(torch.sigmoid(x)),
        "returned": lambda x, g: (lambda s: (g * s, s + 1, s))(torch.sigmoid(x)),
    }[case]
    gm = make_fx(fn, tracing_mode="fake")(torch.randn(4, 8, 16, 16), torch.randn(4, 8, 16, 16))
    assert lowering.split_shared_transcendentals(gm) == 0


@pytest.mark.usefixtures("fresh_compile")
def test_silu_network_planned_for_inductor_has_no_shared_sigmoid():
    """Convolution, batch norm and SiLU blocks planned for Inductor (no kernel compiled): no sigmoid
    of fxremat's backward has two readers, and the gradients equal eager's."""
    torch.manual_seed(0)
    layers = []
    for c_in, c_out in ((3, 16), (16, 16), (16, 16), (16, 16)):
        layers += [torch.nn.Conv2d(c_in, c_out, 3, padding=1), torch.nn.BatchNorm2d(c_out), torch.nn.SiLU()]
    model = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
    x = torch.randn(4, 3, 32, 32)
    loss_of(model(x)).backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    calls = []
    loss_of(torch.compile(model, backend=inductor_mode_backend(partition, calls))(x)).backward()
    (_, bw, _), = calls
    if torch.__version__ >= "2.13":  # torch 2.11 decomposes SiLU's backward without a sigmoid op
        assert _sigmoids(bw)
    assert all(len(s.users) == 1 for s in _sigmoids(bw))
    _assert_gradients(model, ref, rtol=1e-4, atol=1e-5)


def _late_extern_reader(a, b, w, r):
    v = a * b + 1  # (256, 64) from two dying operands of its size
    recomputed = torch.tanh(r @ w)  # an extern kernel between v and its reader (a recomputation)
    return (v @ w + recomputed,)


REALIZE_ARGS = (torch.randn(256, 64), torch.randn(256, 64), torch.randn(64, 64), torch.randn(256, 64))


def _marks(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if _torch.is_realize(n)]


@pytest.mark.skipif(_torch.realize_op() is None, reason="this torch has no inductor_force_stride_order")
def test_value_read_by_a_late_extern_kernel_is_stored_where_computed():
    gm = make_fx(_late_extern_reader, tracing_mode="fake")(*REALIZE_ARGS)
    ref = make_fx(_late_extern_reader)(*REALIZE_ARGS)
    assert lowering.store_before_recomputation(gm) == 1
    gm.graph.lint()
    (mark,) = _marks(gm)
    value = mark.args[0]
    assert mark.prev is value and value.target is aten.add.Tensor
    assert [u.target for u in mark.users] == [aten.mm.default]
    assert lowering.store_before_recomputation(gm) == 0
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*REALIZE_ARGS)[0], ref(*REALIZE_ARGS)[0])


@pytest.mark.parametrize("case", ["no_extern_between", "operands_read_later", "two_readers"])
def test_other_extern_operands_are_not_marked(case):
    fn = {
        "no_extern_between": lambda a, b, w, r: ((a * b + 1) @ w + torch.tanh(r),),
        "operands_read_later": lambda a, b, w, r: (lambda v, t: (v @ w + t + a + b,))(a * b + 1, torch.tanh(r @ w)),
        "two_readers": lambda a, b, w, r: (lambda v, t: (v @ w + t + v,))(a * b + 1, torch.tanh(r @ w)),
    }[case]
    gm = make_fx(fn, tracing_mode="fake")(*REALIZE_ARGS)
    assert lowering.store_before_recomputation(gm) == 0


def _masked_attention_layers(q, k, v, valid):
    """Two attention calls reading one additive mask built from a padding mask (HF's sdpa mask)."""
    mask = torch.where(valid[:, None, None, :], 0.0, float("-inf"))  # (B, 1, 1, S), pointwise
    h = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return (torch.nn.functional.scaled_dot_product_attention(h, k, v, attn_mask=mask),)


def _attention_args() -> tuple:
    valid = torch.ones(2, 16, dtype=torch.bool)
    valid[1, 12:] = False
    return (torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8), valid)


def _fanout_marks(gm: fx.GraphModule) -> list[fx.Node]:
    """Realize marks read by two or more calls that copy their operands."""
    return [m for m in _marks(gm) if sum(map(_torch.copies_operands, m.users)) >= 2]


@pytest.mark.skipif(_torch.realize_op() is None, reason="this torch has no inductor_force_stride_order")
def test_value_read_by_several_extern_kernels_is_stored_once():
    args = _attention_args()
    gm = make_fx(_masked_attention_layers, tracing_mode="fake")(*args)
    ref = make_fx(_masked_attention_layers)(*args)
    readers = {n for n in gm.graph.nodes if _torch.copies_operands(n)}
    assert len(readers) == 2 and all("scaled_dot_product" in str(n.target) for n in readers)
    assert lowering.store_extern_fanout(gm) == 1
    gm.graph.lint()
    (mark,) = _marks(gm)
    value = mark.args[0]
    assert _torch.inductor_pointwise(value) and list(value.users) == [mark]  # every reader reads the mark
    assert set(mark.users) == readers
    assert list(mark.args[1]) == list(value.meta["val"].stride())  # stored dense (it is contiguous)
    assert lowering.store_extern_fanout(gm) == 0
    real = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    torch.testing.assert_close(real(*args)[0], ref(*args)[0])


@pytest.mark.skipif(_torch.realize_op() is None, reason="this torch has no inductor_force_stride_order")
def test_marked_values_fit_in_the_limit_smallest_first():
    def two_masks(q, k, v, valid):
        small = torch.where(valid[:, None, None, :], 0.0, float("-inf"))  # (2, 1, 1, 16): 128 bytes
        large = small + torch.arange(16.0)[:, None]  # (2, 1, 16, 16): 2 KiB
        h = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=small)
        h = torch.nn.functional.scaled_dot_product_attention(h, k, v, attn_mask=small)
        h = torch.nn.functional.scaled_dot_product_attention(h, k, v, attn_mask=large)
        return (torch.nn.functional.scaled_dot_product_attention(h, k, v, attn_mask=large),)

    args = _attention_args()
    for limit, marked in [(None, 2), (4096, 2), (2048, 1), (128, 1), (127, 0)]:
        gm = make_fx(two_masks, tracing_mode="fake")(*args)
        assert lowering.store_extern_fanout(gm, limit=limit) == marked, limit
        assert sorted(_torch.value_nbytes(m) for m in _marks(gm)) == [128, 2048][:marked]


@pytest.mark.parametrize("case", ["one_reader", "matmul_readers", "returned", "extern_value"])
def test_values_not_read_by_several_constrained_calls_are_not_marked(case):
    """One attention call, or extern kernels that store what they read once (a matmul), or a
    returned value (stored anyway), or a value that is no loop: no mark."""
    def fn(q, k, v, valid):
        mask = torch.where(valid[:, None, None, :], 0.0, float("-inf"))
        attend = lambda x, m: torch.nn.functional.scaled_dot_product_attention(x, k, v, attn_mask=m)  # noqa: E731
        return {
            "one_reader": lambda: (attend(q, mask).sum() + mask.sum(),),
            "matmul_readers": lambda: (lambda s: (s @ v + s @ k,))(torch.tanh(q @ k.transpose(-1, -2))),
            "returned": lambda: (attend(attend(q, mask), mask), mask),
            "extern_value": lambda: (lambda m: (attend(attend(q, m[:, None]), m[:, None]),))(
                torch.baddbmm(mask[:, 0], q[:, 0], k[:, 0].mT)),
        }[case]()

    gm = make_fx(fn, tracing_mode="fake")(*_attention_args())
    assert lowering.store_extern_fanout(gm) == 0


@pytest.mark.skipif(_torch.realize_op() is None, reason="this torch has no inductor_force_stride_order")
def test_padded_attention_mask_is_stored_once_per_graph_when_planned_for_inductor():
    """Four self-attention layers with HF's sdpa mask (causal and padding, built from an integer
    attention mask; 32 KiB, under EXTERN_FANOUT_SHARE of the peak), planned for Inductor: the plan
    recomputes the mask in the backward, and in each graph a mask that is not returned (saved) and
    that two attention calls or more read is computed once (a mark every attention call reads);
    the gradients equal eager's."""
    s = 64

    class Layers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.ModuleList(torch.nn.Linear(128, 384) for _ in range(4))
            self.out = torch.nn.Linear(128, 8)

        def forward(self, x, attention_mask):
            i = torch.arange(s)
            causal = i[None, :] <= i[:, None]
            mask = torch.where(causal[None, None] & attention_mask.bool()[:, None, None, :], 0.0, float("-inf"))
            for qkv in self.qkv:
                q, k, v = (t.view(2, s, 4, 32).transpose(1, 2) for t in qkv(x).chunk(3, dim=-1))
                a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                x = x + torch.tanh(a.transpose(1, 2).reshape(2, s, 128))
            return self.out(x)

    torch.manual_seed(0)
    model, x = Layers(), torch.randn(2, s, 128)
    attention_mask = torch.ones(2, s, dtype=torch.long)
    attention_mask[1, 48:] = 0
    model(x, attention_mask).square().sum().backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    calls = []
    torch.compile(model, backend=inductor_mode_backend(partition, calls))(x, attention_mask).square().sum().backward()
    (fw, bw, _), = calls
    for g in (fw, bw):
        returned = set(g.graph.find_nodes(op="output")[0].all_input_nodes)  # stored anyway
        for n in g.graph.nodes:
            if n.op == "call_function" and _torch.inductor_pointwise(n) and n not in returned:
                assert sum(map(_torch.copies_operands, n.users)) < 2, n.format_node()
    (mark,) = _fanout_marks(bw)  # the recomputed mask, read by every attention call of the backward
    assert sum("scaled_dot_product" in str(u.target) for u in mark.users) >= 4
    _assert_gradients(model, ref, rtol=1e-4, atol=1e-5)


def test_convolutions_do_not_count_as_copying_their_operands():
    """Inductor's convolution lowering stores an unstored operand once for all its readers, so a
    value two convolutions read is left to it (CNN plans keep what they measured)."""
    def fn(x, w1, w2):
        v = torch.relu(x + 1)
        return (torch.nn.functional.conv2d(v, w1) + torch.nn.functional.conv2d(v, w2),)

    gm = make_fx(fn, tracing_mode="fake")(torch.randn(2, 8, 16, 16), torch.randn(8, 8, 3, 3), torch.randn(8, 8, 3, 3))
    assert not any(_torch.copies_operands(n) for n in gm.graph.nodes)
    assert lowering.store_extern_fanout(gm) == 0


# -- an embedding's gradient at the end of the backward (lowering.store_put_values) ----------------

def _embedding_gradient_at_the_end(grad, w1, w2, x, idx):
    """The end of a decoder's backward: the first norm's backward, read from two projections' input
    gradients (extern matmuls: stored buffers) and the saved input, scattered into the embedding's zeros."""
    values = grad @ w1 + (grad @ w2) * x
    zeros = torch.zeros(64, 8)
    return (torch.ops.aten._unsafe_masked_index_put_accumulate(zeros, (idx >= 0).unsqueeze(-1), [idx], values),)


EMB_ARGS = (torch.randn(16, 4), torch.randn(4, 8), torch.randn(4, 8), torch.randn(16, 8), torch.randint(0, 64, (16,)))


def _puts_reading_values_inline(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if _masked_put(n) and _put_values(n).target is not _torch.stored_copy_op()]


def test_embedding_gradient_reads_a_stored_copy_of_its_values():
    """The two matmul outputs die at the put and outweigh the values: the put reads a copy that
    Inductor cannot fuse through, so they die before the zeros are allocated."""
    gm = rewritten_exactly(_embedding_gradient_at_the_end, EMB_ARGS, lowering.store_put_values,
                           _puts_reading_values_inline)
    (copy_,) = [n for n in gm.graph.nodes if n.target is _torch.stored_copy_op()]
    assert copy_.meta["val"].shape == (16, 8)
    assert _torch.storage_keys(copy_) != _torch.storage_keys(copy_.args[0])  # a buffer of its own


def _other_puts(case):
    grad, w1, w2, x, idx = EMB_ARGS
    put = torch.ops.aten._unsafe_masked_index_put_accumulate
    if case == "few zeros":  # the zeros no larger than the values: storing them first frees nothing
        return lambda g, a, b, x, i: (put(torch.zeros(16, 8), (i >= 0).unsqueeze(-1), [i], g @ a + (g @ b) * x),)
    if case == "one source":  # a single source of the values' size: nothing to gain
        return lambda g, a, b, x, i: (put(torch.zeros(64, 8), (i >= 0).unsqueeze(-1), [i], (g @ a) * x),)
    if case == "source read again":  # a matmul output read after the put does not die there
        def fn(g, a, b, x, i):
            m = g @ a
            out = put(torch.zeros(64, 8), (i >= 0).unsqueeze(-1), [i], m + (g @ b) * x)
            return out, m.sum()
        return fn
    if case == "into another gradient":  # accumulating into a computed buffer, not fresh zeros
        return lambda g, a, b, x, i: (put(a.t() @ a, (i >= 0).unsqueeze(-1), [i % 4], (g @ a)[:, :4] + (g @ b)[:, :4]),)
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["few zeros", "one source", "source read again", "into another gradient"])
def test_other_puts_read_their_values_inline(case):
    gm = make_fx(_other_puts(case), tracing_mode="fake")(*EMB_ARGS)
    assert lowering.store_put_values(gm) == 0


@pytest.mark.usefixtures("fresh_compile")
def test_untied_embedding_gradient_reads_a_stored_copy_when_planned_for_inductor():
    """Tiny HF Llama (untied embedding), planned for Inductor: the backward's last put reads the
    stored copy of the first norm's backward, and every gradient equals eager's."""
    pytest.importorskip("transformers")
    from bench.hf_models import make_hf_case

    bws = _backwards_planned_for_inductor(make_hf_case("llama", "tiny", mask=True))
    copies = [n for bw in bws for n in bw.graph.nodes if n.target is _torch.stored_copy_op()]
    assert all(_masked_put(u) for n in copies for u in n.users)
    if torch.__version__ >= "2.13":  # torch 2.11's put reads where(pad, 0, g), g a buffer of its own: nothing to free
        assert copies
