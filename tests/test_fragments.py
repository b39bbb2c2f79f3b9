"""Graphs that are one of several of the step's forward (graph breaks, layers compiled alone):
recognised from Dynamo's records and the Python stack, and planned for the bytes they hold into
their backward, so the step's peak falls where fxremat alone held as much as min-cut."""

from __future__ import annotations

import functools
import importlib

import pytest
import torch
import torch.nn as nn

import fxremat
from fxremat.backend import FxrematPartitioner, min_cut_backend
from fxremat.fragments import Fragment, fragment_of
from fxremat.options import Options
from fxremat.profiling import peak_of_training_step

backend_module = importlib.import_module("fxremat.backend")  # the module (fxremat.backend is the default backend)


class Block(nn.Module):
    def __init__(self, d: int, graph_break: bool):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.graph_break = graph_break

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        x = x + self.proj(torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1) @ v)
        if self.graph_break:  # as an MoE layer's data-dependent expert loop would
            torch._dynamo.graph_break()
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class Model(nn.Module):
    def __init__(self, where: str, d: int = 32, layers: int = 4):
        super().__init__()
        self.where = where
        self.emb = nn.Embedding(100, d)
        self.blocks = nn.ModuleList(Block(d, where == "layer") for _ in range(layers))
        self.head = nn.Linear(d, 100)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.where == "start":
            torch._dynamo.graph_break()
        x = self.emb(ids)
        for i, block in enumerate(self.blocks):
            if self.where == "loop" and i == 1:  # Dynamo skips the loop's frame: each block compiles alone
                torch._dynamo.graph_break()
            x = block(x)
        if self.where == "loss":
            torch._dynamo.graph_break()
        return nn.functional.cross_entropy(self.head(x).flatten(0, 1), ids.flatten())


def _fragments(model: nn.Module, *inputs) -> list[str | None]:
    """Each graph's fragment reason (None: not a fragment), with " [layer]" where it is a piece of
    a layer (called from a forward that runs in Python)."""
    seen: list[str | None] = []

    def backend(gm, example_inputs):
        f = fragment_of(gm, example_inputs)
        seen.append(None if f is None else f.reason + (" [layer]" if f.layer_piece else ""))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=backend)(*inputs)
    return seen


def test_a_whole_forward_is_no_fragment():
    assert _fragments(Model("none"), torch.randint(0, 100, (2, 16))) == [None]


def test_graph_breaks_and_the_parts_after_them_are_fragments():
    seen = _fragments(Model("layer"), torch.randint(0, 100, (2, 16)))
    assert seen and all(seen), seen
    # the part before each break, and the part after it (a function resuming the block's frame,
    # called from the model's forward): pieces of a layer
    assert any("graph break" in s for s in seen) and all("Model.forward" in s for s in seen), seen
    assert all(s.endswith("[layer]") for s in seen), seen


def test_a_top_level_frame_broken_before_its_loss_is_a_fragment_once():
    seen = _fragments(Model("loss"), torch.randint(0, 100, (2, 16)))
    # the layers' graph ends at the break; the loss's graph (resuming the model's frame) does not
    assert seen[0] is not None and "graph break" in seen[0] and not seen[0].endswith("[layer]"), seen
    assert seen[1:] == [None], seen


def test_a_frame_resumed_after_a_break_at_its_start_is_no_fragment():
    # the whole model after the break is one resumed graph, followed by nothing but the backward
    assert _fragments(Model("start"), torch.randint(0, 100, (2, 16))) == [None]


def test_frames_called_from_a_forward_that_runs_in_python_are_fragments():
    seen = _fragments(Model("loop"), torch.randint(0, 100, (2, 16)))
    assert seen and all("Model.forward" in s for s in seen), seen
    # per-layer torch.compile (each block compiled alone, as FSDP2 recipes do)
    seen = []

    def record(gm, example_inputs):
        seen.append(fragment_of(gm, example_inputs).reason)
        return gm.forward

    torch._dynamo.reset()
    per_layer = Model("none")
    per_layer.blocks = nn.ModuleList(torch.compile(b, backend=record) for b in per_layer.blocks)
    per_layer(torch.randint(0, 100, (2, 16)))
    assert seen and all("Model.forward" in s for s in seen), seen


def test_most_of_the_model_called_from_a_wrapper_is_no_layer_piece():
    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Model("none")
            self.scale = nn.Parameter(torch.ones(()))

        def forward(self, ids):
            return self.inner(ids) * self.scale  # runs in Python; only the inner model is compiled

    seen = []

    def record(gm, example_inputs):
        f = fragment_of(gm, example_inputs)
        seen.append((f.reason, f.layer_piece))
        return gm.forward

    torch._dynamo.reset()
    wrapper = Wrapper()
    wrapper.inner = torch.compile(wrapper.inner, backend=record)
    wrapper(torch.randint(0, 100, (2, 16)))
    assert len(seen) == 1 and "Wrapper.forward" in seen[0][0] and seen[0][1] is False, seen


def test_the_cache_identity_tells_fragments_apart():
    keys = {FxrematPartitioner(Options(), f).uuid()
            for f in (None, Fragment("a break", layer_piece=False), Fragment("a layer", layer_piece=True))}
    assert len(keys) == 3


def _step(model: nn.Module, ids: torch.Tensor, backend) -> tuple[int, list[torch.Tensor], list]:
    """One training step of ``model`` (which returns its loss) compiled with ``backend``: the
    step's measured peak, the parameters' gradients and fxremat's reports."""
    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
    compiled = torch.compile(model, backend=backend)
    model.zero_grad(set_to_none=True)
    compiled(ids).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    return peak_of_training_step(compiled, (ids,), lambda out: out), grads, fxremat.last_reports()


def _eager_gradients(model: nn.Module, ids: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    model(ids).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("where", ["layer", "loop"])
def test_fragments_hold_less_and_the_step_peaks_lower(where, monkeypatch):
    torch.manual_seed(0)
    model = Model(where, d=64, layers=4)
    ids = torch.randint(0, 100, (4, 128))
    run = functools.partial(_step, model, ids)
    eager = _eager_gradients(model, ids)
    planned, grads, reports = run(fxremat.make_backend(compiler="eager"))
    min_cut, _, _ = run(min_cut_backend(compiler="eager"))
    monkeypatch.setattr(backend_module, "fragment_of", lambda gm, example_inputs: None)
    alone, _, alone_reports = run(fxremat.make_backend(compiler="eager"))

    assert reports and all(r.fragment for r in reports)
    assert not any(r.fragment for r in alone_reports)
    for a, b in zip(grads, eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    # Each fragment holds no more into its backward than its own least-peak plan does, and the
    # step, where every later graph runs above those bytes, peaks lower than both min-cut's
    # and the plans made as if each graph were the whole step.
    for r, a in zip(reports, alone_reports):
        assert r.timeline.held_bytes <= a.timeline.held_bytes
    assert planned < alone <= min_cut


class MaskedBlock(Block):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        scores = (q @ k.transpose(1, 2) / q.shape[-1] ** 0.5 + mask).softmax(dim=-1)  # eager keeps no mask
        x = x + self.proj(scores @ v)
        torch._dynamo.graph_break()
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class MaskedModel(nn.Module):
    def __init__(self, d: int = 32, layers: int = 3):
        super().__init__()
        self.emb = nn.Embedding(100, d)
        self.blocks = nn.ModuleList(MaskedBlock(d, True) for _ in range(layers))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        for block in self.blocks:
            x = block(x, mask)
        return x.square().mean()


@pytest.mark.parametrize("via_data", [False, True], ids=["in_place", "through_data"])
def test_a_caller_edit_of_a_mask_never_reaches_the_gradients(via_data, caplog):
    """A layer piece reads an additive mask the caller passed and may edit between forward and
    backward (eager keeps no reference to it): the plan recomputes from a private copy, so the
    edit reaches neither the gradients nor an error."""
    torch.manual_seed(0)
    model = MaskedModel()
    ids = torch.randint(0, 100, (8, 64))

    def step(fn):  # one mask for the batch: the masked scores are 8x its bytes
        mask = torch.zeros(64, 64).masked_fill(torch.rand(64, 64) > 0.8, -1e4)
        model.zero_grad(set_to_none=True)
        loss = fn(ids, mask)
        if via_data:
            mask.data.add_(5.0)
        else:
            with torch.no_grad():
                mask.add_(5.0)
        loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    torch.manual_seed(1)
    eager = step(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=fxremat.make_backend(compiler="eager"))
    with caplog.at_level("INFO", logger="fxremat"):
        torch.manual_seed(1)
        planned = step(compiled)
    assert "private copies" in caplog.text
    for a, b in zip(planned, eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


class WeightsKeptBlock(Block):
    """An eager attention that returns its weights, which the layer keeps in a local across a
    graph break and then drops (HF's eager attention in a layer with an MoE loop): the weights
    are an output of the graph before the break, not something the caller holds into the backward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
        x = x + self.proj(weights @ v)
        torch._dynamo.graph_break()
        x = x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))
        del weights
        return x


def test_returned_values_the_caller_drops_are_not_kept_for_free():
    torch.manual_seed(0)
    model = Model("none", d=32, layers=3)
    model.blocks = nn.ModuleList(WeightsKeptBlock(32, True) for _ in range(3))
    ids = torch.randint(0, 100, (4, 256))  # the weights (4 x 256 x 256) are 8x a hidden state
    weights_bytes = 4 * 256 * 256 * 4
    run = functools.partial(_step, model, ids)
    eager = _eager_gradients(model, ids)
    planned, grads, reports = run(fxremat.make_backend(compiler="eager"))
    min_cut, _, _ = run(min_cut_backend(compiler="eager"))
    for a, b in zip(grads, eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    # every graph holds less than one layer's weights into its backward (the weights are
    # recomputed there), and the step peaks below min-cut's, which keeps each layer's weights
    assert reports and all(r.fragment and r.timeline.held_bytes < weights_bytes for r in reports), [
        (r.fragment, r.timeline.held_bytes) for r in reports]
    assert planned < min_cut - 2 * weights_bytes, (planned, min_cut)


def test_the_replay_of_a_layer_piece_holds_only_what_its_backward_reads():
    """``simulate(..., outputs_dropped=True)``: a returned value the backward does not read is
    dropped at the hand-over; one it reads is held once, as a saved value."""
    from functorch.compile import aot_function, min_cut_rematerialization_partition, nop

    from fxremat.memory import simulate

    pairs = []

    def partition(joint, inputs, **kwargs):
        fw, bw = min_cut_rematerialization_partition(joint, inputs, **kwargs)
        pairs.append((fw, bw, kwargs["num_fwd_outputs"]))
        return fw, bw

    def fn(x, w):
        weights = torch.softmax(x @ w, dim=-1)  # returned, and read by its own backward
        return weights, torch.tanh(x) * 2  # the second: returned only (the backward reads the tanh)

    x, w = torch.randn(64, 32, requires_grad=True), torch.randn(32, 32, requires_grad=True)
    aot_function(fn, fw_compiler=nop, bw_compiler=nop, partition_fn=partition)(x, w)
    (fw, bw, n), = pairs
    held, dropped = simulate(fw, bw, n), simulate(fw, bw, n, outputs_dropped=True)
    one = 64 * 32 * 4  # every value here has x's shape
    assert held.held_bytes == 3 * one  # the weights, the tanh (saved) and the scaled tanh
    assert dropped.held_bytes == 2 * one  # the scaled tanh is the caller's, dropped
    assert dropped.peak_bytes <= held.peak_bytes
