"""fxremat never fails a compile that PyTorch's own partitioner handles (issue 11, items 1-3).

* Fault injection: each step of :func:`fxremat.partition` (the copy of the joint graph, min-cut
  itself, analysis, linearization, the solver, extraction, scheduling, the memory model) is made
  to raise; the compile must still run, give eager's gradients, and log exactly one warning that
  names the reason.  Through AOTAutograd (``compiler="eager"``) and through Inductor's
  ``custom_partitioner_fn`` (``fxremat.backend``).
* Graphs that used to fail: lifted constant tensors in the joint graph (HF GPT-2 with labels,
  HF T5, an index tensor built in the forward), whose ``copy.deepcopy`` failed under the fake mode;
  min-cut's unsafe pair with a failing plan under Inductor (``default_partition`` got the
  ``compiler`` keyword it does not take); ``.item()`` (an unbacked SymInt) that the saved-set
  closure put among the saved tensors.

Tolerances (torch 2.13 CPU): compiled without Inductor vs eager ``1e-5``; Inductor vs eager ``1e-4``.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import pytest
import torch
import torch._dynamo
import torch.nn as nn

import fxremat
import fxremat.partitioner
from fxremat import _torch, make_backend
from fxremat.report import captured_warnings

pytestmark = pytest.mark.usefixtures("fresh_compile")

VS_EAGER = dict(rtol=1e-5, atol=1e-5)
VS_EAGER_INDUCTOR = dict(rtol=1e-4, atol=1e-4)
EAGER_BACKEND = lambda: make_backend(compiler="eager")  # noqa: E731


# ------------------------------------------------------------------------------------ harness


def train_step(factory: Callable[[], tuple[Any, tuple, dict]], backend: Any = None) -> tuple[dict, list[str]]:
    """One seeded forward+backward of a fresh model (``backend`` None: eager).  Returns every
    gradient and buffer after the step, and the warnings fxremat logged."""
    torch.manual_seed(0)
    model, args, kwargs = factory()
    fn = model if backend is None else torch.compile(model, backend=backend)
    with captured_warnings() as warned:
        out = fn(*args, **kwargs)
        loss = out.loss if hasattr(out, "loss") else out
        loss = loss.float().sum() if loss.dim() else loss
        loss.backward()
    result = {"loss": loss.detach()}
    if isinstance(model, nn.Module):
        result.update({f"grad {n}": p.grad for n, p in model.named_parameters() if p.grad is not None})
        result.update({f"buffer {n}": b.detach().clone() for n, b in model.named_buffers()})
    tensors = [*args, *kwargs.values()]
    result.update({f"input {i}": t.grad for i, t in enumerate(tensors) if isinstance(t, torch.Tensor) and t.grad is not None})
    result.update({f"input {i} after": t.detach().clone() for i, t in enumerate(tensors) if isinstance(t, torch.Tensor)})
    return result, list(warned)


def assert_matches_eager(factory, backend, *, tol=VS_EAGER) -> list[str]:
    expected, _ = train_step(factory)
    torch._dynamo.reset()
    actual, warned = train_step(factory, backend)
    assert actual.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key], **tol, msg=lambda m, k=key: f"{k}: {m}")
    return warned


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.tanh(self.fc1(x)))


class Deep(nn.Module):
    def __init__(self, d: int = 32, n: int = 6) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x.sin()


def deep() -> tuple[nn.Module, tuple, dict]:
    return Deep(), (torch.randn(32, 32, requires_grad=True),), {}


# ----------------------------------------------------------------------------- fault injection


def _raiser(step: str) -> Callable[..., Any]:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"injected failure in {step}")

    return broken


# step -> (object, attribute, replacement); every step of partition() that can raise.
FAULTS: dict[str, tuple[Any, str, Callable[[], Any]]] = {
    "copy": (_torch, "copy_joint", lambda: _raiser("copy")),
    "min-cut": (_torch, "min_cut_rematerialization_partition", lambda: _raiser("min-cut")),
    "analyze": (fxremat.partitioner, "analyze", lambda: _raiser("analyze")),
    "linearize": (fxremat.partitioner, "linearizations", lambda: _raiser("linearize")),
    # not a ValueError: that one means "budget infeasible" (a user error, BudgetError)
    "solver": (fxremat.partitioner, "get_solver", lambda: (lambda name: _raiser("solver"))),
    "extract": (_torch, "extract_fwd_bwd", lambda: _raiser("extract")),
    "schedule": (fxremat.partitioner, "recompute_just_in_time", lambda: _raiser("schedule")),
    "replay": (fxremat.partitioner, "replay_pair", lambda: _raiser("replay")),
}
# Where min-cut cannot run, the fallback is PyTorch's default_partition (saves, never recomputes).
NO_MIN_CUT = {"copy", "min-cut"}


def _check_one_warning(warned: list[str], step: str) -> None:
    assert len(warned) == 1, warned
    message = warned[0]
    assert "falling back" in message and "RuntimeError" in message and f"injected failure in {step}" in message, message
    expected = "default_partition" if step in NO_MIN_CUT else "min-cut"
    assert expected in message, message


@pytest.mark.parametrize("step", list(FAULTS))
def test_fault_in_each_step_falls_back(monkeypatch, step):
    obj, attr, replacement = FAULTS[step]
    assert hasattr(obj, attr), f"{obj.__name__}.{attr} is gone: update FAULTS"
    monkeypatch.setattr(obj, attr, replacement())
    warned = assert_matches_eager(deep, EAGER_BACKEND())
    _check_one_warning(warned, step)
    assert not fxremat.last_reports()


@pytest.mark.inductor
@pytest.mark.parametrize("step", ["min-cut", "extract"])
def test_fault_falls_back_through_inductor(monkeypatch, step):
    """Through Inductor's ``custom_partitioner_fn``, which passes ``compiler="inductor"``: the
    ``default_partition`` fallback must not be handed that keyword."""
    obj, attr, replacement = FAULTS[step]
    monkeypatch.setattr(obj, attr, replacement())
    warned = assert_matches_eager(deep, fxremat.backend, tol=VS_EAGER_INDUCTOR)
    _check_one_warning(warned, step)


@pytest.mark.parametrize("cse", [False, True], ids=["no-cse", "cse"])
def test_min_cut_copy_leaves_the_joint_graph_untouched(monkeypatch, cse):
    """min-cut DCEs, CSEs and re-tags the graph it gets (``meta["recompute"] = MUST_SAVE`` between
    two checkpointed regions); it runs on a copy whose nodes and ``meta`` dicts are new (values
    shared), so the joint graph fxremat plans on is left exactly as it was.  Without CSE min-cut
    edits the copy's own nodes (with CSE it first rebuilds the graph)."""
    import torch._functorch.config as functorch_config
    from torch._dynamo.backends.common import aot_autograd
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint

    seen, copies = [], []
    copy_joint = _torch.copy_joint

    def recording_copy(joint):
        copies.append(copy_joint(joint))
        return copies[-1]

    monkeypatch.setattr(_torch, "copy_joint", recording_copy)

    def snapshot(gm: torch.fx.GraphModule):
        nodes = [(n.name, n.op, n.target, id(n.meta), dict(n.meta)) for n in gm.graph.nodes]
        attrs = {n.target: getattr(gm, n.target) for n in gm.graph.find_nodes(op="get_attr")}
        return nodes, gm.code, attrs

    def partition(joint, joint_inputs, **kwargs):
        before = snapshot(joint)
        fw, bw = _torch.min_cut(joint, joint_inputs, **kwargs)
        seen.append((before, snapshot(joint), joint))
        return fw, bw

    def f(x, w):
        h = checkpoint(lambda a: torch.tanh(a @ w).cos(), x, use_reentrant=False)
        h = checkpoint(lambda a: torch.tanh(a @ w).cos(), h, use_reentrant=False)
        g = h.clone()
        g.index_add_(0, torch.tensor([0, 0, 2]), h[:3])  # a lifted constant
        return (g @ w).sin().sum()

    x, w = torch.randn(8, 8), torch.randn(8, 8, requires_grad=True)
    with functorch_config.patch(cse=cse):
        compiled = torch.compile(f, backend=aot_autograd(fw_compiler=lambda g, _: g, partition_fn=partition))
        compiled(x, w).backward()
    assert len(seen) == 1 and len(copies) == 1
    (nodes_before, code_before, attrs_before), (nodes_after, code_after, attrs_after), joint = seen[0]
    assert [n[:4] for n in nodes_before] == [n[:4] for n in nodes_after], "min-cut changed the joint's nodes"
    for (name, _, _, _, meta_before), (_, _, _, _, meta_after) in zip(nodes_before, nodes_after):
        assert meta_before.keys() == meta_after.keys(), f"{name}: meta keys changed"
        assert all(meta_before[k] is meta_after[k] for k in meta_before), f"{name}: meta values replaced"
    assert code_before == code_after
    assert attrs_before.keys() == attrs_after.keys() and all(attrs_before[k] is attrs_after[k] for k in attrs_before)
    assert any(isinstance(v, torch.Tensor) for v in attrs_before.values()), "no lifted constant: not exercised"
    copy = copies[0]
    for k in attrs_before:
        assert getattr(copy, k) is attrs_before[k], "constants are shared with the copy, not cloned"
    if not cse:  # min-cut edited the copy itself: it is exercised, and the copy took the edits
        tagged = [n.name for n in copy.graph.nodes if n.meta.get("recompute") is CheckpointPolicy.MUST_SAVE]
        original = {n.name: n.meta.get("recompute") for n in joint.graph.nodes}
        assert any(original[name] is not CheckpointPolicy.MUST_SAVE for name in tagged), "no re-tag: not exercised"


# ------------------------------------------------------------- graphs with lifted constants


class IndexConstant(nn.Module):
    """An index tensor built in the forward (a lifted constant of the joint graph) after in-place
    ops on an intermediate."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc(x))
        g = h.clone()
        g.mul_(2)
        g.add_(1)
        g.index_add_(0, torch.tensor([0, 0, 2]), h[:3])
        return g.sin()


@pytest.mark.parametrize("compiler", ["eager", pytest.param("inductor", marks=pytest.mark.inductor)])
def test_index_tensor_built_in_forward(compiler):
    factory = lambda: (IndexConstant(), (torch.randn(8, 16, requires_grad=True),), {})  # noqa: E731
    tol = VS_EAGER if compiler == "eager" else VS_EAGER_INDUCTOR
    warned = assert_matches_eager(factory, make_backend(compiler=compiler), tol=tol)
    assert not warned
    assert fxremat.last_reports()


def _hf_gpt2():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config).eval()  # eval: no dropout, so eager is comparable
    ids = torch.randint(0, 64, (2, 16))
    return model, (), {"input_ids": ids, "labels": ids}


def _hf_t5():
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(
        vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )
    model = transformers.T5ForConditionalGeneration(config).eval()
    return model, (), {"input_ids": torch.randint(1, 64, (2, 12)), "labels": torch.randint(1, 64, (2, 8))}


@pytest.mark.parametrize("factory", [_hf_gpt2, _hf_t5], ids=["gpt2-lm-labels", "t5"])
def test_hf_models_with_lifted_constants(factory):
    logging.getLogger("transformers").setLevel(logging.ERROR)
    warned = assert_matches_eager(factory, EAGER_BACKEND())
    assert not warned
    assert fxremat.last_reports()


# ------------------------------------------------- min-cut unsafe and planning fails (Inductor)


class _MutateInBackward(torch.autograd.Function):
    """The backward mutates a buffer (AOTAutograd keeps it as a backward ``copy_`` on the input)."""

    @staticmethod
    def forward(ctx, x, buf):
        ctx.save_for_backward(buf)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (buf,) = ctx.saved_tensors
        buf.add_(1)
        return grad * 2, None


class BufferMutatedInBackward(nn.Module):
    def __init__(self, also_in_forward: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.register_buffer("buf", torch.ones(16))
        self.also_in_forward = also_in_forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.also_in_forward:
            self.buf.add_(1)
        return _MutateInBackward.apply(self.fc(x), self.buf).sin()


@pytest.mark.inductor
@pytest.mark.parametrize("also_in_forward", [False, True], ids=["backward", "both"])
def test_buffer_mutated_in_backward_inductor(also_in_forward):
    """fxremat does not plan these graphs (the backward reads an input that is mutated); where
    min-cut's pair is unsafe the fallback is ``default_partition``, which Inductor used to reach
    with a ``compiler=`` keyword it does not take (TypeError)."""
    factory = lambda: (BufferMutatedInBackward(also_in_forward), (torch.randn(8, 16, requires_grad=True),), {})  # noqa: E731
    warned = assert_matches_eager(factory, fxremat.backend, tol=VS_EAGER_INDUCTOR)
    assert len(warned) <= 1 and all("falling back" in w for w in warned), warned


# ------------------------------------------------------------------ symbolic ints never saved


def _item_of_input_view(x: torch.Tensor, w: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    """``.item()`` of a view of an input: the saved-set closure must save the unbacked SymInt
    itself (recomputing it would read a caller-visible tensor), as a symbolic value."""
    h = torch.tanh(x @ w)
    n = i[0].item()
    return (h * n).sin().sum()


def _item_of_sum(x: torch.Tensor, w: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    n = i.sum().item()
    h = torch.tanh(x @ w)
    return (h * n).sin().sum() + n


@pytest.mark.parametrize(
    "fn, compiler, dynamic",
    [
        (_item_of_input_view, "eager", False),
        (_item_of_input_view, "eager", True),
        (_item_of_sum, "eager", False),
        pytest.param(_item_of_input_view, "inductor", False, marks=pytest.mark.inductor),
    ],
    ids=["view-eager", "view-eager-dynamic", "sum-eager", "view-inductor"],
)
def test_unbacked_symint_from_item(fn, compiler, dynamic):
    import torch._dynamo.config as dynamo_config

    class Wrap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(8, 8))

        def forward(self, x, i):
            return fn(x, self.w, i)

    factory = lambda: (Wrap(), (torch.randn(8, 8), torch.tensor([2, 3])), {})  # noqa: E731
    tol = VS_EAGER if compiler == "eager" else VS_EAGER_INDUCTOR
    backend = make_backend(compiler=compiler)
    with dynamo_config.patch(capture_scalar_outputs=True):
        expected, _ = train_step(factory)
        torch._dynamo.reset()
        torch.manual_seed(0)
        model, args, _ = factory()
        compiled = torch.compile(model, backend=backend, dynamic=dynamic)
        with captured_warnings() as warned:
            compiled(*args).backward()
    assert not warned, warned
    assert fxremat.last_reports()
    torch.testing.assert_close(model.w.grad, expected["grad w"], **tol)


def test_extract_moves_symbolic_values_out_of_saved_tensors(monkeypatch):
    """Whatever the saved set holds, torch's extraction gets symbolic values only in the symbolic
    list (a SymInt among the saved tensors fails at runtime: "expected all
    tensors_saved_with_vc_check to be Tensors")."""
    calls = []
    original = _torch._extract_fwd_bwd_modules

    def spy(joint, saved_values, saved_sym_nodes, *args, **kwargs):
        calls.append(([n.name for n in saved_values if _torch.is_sym_node(n)], [n.name for n in saved_sym_nodes]))
        return original(joint, saved_values, saved_sym_nodes, *args, **kwargs)

    monkeypatch.setattr(_torch, "_extract_fwd_bwd_modules", spy)
    import torch._dynamo.config as dynamo_config

    x, w, i = torch.randn(8, 8), torch.randn(8, 8, requires_grad=True), torch.tensor([2, 3])
    with dynamo_config.patch(capture_scalar_outputs=True):
        torch.compile(_item_of_input_view, backend=EAGER_BACKEND())(x, w, i).backward()
    assert calls
    for syms_among_tensors, sym_list in calls:
        assert not syms_among_tensors
    assert any(sym_list for _, sym_list in calls)
