"""The Inductor-aware replay (``memory.simulate(..., inductor=True)``) and the op classifier it
rests on (``_torch.inductor_pointwise``), without compiling a single Inductor kernel.

Small graphs are traced with ``make_fx(tracing_mode="fake")`` (every node gets a fake ``val``,
as in the partitioner's graphs) and replayed as the forward of a pair whose backward is empty.
Real pairs come from the partitioner run in Inductor mode (``compiler="inductor"`` in its
kwargs, Inductor's decomposition table) with no-op compilers, so the graphs run as FX code.

Invariants: fused pointwise intermediates add no bytes (ops tagged pointwise, gathers, and the
loaders Inductor computes pointwise without the tag, such as ``constant_pad_nd``); a pointwise result whose same-size input
dies at it, or at a fused value its kernel computes, adds no bytes at its step (and does when
the input lives on, or sizes differ), nor
does an index-put accumulating into dying zeros (an embedding's gradient); a
value the graph returns is never fused; a concatenation is alive from the first kernel that writes
one of its pieces, and a piece computed into its slice has no buffer of its own; on the CPU a value
that dies inside one C++ call of generated kernels is freed after the call; on real pairs the
Inductor-aware peak is at most the plain one.

A view of a fused value is fused with it.  Known gaps, ``xfail(strict=True)``: a pointwise value
whose reader is a returned reduction is allocated; a fused kernel is replayed at its reader's
position, so the Inductor-aware peak can exceed the plain one on a small graph.
"""

from __future__ import annotations

import operator
from typing import Callable

import pytest
import torch
import torch.fx as fx
from torch._dynamo.backends.common import aot_autograd
from torch.fx.experimental.proxy_tensor import make_fx
from helpers import loss_of

import fxremat
from fxremat import _torch
from fxremat.memory import Timeline, fused_in, simulate
from fxremat.partitioner import partition

aten = torch.ops.aten


# ------------------------------------------------------------------ _torch.inductor_pointwise


def _node(target, graph: fx.Graph | None = None) -> fx.Node:
    graph = graph or fx.Graph()
    x = graph.placeholder("x")
    return graph.call_function(target, (x,))


POINTWISE = [aten.relu.default, aten.mul.Tensor, aten.add.Tensor, aten.gelu.default, aten.where.self,
             aten.threshold_backward.default, aten.rsqrt.default, aten.exp.default]
INDEXING = [aten.gather.default, aten.index.Tensor, aten.embedding.default]
NOT_POINTWISE = [aten.mm.default, aten.addmm.default, aten.bmm.default, aten.convolution.default,
                 aten.index_put.default, aten.index_put_.default, aten.sum.default, aten.amax.default,
                 aten.view.default, aten.native_layer_norm.default, aten.index_select.default,
                 aten.embedding_dense_backward.default, aten.scatter.src, aten.native_dropout.default,
                 aten.index.Tensor_hacked_twin, aten.index.str, aten.gather.out, aten.embedding.out, operator.getitem]


@pytest.mark.parametrize("target", POINTWISE, ids=str)
def test_pointwise_tagged_ops_are_inductor_pointwise(target):
    assert torch.Tag.pointwise in target.tags
    assert _torch.inductor_pointwise(_node(target))


@pytest.mark.parametrize("target", INDEXING, ids=str)
def test_gathers_and_lookups_are_inductor_pointwise(target):
    assert torch.Tag.pointwise not in target.tags  # counted as pointwise by name, not by tag
    assert _torch.inductor_pointwise(_node(target))


LOADERS = [aten.constant_pad_nd.default, aten.slice_scatter.default, aten.select_scatter.default, aten.repeat.default,
           aten.full.default, aten.scalar_tensor.default, aten.copy.default]


@pytest.mark.parametrize("target", LOADERS, ids=str)
def test_untagged_loaders_are_inductor_pointwise(target):
    """Ops aten does not tag pointwise that Inductor lowers to a pointwise kernel all the same."""
    assert torch.Tag.pointwise not in target.tags
    assert _torch.inductor_pointwise(_node(target))


@pytest.mark.parametrize("target", NOT_POINTWISE, ids=str)
def test_other_ops_are_not_inductor_pointwise(target):
    assert not _torch.inductor_pointwise(_node(target))


def test_non_call_nodes_are_not_inductor_pointwise():
    graph = fx.Graph()
    x = graph.placeholder("x")
    attr = graph.get_attr("w")
    out = graph.output(x)
    assert not any(_torch.inductor_pointwise(n) for n in (x, attr, out))
    assert not _torch.inductor_pointwise(graph.call_function(torch.add, (x, x)))  # not an aten overload


# ------------------------------------------------------------------ replay of small graphs


def _empty_backward() -> fx.GraphModule:
    graph = fx.Graph()
    graph.output(())
    return fx.GraphModule({}, graph)


def _replay(fn: Callable, *args: torch.Tensor) -> tuple[fx.GraphModule, dict[str, int], dict[str, int]]:
    """Trace ``fn`` and replay its graph plainly and Inductor-aware: (graph, bytes alive by node
    name plain, the same Inductor-aware)."""
    gm = make_fx(fn, tracing_mode="fake")(*args)
    n_out = len(gm.graph.find_nodes(op="output")[0].args[0])
    out = []
    for inductor in (False, True):
        tl = simulate(gm, _empty_backward(), n_out, inductor=inductor)
        assert tl.forward_steps == len(tl.labels)
        out.append(dict(zip(tl.labels, tl.bytes_alive)))
    return gm, out[0], out[1]


def _named(gm: fx.GraphModule, target) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.target == target]


def _nbytes(node: fx.Node) -> int:
    val = node.meta["val"]
    return val.numel() * val.element_size()


def _before(gm: fx.GraphModule, alive: dict[str, int], node: fx.Node) -> int:
    prev = node.prev
    return alive[prev.name] if prev.op != "root" else 0


N = 4096


def test_fused_pointwise_chain_adds_no_bytes():
    """x*2 -> +1 -> relu -> sum, the sum read by one more op: the three pointwise intermediates are
    computed inside the sum's kernel, so nothing is alive at their steps (x is the caller's)."""
    gm, plain, ind = _replay(lambda x: ((torch.relu(x * 2 + 1).sum()) * 3,), torch.randn(N))
    chain = [*_named(gm, aten.mul.Tensor)[:1], *_named(gm, aten.add.Tensor), *_named(gm, aten.relu.default)]
    assert len(chain) == 3
    assert set(chain) <= fused_in(gm.graph)
    for node in chain:
        assert ind[node.name] == _before(gm, ind, node) == 0, node.name
    assert plain[chain[1].name] >= 2 * _nbytes(chain[0]), "the plain replay holds two of them at the add"
    (total,) = _named(gm, aten.sum.default)
    assert max(ind.values()) <= _nbytes(total) * 2  # the sum and the final product: scalars


def test_fused_pointwise_chain_before_a_returned_sum_adds_no_bytes():
    """relu(x*2+1).sum() returned: Inductor computes relu inside the sum's kernel (a reduction that
    is a graph output, such as a batch norm's bias gradient, still fuses its pointwise inputs)."""
    gm, _, ind = _replay(lambda x: (torch.relu(x * 2 + 1).sum(),), torch.randn(N))
    (relu,) = _named(gm, aten.relu.default)
    assert relu in fused_in(gm.graph)
    assert ind[relu.name] == 0


@pytest.mark.parametrize("view", ["view", "t"])
def test_fused_value_read_through_a_view_adds_no_bytes(view):
    reshape = (lambda a: a.view(64, 64)) if view == "view" else (lambda a: a.t() + 1)
    gm, _, ind = _replay(lambda x: (reshape(x * 2).sum() * 3,), torch.randn(64, 64))
    (mul,) = [n for n in _named(gm, aten.mul.Tensor) if n.args[1] == 2]
    assert mul in fused_in(gm.graph)
    assert max(ind.values()) <= 8, ind  # only the two scalars are ever allocated


def test_silu_read_by_two_kernels_is_stored():
    """SwiGLU's silu(g), read by the forward's product and by a later kernel as its backward reads
    it: Inductor's CPU lowering stores a value read more than once whose computation has a sigmoid
    (``should_realize_on_reuse``) rather than recompute it in each reader, so it is allocated."""
    def fn(g, u):
        a = torch.nn.functional.silu(g)
        return ((a * u).sum() + (a * 3).amax(),)

    gm, _, ind = _replay(fn, torch.randn(N), torch.randn(N))
    (silu,) = _named(gm, aten.silu.default)
    assert len(silu.users) == 2
    assert silu not in fused_in(gm.graph)
    assert ind[silu.name] >= _nbytes(silu)


def test_cheap_value_read_twice_stays_fused():
    """x * 2 read by two reductions is recomputed inside both (no heavy op): never allocated."""
    def fn(x):
        y = x * 2
        return (y.sum() + y.amax(),)

    gm, _, ind = _replay(fn, torch.randn(N))
    (mul,) = _named(gm, aten.mul.Tensor)
    assert len(mul.users) == 2
    assert mul in fused_in(gm.graph)


def test_heavy_value_read_twice_is_stored():
    """exp(x) read by two reductions: stored once on the CPU (Inductor's heavy-op rule)."""
    def fn(x):
        y = torch.exp(x)
        return (y.sum() + y.amax(),)

    gm, _, ind = _replay(fn, torch.randn(N))
    (exp,) = _named(gm, aten.exp.default)
    assert len(exp.users) == 2
    assert exp not in fused_in(gm.graph)
    assert ind[exp.name] == _nbytes(exp)


@pytest.mark.parametrize("readers", [1, 2])
def test_value_reading_many_buffers_is_stored_when_read_twice(readers):
    """A batch norm's normalized output reads five buffers (input, mean, inverse std, weight,
    bias), more than Inductor's ``realize_reads_threshold`` (4): read by two kernels (the next op
    and, in MobileNetV2, its own backward) it is stored once; read by one it stays fused."""
    def fn(x, mean, invstd, w, b):
        y = torch.clamp((x - mean) * invstd * w + b, 0, 6)
        return ((y.sum() + y.amax()) if readers == 2 else y.sum() * 2,)

    args = (torch.randn(8, N), *(torch.randn(N) for _ in range(4)))
    gm, _, ind = _replay(fn, *args)
    (clamp,) = _named(gm, aten.clamp.default)
    assert len(clamp.users) == readers
    assert (clamp in fused_in(gm.graph)) == (readers == 1)
    if readers == 2:
        assert ind[clamp.name] >= _nbytes(clamp)


def test_inplace_reuse_of_a_dying_same_size_input():
    """relu(mm(x, w)), returned: mm's buffer dies at relu and has relu's size, so relu's result
    takes it over and relu's step adds nothing."""
    gm, plain, ind = _replay(lambda x, w: ((x @ w).relu(),), torch.randn(64, 64), torch.randn(64, 64))
    (mm,), (relu,) = _named(gm, aten.mm.default), _named(gm, aten.relu.default)
    assert relu not in fused_in(gm.graph)  # returned
    assert ind[relu.name] == ind[mm.name] == _nbytes(mm)
    assert plain[relu.name] == plain[mm.name] + _nbytes(relu)


def test_inplace_reuse_of_an_input_dying_at_a_fused_value():
    """HF's loss gradient: ``onehot * g - exp(logits - m) * s``.  The logits die at the fused
    ``sub``/``exp``, inside the kernel that computes the result, so the result takes over their
    buffer (Inductor writes it in place: HF DeepSeek-V3's step measured 22.03 MiB, replayed 34.54
    before this rule and 22.03 with it); with the logits read again after it, it allocates."""

    def loss_gradient(h, w, m, s, onehot, v, keep):
        logits = h @ w
        grad = onehot * 2 - torch.exp(logits - m) * s
        return (grad @ v, logits) if keep else (grad @ v,)

    args = (torch.randn(256, 64), torch.randn(64, 512), torch.randn(256, 1), torch.randn(256, 1), torch.randn(256, 512),
            torch.randn(512, 8))
    for keep in (False, True):
        gm, _, ind = _replay(lambda *a: loss_gradient(*a, keep), *args)
        (logits,) = _named(gm, aten.mm.default)[:1]
        result = [n for n in _named(gm, aten.sub.Tensor) if n.args[0].target == aten.mul.Tensor][0]
        assert result not in fused_in(gm.graph)  # read by the matmul: a buffer
        assert _named(gm, aten.exp.default)[0] in fused_in(gm.graph)
        assert ind[result.name] == ind[logits.name] + (_nbytes(result) if keep else 0), (keep, gm.graph)


def test_index_put_into_dying_zeros_is_one_buffer():
    """An embedding's gradient: zeros, then an accumulating index-put into them (returned).  The
    zeros die at the index-put, which Inductor reinplaces, so its step adds nothing; if the
    zeros live on (also returned) it allocates its own buffer."""
    idx, g = torch.randint(0, 512, (256,)), torch.randn(256, 64)

    def accumulate(idx, g, keep):
        zeros = torch.zeros(512, 64)
        out = torch.ops.aten._unsafe_masked_index_put_accumulate(zeros, torch.ones(256, 1, dtype=torch.bool), [idx], g)
        return (out, zeros) if keep else (out,)

    for keep in (False, True):
        gm, plain, ind = _replay(lambda i, v: accumulate(i, v, keep), idx, g)
        (put,) = _named(gm, aten._unsafe_masked_index_put_accumulate.default)
        zeros = put.args[0]
        assert plain[put.name] == _before(gm, plain, put) + _nbytes(put)
        expected = _before(gm, ind, put) + (_nbytes(put) if keep else 0)
        assert ind[put.name] == expected and _nbytes(zeros) == _nbytes(put), (keep, gm.graph)


def test_no_reuse_when_the_input_lives_on():
    """mm also returned (or read later): its buffer does not die at relu, so relu allocates."""
    args = (torch.randn(64, 64), torch.randn(64, 64))
    for fn in (lambda x, w: (lambda a: (a.relu(), a))(x @ w),
               lambda x, w: (lambda a: (a.relu(), a.sum()))(x @ w)):
        gm, _, ind = _replay(fn, *args)
        relu = _named(gm, aten.relu.default)[0]
        mm = relu.args[0]
        assert ind[relu.name] == ind[mm.name] + _nbytes(relu), gm.graph


def test_no_reuse_while_a_view_of_the_input_lives_on():
    """mm dies at relu, but a view of its buffer (mm.t()) is read after relu: no reuse."""

    def fn(x, w):
        a = x @ w
        v = a.t()
        r = a.relu()
        return r, (v * 1).sum()

    gm, _, ind = _replay(fn, torch.randn(64, 64), torch.randn(64, 64))
    (mm,), (relu,) = _named(gm, aten.mm.default), _named(gm, aten.relu.default)
    assert ind[relu.name] == ind[mm.name] + _nbytes(relu), gm.graph


def test_no_reuse_of_a_smaller_input():
    """a + y with a broadcast to 4x its size: the result cannot take over a's buffer."""
    gm, _, ind = _replay(lambda x, w, y: ((x @ w) + y,), torch.randn(64, 64), torch.randn(64, 64), torch.randn(4, 64, 64))
    (mm,), (add,) = _named(gm, aten.mm.default), _named(gm, aten.add.Tensor)
    assert ind[add.name] == ind[mm.name] + _nbytes(add)


def test_returned_value_is_never_fused():
    """a = x*2 is returned and also read by pointwise ops only: it must be allocated."""
    gm, _, ind = _replay(lambda x: (((x * 2) + 1).sum() * 3, x * 2), torch.randn(N))
    returned = set(gm.graph.find_nodes(op="output")[0].all_input_nodes)
    assert not returned & fused_in(gm.graph)
    doubled = [n for n in returned if n.target == aten.mul.Tensor and n.args[1] == 2]
    assert doubled, gm.graph
    assert ind[doubled[0].name] - _before(gm, ind, doubled[0]) == _nbytes(doubled[0])


def test_accumulated_matmuls_are_addmm_buffers():
    """(a1 @ b1 + a2 @ b2) + a3 @ b3: each add reads a matmul, so Inductor runs it as an ``addmm``
    whose output is a buffer of its own, even though the first add's reader is pointwise; the
    matmuls run at their adds, so the first pair's operands die at the first add (a shared weight's
    gradient accumulated over layers: HF ALBERT was predicted with every layer's operands alive
    until the next layer's addmm)."""
    args = [torch.randn(64, 256) if i % 2 == 0 else torch.randn(256, 64) for i in range(6)]
    gm, _, ind = _replay(lambda a1, b1, a2, b2, a3, b3: ((a1 @ b1 + a2 @ b2) + a3 @ b3,), *args)
    first, last = _named(gm, aten.add.Tensor)
    fused = fused_in(gm.graph)
    assert first not in fused and last not in fused
    assert set(_named(gm, aten.mm.default)) <= fused
    assert ind[first.name] - _before(gm, ind, first) == _nbytes(first)


def test_view_of_a_replaced_value_shares_its_storage():
    """A graph pass that replaces a node gives it a value of its own, and the views that read it
    keep the old value's storage (Inductor's joint-graph passes and a softmax's ``div``).  A copy of
    the joint graph re-derives such views from their base, so the replay counts one buffer, as
    it does for the graph before the replacement."""
    gm = make_fx(lambda x: (torch.softmax(x, -1).expand(4, 64, 64).reshape(256, 64) * 2,), tracing_mode="fake")(torch.randn(4, 64, 64))
    alive = lambda g: simulate(g, _empty_backward(), 1).bytes_alive  # noqa: E731
    before = alive(gm)
    (softmax,) = [n for n in gm.graph.nodes if n.target is aten._softmax.default]
    val = softmax.meta["val"]
    with val.fake_mode:
        softmax.meta["val"] = torch.empty_like(val)  # what a replacement leaves: a storage of its own
    assert alive(gm) != before  # the expand counted as a second buffer
    copy = _torch.copy_joint(gm)
    (expand,) = [n for n in copy.graph.nodes if n.target is aten.expand.default]
    assert _torch.storage_key(expand.meta["val"]) == _torch.storage_key(expand.args[0].meta["val"])
    assert alive(copy) == before


def test_gather_feeding_pointwise_is_fused():
    """Indexing counts as pointwise: an embedding lookup read only by an add and a reduction is
    never allocated; the same lookup returned is."""
    w, idx = torch.randn(128, 32), torch.randint(0, 128, (8, 16))
    gm, _, ind = _replay(lambda w, i: ((torch.nn.functional.embedding(i, w) * 2).sum() * 1,), w, idx)
    (emb,) = _named(gm, aten.embedding.default)
    assert emb in fused_in(gm.graph) and ind[emb.name] == 0
    gm, _, ind = _replay(lambda w, i: (torch.nn.functional.embedding(i, w),), w, idx)
    (emb,) = _named(gm, aten.embedding.default)
    assert emb not in fused_in(gm.graph) and ind[emb.name] == _nbytes(emb)


def _gather_backward(g: torch.Tensor, pos: torch.Tensor):
    """A relative-position gather's backward (DeBERTa's c2p): the scaled score gradient scattered by
    clamped distances into the (rows, 2 x span) table."""
    idx = (pos[None, :] - pos[:, None]).clamp(-8, 7) + 8
    return (torch.zeros(2, 4, 32, 16).scatter_add(-1, idx.expand(2, 4, 32, 32), g / 8) * 1,)


@pytest.mark.parametrize("threads", [1, 2])
def test_generated_scatter_add_reads_its_source_and_index_inline(threads):
    """Inductor lowers a scatter-add to a generated kernel that computes its source and index
    inline (on the CPU when one thread runs; with more it calls aten's scatter, which reads both
    from memory: ``use_scatter_fallback``, ``cpp.fallback_scatter_reduce_sum``), read from its
    generated code for a gather attention: ``cpp_fused_add_arange_clamp_expand_new_zeros_scatter_add``
    with 1 thread, ``aten.scatter_reduce_.two`` with 2.  The replay allocated the scaled gradient
    either way: HF DeBERTa token classification's plan predicted 48.3 MiB, measured 29.6 on 1 thread."""
    with torch._inductor.config.patch({"cpp.threads": threads, "cpp.dynamic_threads": False}):
        gm, _, ind = _replay(_gather_backward, torch.randn(2, 4, 32, 32), torch.arange(32))
        fused = fused_in(gm.graph)
    (div,) = _named(gm, aten.div.Tensor)
    (scatter,) = _named(gm, aten.scatter_add.default)
    index = scatter.args[2].args[0]  # the distances, before their expand over batch and heads
    inline = threads == 1
    assert (div in fused) == inline and (index in fused) == inline
    assert ind[div.name] - _before(gm, ind, div) == (0 if inline else _nbytes(div))


def _embedding_gradients(a: torch.Tensor, b: torch.Tensor, i: torch.Tensor, j: torch.Tensor):
    """Two embeddings' gradients accumulated from one gradient (a slice of a matmul's result)."""
    g = (a @ b)[:, :32] * 2
    return (aten.index_put(torch.zeros(16, 32), [i], g, True), aten.index_put(torch.zeros(128, 32), [j], g, True))


def test_generated_index_put_reads_its_values_inline_in_one_cpp_call():
    """Inductor lowers an accumulating index-put (an embedding's backward) to a generated scatter
    that reads its values through their loader, on any thread count, and runs it in the C++ call
    of the kernels around it: generated code here (torch 2.13, CPU) is the matmul and one kernel,
    ``cpp_fused_index_put_mul_slice_zeros_0``, reading the matmul's (64, 64) result inline, with
    both zero buffers allocated before it and the result freed after it: measured 34,816 bytes at
    the peak (profiler allocation events).  The replay had stored the scaled gradient and freed the
    matmul's result before the second buffer of zeros (26,624 bytes; HF BERT's tiny classifier,
    whose layer norm's backward and three embedding gradients are one kernel, measured 1.03x
    min-cut's peak on a plan predicted 13% below it)."""
    args = torch.randn(64, 16), torch.randn(16, 64), torch.randint(0, 16, (64,)), torch.randint(0, 128, (64,))
    gm, _, ind = _replay(_embedding_gradients, *args)
    (mm,), (mul,) = _named(gm, aten.mm.default), _named(gm, aten.mul.Tensor)
    puts = _named(gm, aten.index_put.default)
    assert mul in fused_in(gm.graph)
    zeros = [p.args[0] for p in puts]
    assert ind[zeros[1].name] == _nbytes(mm) + sum(_nbytes(z) for z in zeros) == max(ind.values())
    assert ind[puts[1].name] == ind[zeros[1].name]  # each put accumulates into its zeros


def test_cropped_gradient_stays_alive_until_its_reader():
    """The backward of a TF-style padded convolution crops its input gradient with a negative
    ``constant_pad_nd``; Inductor computes the crop inside its reader, so the uncropped gradient
    (a matmul's result here) stays alive until that reader runs, and the crop is never allocated."""
    def fn(g, w, x):
        grad = g @ w  # (65, 64): realized by the matmul
        cropped = torch.constant_pad_nd(grad, [0, 0, 0, -1])  # (64, 64)
        return ((cropped * x).sum(0) * 2,)
    gm, _, ind = _replay(fn, torch.randn(65, 64), torch.randn(64, 64), torch.randn(64, 64))
    (pad,), (mul,) = _named(gm, aten.constant_pad_nd.default), _named(gm, aten.mul.Tensor)[:1]
    (mm,) = _named(gm, aten.mm.default)
    assert pad in fused_in(gm.graph) and mul in fused_in(gm.graph)
    assert ind[pad.name] == ind[mm.name] == _nbytes(mm)


def test_concatenation_allocated_by_the_first_kernel_writing_a_piece():
    """cat([x, x @ w]): Inductor copies the input x into its slice inside the first kernel that
    reads x (the row sums, before the matmul), so the concatenation is alive from there; the
    matmul writes its slice itself (``out=``), with no buffer of its own."""
    def fn(x, w):
        a = x.sum(1, keepdim=True)
        m = x @ w
        c = torch.cat([x, m], 1)
        return ((c * a).sum(0),)

    gm, plain, ind = _replay(fn, torch.randn(64, 64), torch.randn(64, 64))
    (total,), (mm,), (cat,) = _named(gm, aten.sum.dim_IntList)[:1], _named(gm, aten.mm.default), _named(gm, aten.cat.default)
    assert ind[total.name] == _nbytes(cat) + _nbytes(total)
    assert ind[mm.name] == ind[total.name] and ind[cat.name] == ind[mm.name]
    assert plain[total.name] == _nbytes(total) and plain[cat.name] == plain[mm.name] + _nbytes(cat)


@pytest.mark.parametrize("returned", [False, True])
def test_piece_computed_into_its_slice(returned):
    """cat([relu(x), y]), the ReLU read by two reductions first: Inductor realizes it where it is
    computed, straight into its slice, so it has no buffer of its own and the concatenation is
    alive from there; returned as well, it is a buffer of its own and the cat copies it."""
    def fn(x, y):
        r = torch.relu(x)
        s = r.sum(0) + r.amax(0)
        c = torch.cat([r, y], 1)
        return (c, s, r) if returned else (c, s)

    gm, plain, ind = _replay(fn, torch.randn(64, 64), torch.randn(64, 64))
    (relu,), (cat,) = _named(gm, aten.relu.default), _named(gm, aten.cat.default)
    assert plain[cat.name] >= _nbytes(relu) + _nbytes(cat)
    assert ind[relu.name] == (_nbytes(relu) if returned else _nbytes(cat))
    assert ind[cat.name] - ind[relu.name] == (_nbytes(cat) if returned else 0) + 2 * 64 * 4  # and the two reductions


def test_values_dying_in_a_cpu_kernel_call_are_freed_after_it():
    """Between two matmuls, Inductor's CPU backend runs the generated kernels as one C++ call: the
    matmul's result, whose last reader (the row sums) comes first, stays alive until the call
    has written the exponential too; the next matmul ends the call."""
    def fn(x, w):
        m = x @ w
        s = m.sum(1, keepdim=True)
        e = torch.exp(x)
        return (e @ w + s,)

    gm, plain, ind = _replay(fn, torch.randn(64, 64), torch.randn(64, 64))
    (first, second), (exp,) = _named(gm, aten.mm.default), _named(gm, aten.exp.default)
    assert plain[exp.name] == _nbytes(exp) + 64 * 4  # the matmul's result is freed at the row sums
    assert ind[exp.name] == _nbytes(first) + _nbytes(exp) + 64 * 4
    assert ind[second.name] == _nbytes(exp) + 64 * 4 + _nbytes(second)  # freed after the call


def _late_reduction(x, w1, w2, w3):
    b = (x @ w1) * (x @ w2)
    d = x @ w3
    return (b.sum() + d.sum(),)


def _late_reduction_args():
    return tuple(torch.randn(64, 64) for _ in range(4))


@pytest.mark.xfail(strict=True, reason=(
    "memory.simulate(inductor=True) places a fused kernel at its reader's graph position, keeping "
    "every input of the fused value alive until then; Inductor runs it at its first node's "
    "position (torch/_inductor/scheduler.py: sorted(fused_nodes, key=lambda x: x.min_order)), so "
    "for (x@w1) * (x@w2) summed after an unrelated x@w3 the Inductor-aware peak (3 buffers + a scalar) "
    "exceeds the plain peak (3 buffers)"))
def test_inductor_peak_at_most_plain_peak_small():
    _, plain, ind = _replay(_late_reduction, *_late_reduction_args())
    assert max(ind.values()) <= max(plain.values())


# ------------------------------------------------------------------ real pairs, Inductor mode


def inductor_mode_backend(partition_fn: Callable, calls: list) -> Callable:
    """AOTAutograd with Inductor's decompositions, ``partition_fn`` told ``compiler="inductor"``
    (so fxremat plans for Inductor) and no-op compilers: no kernel is compiled.  Each pair the
    partition function returns is appended to ``calls`` as (fw, bw, num_fwd_outputs)."""
    from torch._inductor.decomposition import select_decomp_table

    def pf(gm, joint_inputs, **kwargs):
        fw, bw = partition_fn(gm, joint_inputs, **{**kwargs, "compiler": "inductor"})
        calls.append((fw, bw, kwargs["num_fwd_outputs"]))
        return fw, bw

    def nop(graph: fx.GraphModule, _inputs: list):
        return _torch.boxed_freeing_call(graph)

    return aot_autograd(fw_compiler=nop, bw_compiler=nop, partition_fn=pf, decompositions=select_decomp_table())


def _models():
    from zoo import make_gpt, make_resnet_bn, make_unet
    from test_long_lived_choice import make_rmsnorm_lm

    return {
        "gpt": lambda: make_gpt(layers=2, d=64, heads=4, seq=32, batch=2, vocab=128),
        "rmsnorm_lm": make_rmsnorm_lm,
        "resnet_bn": make_resnet_bn,
        "unet": make_unet,
    }


@pytest.mark.usefixtures("fresh_compile")
@pytest.mark.parametrize("name", ["gpt", "rmsnorm_lm", "resnet_bn", "unet"])
@pytest.mark.parametrize("partitioner", ["fxremat", "min-cut"])
def test_inductor_replay_of_real_pairs(name, partitioner):
    if (name, partitioner) == ("rmsnorm_lm", "min-cut") and torch.__version__ < "2.13":
        # torch 2.11's min-cut pair meets the replay's known gap (a fused kernel placed at its
        # reader keeps its inputs alive until then: test_inductor_peak_at_most_plain_peak_small):
        # Inductor-aware 1,677,568 B vs plain 1,661,184 B (2026-12-02); not on 2.13 or 2.14.
        pytest.xfail("torch < 2.13: min-cut's rmsnorm_lm pair meets the replay's fused-kernel placement gap")
    case = _models()[name]()
    calls: list = []
    fn = partition if partitioner == "fxremat" else _torch.min_cut
    loss_of(torch.compile(case.model, backend=inductor_mode_backend(fn, calls))(*case.inputs)).backward()
    assert calls
    for fw, bw, n in calls:
        plain, ind = simulate(fw, bw, n), simulate(fw, bw, n, inductor=True)
        # the same nodes, a value Inductor realizes when its extern reader is lowered moved to it
        # (memory._realized_when_read); its peak can be the higher (inputs held until then)
        assert sorted(ind.labels) == sorted(plain.labels) and ind.forward_steps == plain.forward_steps
        for graph in (fw.graph, bw.graph):
            returned = set(graph.find_nodes(op="output")[0].all_input_nodes)
            assert not returned & fused_in(graph), "a returned value treated as fused"
    if partitioner == "fxremat":
        reports = fxremat.last_reports()
        assert reports and all(isinstance(r.min_cut, Timeline) for r in reports)
        for (fw, bw, n), report in zip(calls, reports):
            # the partitioner's predictions are the Inductor-aware replay of the pair it returned
            # (in the CPU layout it planned the pair for: a convolution network is planned in both)
            assert report.timeline.peak_bytes == simulate(fw, bw, n, inductor=True, channels_last=bool(report.channels_last)).peak_bytes


@pytest.mark.inductor
@pytest.mark.usefixtures("fresh_compile")
def test_batch_norm_network_predicted_within_5_percent_through_inductor():
    """A residual network with batch norm through ``fxremat.backend``: the replay's predicted peak
    against the allocator's.  Each batch norm's bias gradient is a returned reduction, which
    Inductor fuses with the input gradient's pointwise chain, and that chain is stored only when
    the convolution backward reading it is lowered: the replay fuses the one and moves the other
    (2026-12-04: 1,517,672 B predicted, 1,508,616 measured; 1,330,408 predicted before)."""
    from zoo import make_resnet_bn

    from fxremat.profiling import peak_of_training_step

    case = make_resnet_bn()
    fxremat.last_reports(clear=True)
    with _torch.caches_disabled():
        model = torch.compile(case.model, backend=fxremat.backend)
        loss_of(model(*case.inputs)).backward()
        measured = peak_of_training_step(model, case.inputs, loss_of)
    (report,) = fxremat.last_reports(clear=True)
    assert abs(report.predicted_peak_bytes - measured) <= 0.05 * measured, (report.predicted_peak_bytes, measured)
