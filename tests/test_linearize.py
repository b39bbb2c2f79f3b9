"""Linearization on the structures real models have: tensors read by every layer (a padding
mask), weight gradients, and dropout, through the no-Inductor path (exact memory, fast).

Invariants checked: a tensor read by every layer does not remove the cuts between layers (a mask
of constants or of no-gradient inputs is rebuilt by the backward, never saved; others are counted
once, as always saved); every parameter's gradient is counted in exactly one stage;
fxremat's gradients equal eager's and min-cut's bit for bit.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fxremat
from fxremat import _torch
from fxremat.analysis import analyze
from fxremat.backend import min_cut_backend
from fxremat.linearize import _gradient_bytes, _held_by_rebuild, linearize

pytestmark = pytest.mark.usefixtures("fresh_compile")


class MaskedLayer(nn.Module):
    def __init__(self, d: int, heads: int, p: float) -> None:
        super().__init__()
        self.heads, self.p = heads, p
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.p if self.training else 0.0)
        x = x + F.dropout(self.proj(a.transpose(1, 2).reshape(b, s, d)), self.p, self.training)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), self.p, self.training)


class PaddedEncoder(nn.Module):
    """Layers that all read one (B, 1, S, S) mask built from the caller's padding mask, the way HF
    models build theirs: the mask is data dependent and alive across every layer."""

    def __init__(self, layers: int = 4, d: int = 64, heads: int = 4, p: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList(MaskedLayer(d, heads, p) for _ in range(layers))

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        keep = padding[:, None, None, :].bool() & torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()
        mask = torch.zeros(keep.shape, dtype=x.dtype).masked_fill(~keep, float("-inf"))
        for layer in self.layers:
            x = layer(x, mask)
        return x


def _inputs(batch: int = 2, seq: int = 32, d: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    padding = torch.ones(batch, seq, dtype=torch.long)
    padding[1, seq * 3 // 4 :] = 0
    return torch.randn(batch, seq, d), padding


def _step(module: nn.Module, compiled, inputs, seed: int = 0):
    module.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    compiled(*inputs).square().mean().backward()
    return _step_grads(module)


def _joint_of(model: nn.Module, inputs) -> list:
    """The joint graphs AOTAutograd hands the partitioner (recorded, then min-cut runs)."""
    seen = []

    def record(gm, joint_inputs, **kwargs):
        seen.append(analyze(gm, num_fwd_outputs=kwargs["num_fwd_outputs"],
                            static_lifetime_input_indices=kwargs.get("static_lifetime_input_indices")))
        return _torch.min_cut(gm, joint_inputs, **kwargs)

    backend = min_cut_backend(compiler="eager")
    backend.partitioner = record
    with _torch.caches_disabled():
        torch.compile(model, backend=backend)(*inputs).sum().backward()
    return seen


def _is_mask(node, seq: int = 32) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and tuple(val.shape[-2:]) == (seq, seq)


def test_mask_read_by_every_layer_leaves_cuts_between_layers():
    """The mask built from the caller's padding mask (an input that gets no gradient) is rebuilt by
    the backward, never saved: it neither removes the cuts between layers nor crosses them."""
    torch.manual_seed(0)
    layers = 4
    model, inputs = PaddedEncoder(layers), _inputs()
    (jg,) = _joint_of(model, inputs)
    lin = linearize(jg, [])
    assert lin.chain.n > layers, f"{lin.chain.n} stages for {layers} layers"
    assert any(_is_mask(n) for n in lin.rebuilt), lin.rebuilt
    assert not [n.name for b in lin.crossing for n in b if _is_mask(n)]
    assert not [n.name for n in lin.long_lived if _is_mask(n)]


class CausalMaskLayers(nn.Module):
    """Layers that all read one additive causal mask the forward builds from constants (``arange``
    compares, as HF's mask utilities do when no padding mask is passed).  At sequence 32 the
    (32, 32) float mask is 4 KiB, small enough to be kept: the tests use 64."""

    def __init__(self, layers: int = 4, d: int = 48, random_mask: bool = False, from_activation: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(MaskedLayer(d, 4, 0.0) for _ in range(layers))
        self.first = nn.Linear(d, d)
        self.random_mask, self.from_activation = random_mask, from_activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.shape[1]
        pos = torch.arange(s)
        mask = torch.zeros(s, s).masked_fill(pos[None, :] > pos[:, None], float("-inf"))
        if self.random_mask:  # random: its recomputation would have to replay the RNG
            mask = mask - torch.rand(s, s)
        x = self.first(x)
        if self.from_activation:  # behind a matmul: too costly to rebuild
            mask = mask + x.detach().mean() * 0
        for layer in self.layers:
            x = layer(x, mask)
        return x


@pytest.mark.parametrize("model", ["causal", "padded"])
def test_cheap_mask_is_rebuilt_by_the_backward_not_saved(model):
    """End to end (eager compiler): fxremat's saved set holds no mask; its backward rebuilds it; the
    gradients equal eager's exactly; the forward's replayed peak is not above the plan that saves
    it (the mask no longer lives through the end of the forward)."""
    torch.manual_seed(0)
    module, inputs = (CausalMaskLayers(), (torch.randn(2, 64, 48),)) if model == "causal" else (PaddedEncoder(4), _inputs())
    seq = inputs[0].shape[1]
    ref = _step(module, module, inputs)
    with _torch.caches_disabled():
        ours = _step(module, torch.compile(module, backend=fxremat.make_backend(compiler="eager")), inputs)
    (report,) = fxremat.last_reports()
    assert report.chosen == "fxremat" and report.plan.checkpoints, report
    (jg,) = _joint_of(module, inputs)
    masks = {n.name for n in jg.forward if _is_mask(n, seq) and n.meta["val"].is_floating_point()}
    assert masks and not masks & set(report.saved), sorted(masks & set(report.saved))
    for name in ref:
        torch.testing.assert_close(ours[name], ref[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("kind", ["random_mask", "from_activation"])
def test_random_or_activation_mask_is_not_rebuilt(kind):
    torch.manual_seed(0)
    (jg,) = _joint_of(CausalMaskLayers(**{kind: True}), (torch.randn(2, 64, 48),))
    lin = linearize(jg, [])
    read = [a for n in jg.forward if "scaled_dot_product" in str(n.target) for a in [n.kwargs.get("attn_mask"), *n.args[3:4]]]
    final = {jg.storage_owner[k] for a in read if isinstance(a, torch.fx.Node) for k in jg.facts[a].storages}
    assert final, "the mask every layer reads"
    assert not set(final) & set(lin.rebuilt), [n.name for n in lin.rebuilt]


def _mlp():
    return nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(4)]), (torch.randn(32, 64),)


def _cnn():
    layers = [nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()] + [m for _ in range(3) for m in (nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())]
    return nn.Sequential(*layers), (torch.randn(2, 3, 16, 16),)


@pytest.mark.parametrize("make", [lambda: (PaddedEncoder(3), _inputs()), _mlp, _cnn], ids=["padded_encoder", "mlp", "cnn"])
def test_every_parameter_gradient_counted_once(make):
    """Every parameter's gradient in exactly one stage.  Before 2026-12-01 a value computed from
    the data input and parameters counted as computed "from inputs alone", so on an MLP or a CNN,
    whose first layer reads the data input, no gradient was counted at all."""
    torch.manual_seed(0)
    model, inputs = make()
    (jg,) = _joint_of(model, inputs)
    lin = linearize(jg, [])
    grads = _gradient_bytes(jg, lin.stage_of)
    assert len(grads) == lin.chain.n
    assert sum(grads) == sum(p.numel() * p.element_size() for p in model.parameters())
    assert sum(g > 0 for g in grads) >= 3, f"each layer's gradients in its own stages: {grads}"


@pytest.mark.parametrize("p", [0.0, 0.1], ids=["no_dropout", "dropout"])
def test_masked_layers_match_eager_and_min_cut_exactly(p):
    torch.manual_seed(0)
    model, inputs = PaddedEncoder(4, p=p), _inputs()
    ref = _step(model, model, inputs)
    with _torch.caches_disabled():
        ours = _step(model, torch.compile(model, backend=fxremat.make_backend(compiler="eager")), inputs)
        torch._dynamo.reset()
        theirs = _step(model, torch.compile(model, backend=min_cut_backend(compiler="eager")), inputs)
    (report,) = fxremat.last_reports()
    assert report.chosen == "fxremat" and report.plan.checkpoints, report
    for name in ref:
        torch.testing.assert_close(ours[name], ref[name], rtol=1e-5, atol=1e-6, msg=name)
        torch.testing.assert_close(ours[name], theirs[name], rtol=0, atol=0, msg=name)


class ExpandedMaskLayers(nn.Module):
    """Each layer expands one boolean mask into an additive float mask for its own attention (as
    SDPA-based HF models do per layer): the float mask is read by the attention's forward and, in
    the backward graph, by its backward."""

    def __init__(self, layers: int = 3, d: int = 32) -> None:
        super().__init__()
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        for qkv in self.qkv:
            q, k, v = qkv(x).unsqueeze(1).chunk(3, dim=-1)
            mask = torch.where(keep, 0.0, float("-inf"))  # after the projection: not a stage boundary
            x = x + F.scaled_dot_product_attention(q, k, v, attn_mask=mask).squeeze(1)
        return x


def test_values_a_rebuilt_stage_holds_count_as_saved():
    """A value the base plan does not save but that both the rebuild and the backward read (each
    layer's float mask) is held from a recomputed stage's rebuild to its backward: its bytes count
    in its stage's saved bytes (``linearize._held_by_rebuild``)."""
    torch.manual_seed(0)
    seq = 64
    keep = torch.ones(seq, seq, dtype=torch.bool).tril()
    model = ExpandedMaskLayers()
    (jg,) = _joint_of(model, (torch.randn(2, seq, 32), keep))
    masks = [n for n in jg.forward if n.target is torch.ops.aten.where.self]
    assert len(masks) == len(model.qkv), masks
    lin = linearize(jg, [])
    held = _held_by_rebuild(jg, lin.stage_of, set())
    for m in masks:
        (key,) = jg.facts[m].storages
        assert held.get(key) == lin.stage_of[m], (m, held)
    mask_bytes = seq * seq * 4
    stages = {lin.stage_of[m] for m in masks}
    for st in stages:
        assert lin.chain.saved_bytes[st - 1] >= mask_bytes, (st, lin.chain.saved_bytes)


@pytest.mark.parametrize("make", [_mlp, _cnn], ids=["mlp", "cnn"])
def test_stage_transient_holds_incoming_and_written_gradient(make):
    """While a stage's backward writes the gradient of its input, the gradient of its output is
    still alive: without Inductor (nothing fused, nothing written in place) each inner stage's
    transient on the activation chain holds both, and a convolution's adds its backward's scratch
    (the reordered gradient, input and weight); the lean chain (``Linearization.lean_chain``) holds
    only the incoming one and its largest intermediate."""
    torch.manual_seed(0)
    model, inputs = make()
    (jg,) = _joint_of(model, inputs)
    lin = linearize(jg, [])
    full, whole, lean = lin.activation_chain, lin.chain, lin.lean_chain
    assert full.n == lean.n >= 4
    assert lean.saved_bytes == whole.saved_bytes and lean.output_bytes == whole.output_bytes
    o = full.output_bytes
    for i in range(2, full.n):  # stages 2..n-1: both boundaries are real activations
        assert full.transient_bytes[i - 1] >= o[i] + o[i - 1], (i, full.transient_bytes, o)
    for i in range(1, full.n + 1):  # the same gradients are folded into both
        assert whole.transient_bytes[i - 1] >= lean.transient_bytes[i - 1]
    assert whole.transient_bytes != lean.transient_bytes


_CASTS = {torch.ops.prims.convert_element_type.default, torch.ops.aten._to_copy.default}


def _saved_weight_casts(fw: torch.fx.GraphModule, num_fwd_outputs: int) -> list[str]:
    """The forward's saved values that are a cast of a 2-d graph input (a weight's bfloat16 copy
    under autocast; a bias's is under 4 KiB, kept as any small value is), through views."""
    out = []
    for node in fw.graph.find_nodes(op="output")[0].args[0][num_fwd_outputs:]:
        base = node
        while isinstance(base, torch.fx.Node) and base.op == "call_function" and getattr(base.target, "is_view", False):
            base = base.args[0]
        if (isinstance(base, torch.fx.Node) and base.target in _CASTS and base.args[0].op == "placeholder"
                and base.meta["val"].dim() == 2):
            out.append(node.name)
    return out


def test_weight_casts_under_autocast_are_rebuilt_not_saved():
    """Under bfloat16 autocast every linear layer reads a bfloat16 cast of its weight, and the
    backward's input gradient reads it again (transposed).  A cast of a parameter is a rebuilt
    value (``linearize._rebuilt``): the chain counts none of them, so no plan may save one, or the
    plan keeps bytes its model never counted.  Min-cut's saved set, the base of the last segment,
    holds a transposed view of every cast; they were saved with it (HF ViT, 64 px, through
    Inductor: 32.5 MiB measured against 27.5 predicted, 1.025x min-cut; 2026-12-07).  Now the
    backward casts each weight again, the gradients are min-cut's bit for bit, and the peak is
    no higher than min-cut's."""
    from helpers import RecordingPartitioner

    torch.manual_seed(0)
    model, inputs = PaddedEncoder(4, d=64), _inputs(batch=4, seq=64, d=64)
    grads, peaks, calls = {}, {}, {}
    for name, backend in (("fxremat", fxremat.make_backend(compiler="eager")), ("min-cut", min_cut_backend(compiler="eager"))):
        recording = RecordingPartitioner(backend.partitioner)
        backend.partitioner = recording
        torch._dynamo.reset()
        loss = torch.compile(lambda *ins: model(*ins).square().mean(), backend=backend)  # the loss inside the graph
        # oneDNN off: its bfloat16 matmul packs an operand in scratch the model does not count, sized by
        # the processor (141,056 B inside one backward mm on an AMX Xeon, 10.4% of the peak; 8.6% on an
        # AMD EPYC), which is not what this test is about
        with _torch.caches_disabled(), torch.autocast("cpu", dtype=torch.bfloat16), torch.backends.mkldnn.flags(enabled=False):
            _backward(model, loss, inputs)
            peaks[name] = fxremat.profiling.measure_peak(_backward, model, loss, inputs).peak_bytes
        grads[name], calls[name] = _step_grads(model), recording.calls
    (ours,), (theirs,) = calls["fxremat"], calls["min-cut"]
    assert _saved_weight_casts(theirs.fw, theirs.num_fwd_outputs), "min-cut no longer saves weight casts: update the docstring"
    assert not _saved_weight_casts(ours.fw, ours.num_fwd_outputs)
    report = fxremat.last_reports(clear=True)[-1]
    assert report.chosen == "fxremat", report
    assert peaks["fxremat"] <= peaks["min-cut"]
    # with oneDNN's scratch out of the way the replay is exact (1,355,784 B measured against 1,355,780 on
    # torch 2.13, 2026-12-07; 5% leaves room for other processors' native kernels); with it, 8.6-10.4% over
    assert abs(peaks["fxremat"] - report.predicted_peak_bytes) <= 0.05 * report.predicted_peak_bytes, (peaks, report)
    for name in grads["min-cut"]:
        torch.testing.assert_close(grads["fxremat"][name], grads["min-cut"][name], rtol=0, atol=0, msg=name)


def _backward(module: nn.Module, loss, inputs) -> None:
    module.zero_grad(set_to_none=True)
    loss(*inputs).backward()


def _step_grads(module: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in module.named_parameters()}
