"""End to end: every ZOO model trained through fxremat's backend computes what eager computes.

One training step is forward, a scalar loss (the sum of ``.float().sum()`` of every floating output
that requires grad), backward.  After each step we compare outputs, loss, every parameter grad,
every input grad, every buffer (BatchNorm running statistics) and every input (in-place input
mutations), and we run two steps in a row, the second on fresh input values, so stale saved or
recomputed activations would show.

Tolerances, measured on torch 2.13 CPU:

* fxremat vs eager: ``rtol=atol=1e-5``.  Not exact: the compile path decomposes batch norm (as
  Inductor does), so BN models differ from eager's fused kernel in the last bits (grads up to
  ~2e-6 abs on resnet_bn, running_var ~6e-8).  The models without batch norm match exactly.
* fxremat vs PyTorch's min-cut partitioner through the same pipeline
  (``min_cut_backend(compiler="eager")``): exact (``rtol=atol=0``).  Partitioning only decides which
  joint-graph values are saved and which are recomputed; both pairs run the same aten ops on the
  same values, and CPU kernels are deterministic, so a recomputed value is bitwise equal to the
  saved one.  Any difference is a wrong plan, not rounding.
* dropout vs eager: exact, with the RNG seeded identically before both forwards; a random op the
  backward recomputes replays the forward's generator state (checked on the backward graph too).
* real Inductor (marked ``inductor``): no further from eager than Inductor with its default
  partitioner on the same model, ``dev(fxremat) <= max(2 * dev(default), 1e-5)``.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Callable

import pytest
import torch
import torch._dynamo
import torch._inductor.config as inductor_config
import torch.nn as nn
import torch.nn.functional as F
from helpers import RecordingPartitioner, loss_of
from zoo import ZOO, GPTBlock, ZooCase

import fxremat
from fxremat import FxrematPartitioner, Options, _torch
from fxremat.backend import min_cut_backend

pytestmark = pytest.mark.usefixtures("fresh_compile")

VS_EAGER = dict(rtol=1e-5, atol=1e-5)
EXACT = dict(rtol=0.0, atol=0.0)
ZOO_NAMES = list(ZOO)
STEP_SEEDS = (1234, 5678)  # RNG seed set right before each step's forward (dropout masks)
EAGER = None  # as a reference "backend": run the module itself


# ------------------------------------------------------------------------------------ helpers


class CountingBackend:
    """A torch.compile backend that counts Dynamo graphs (compiles and recompiles)."""

    def __init__(self, backend: Callable) -> None:
        self.backend = backend
        self.frames = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        self.frames += 1
        return self.backend(gm, example_inputs)


def clone_inputs(inputs: tuple) -> tuple:
    """Independent copies (leaves, same requires_grad), so in-place mutations stay separate."""
    out = []
    for t in inputs:
        c = t.detach().clone()
        c.requires_grad_(t.requires_grad)
        out.append(c)
    return tuple(out)


def new_values(inputs: tuple, seed: int) -> tuple:
    """Inputs of the same shapes and dtypes with other values (integer inputs keep their range)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in inputs:
        if t.is_floating_point():
            c = torch.randn(t.shape, generator=g, dtype=t.dtype)
        else:
            c = torch.randint(0, int(t.max()) + 1, t.shape, generator=g, dtype=t.dtype)
        c.requires_grad_(t.requires_grad)
        out.append(c)
    return tuple(out)


@dataclasses.dataclass
class StepResult:
    outputs: list[torch.Tensor]
    loss: torch.Tensor
    param_grads: dict[str, torch.Tensor | None]
    input_grads: list[torch.Tensor | None]
    buffers: dict[str, torch.Tensor]
    inputs_after: list[torch.Tensor]  # input values after the step: in-place mutations show here
    rng_after: torch.Tensor  # CPU RNG state after the step: a recomputed random op would advance it


def train_step(fn: Callable, module: nn.Module, inputs: tuple, seed: int) -> StepResult:
    """One step of ``fn`` (``module`` itself or its compiled wrapper); ``module`` owns the state."""
    module.zero_grad(set_to_none=True)
    for t in inputs:
        t.grad = None
    torch.manual_seed(seed)
    out = fn(*inputs)
    loss = loss_of(out)
    loss.backward()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return StepResult(
        outputs=[o.detach().clone() for o in outs],
        loss=loss.detach().clone(),
        param_grads={n: None if p.grad is None else p.grad.clone() for n, p in module.named_parameters()},
        input_grads=[None if t.grad is None else t.grad.clone() for t in inputs],
        buffers={n: b.detach().clone() for n, b in module.named_buffers()},
        inputs_after=[t.detach().clone() for t in inputs],
        rng_after=torch.get_rng_state(),
    )


def assert_same(actual: StepResult, expected: StepResult, what: str, **tol: float) -> None:
    def close(a, b, msg):
        assert (a is None) == (b is None), f"{what}: {msg}: {a is None=} {b is None=}"
        if a is not None:
            torch.testing.assert_close(a, b, **tol, msg=lambda m: f"{what}: {msg}\n{m}")

    assert len(actual.outputs) == len(expected.outputs), what
    for i, (a, b) in enumerate(zip(actual.outputs, expected.outputs)):
        close(a, b, f"output {i}")
    close(actual.loss, expected.loss, "loss")
    assert actual.param_grads.keys() == expected.param_grads.keys(), what
    for name in expected.param_grads:
        close(actual.param_grads[name], expected.param_grads[name], f"grad of parameter {name}")
    for i, (a, b) in enumerate(zip(actual.input_grads, expected.input_grads)):
        close(a, b, f"grad of input {i}")
    assert actual.buffers.keys() == expected.buffers.keys(), what
    for name in expected.buffers:
        close(actual.buffers[name], expected.buffers[name], f"buffer {name} after the step")
    for i, (a, b) in enumerate(zip(actual.inputs_after, expected.inputs_after)):
        close(a, b, f"input {i} after the step")
    assert torch.equal(actual.rng_after, expected.rng_after), f"{what}: RNG consumed differently"


def mark_dynamic(case: ZooCase, inputs: tuple) -> None:
    for idx, dim in case.dynamic_dims:
        torch._dynamo.mark_dynamic(inputs[idx], dim)


class MissingReport(AssertionError):
    """fxremat left no PartitionReport: planning failed and fell back to PyTorch's partitioner."""


SAFETY_OVERRIDE = "min-cut would recompute"  # report.reason when min-cut's pair is unsafe to run


def check_reports(reports: list[fxremat.PartitionReport], what: str) -> None:
    """fxremat reported on every graph and never predicts more memory than min-cut.

    The one exception is the safety override: when min-cut's backward would recompute a node that
    must not be recomputed, fxremat's pair is chosen whatever its peak.
    """
    if not reports:
        raise MissingReport(f"{what}: no PartitionReport: fxremat fell back to min-cut (see its warning)")
    for r in reports:
        assert r.chosen in ("fxremat", "min-cut"), r.chosen
        if r.chosen == "fxremat":
            assert r.fxremat is not None
            if r.reason.startswith(SAFETY_OVERRIDE) or r.fragment:  # a fragment weighs held bytes too (test_fragments)
                continue
            assert r.fxremat.peak_bytes < r.min_cut.peak_bytes, (what, r.reason, r.fxremat.peak_bytes,
                                                                 r.min_cut.peak_bytes)
        assert r.fragment or r.predicted_peak_bytes <= r.min_cut.peak_bytes, (what, r.predicted_peak_bytes, r.min_cut.peak_bytes)


def compare_two_steps(
    make_case: Callable[[], ZooCase], backend: Callable, references: dict[str, tuple[Callable | None, dict]],
    what: str,
) -> CountingBackend:
    """Train identical copies for two steps, one through ``backend`` and one per reference (eager,
    or another backend), and compare each reference with the first after each step at the
    reference's tolerance."""
    case = make_case()
    counting = CountingBackend(backend)
    runs = [("under test", case, torch.compile(case.model, backend=counting), {})]
    for ref_name, (ref_backend, tol) in references.items():
        ref = make_case()
        fn = ref.model if ref_backend is EAGER else torch.compile(ref.model, backend=ref_backend)
        runs.append((ref_name, ref, fn, tol))
    inputs = [clone_inputs(c.inputs) for _, c, _, _ in runs]
    for (_, c, fn, _), ins in zip(runs, inputs):
        if fn is not c.model:
            mark_dynamic(c, ins)
    for step, seed in enumerate(STEP_SEEDS):
        if step:  # fresh values: a stale activation from step 0 would now give wrong grads
            fresh = new_values(case.inputs, seed)
            inputs = [clone_inputs(fresh) for _ in runs]
        results = [train_step(fn, c.model, ins, seed) for (_, c, fn, _), ins in zip(runs, inputs)]
        for (ref_name, _, _, tol), expected in zip(runs[1:], results[1:]):
            assert_same(results[0], expected, f"{what} vs {ref_name}, step {step}", **tol)
    return counting


def references() -> dict[str, tuple[Callable | None, dict]]:
    return {"eager": (EAGER, VS_EAGER), "min-cut": (min_cut_backend(compiler="eager"), EXACT)}


# ------------------------------------------------------------------- fxremat (no Inductor)


@pytest.mark.parametrize("name", ZOO_NAMES)
def test_matches_eager_and_min_cut(name: str) -> None:
    counting = compare_two_steps(ZOO[name], fxremat.make_backend(compiler="eager"), references(), f"{name}: fxremat")
    assert counting.frames == 1, f"{name}: {counting.frames} Dynamo graphs (graph break or recompile)"
    check_reports(fxremat.last_reports(), name)


@pytest.mark.parametrize("name", ["mlp", "multi_output", "unet", "densenet"])
def test_input_grads(name: str) -> None:
    """The first input requires grad, so the backward also returns an input gradient."""

    def make() -> ZooCase:
        case = ZOO[name]()
        x = case.inputs[0].detach().clone().requires_grad_(True)
        return dataclasses.replace(case, inputs=(x, *case.inputs[1:]))

    compare_two_steps(make, fxremat.make_backend(compiler="eager"), references(), f"{name} with input grads")
    check_reports(fxremat.last_reports(), name)


# ------------------------------------------------------------------------------- randomness


def random_ops_in(gm: torch.fx.GraphModule) -> list[str]:
    """Nodes of ``gm`` that draw random numbers (aten's ``nondeterministic_seeded`` tag, except
    ops whose dropout probability is literally 0, such as SDPA without dropout: ``_torch.is_random``)."""
    return [f"{n.name}: {n.target}" for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and _torch.is_random(n)]


class DropoutGPT(nn.Module):
    """GPT blocks with dropout on every block output: deep enough that fxremat's plan (not
    min-cut's) is chosen and recomputes segments between the dropouts."""

    def __init__(self, layers: int = 4, d: int = 128, heads: int = 4, p: float = 0.1) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for blk in self.blocks:
            x = F.dropout(blk(x), self.p, self.training)
        return x


def make_dropout_gpt(seed: int = 0) -> ZooCase:
    torch.manual_seed(seed)
    return ZooCase("dropout_gpt", DropoutGPT(), (torch.randn(4, 64, 128),), uses_dropout=True)


@pytest.mark.parametrize("make", [ZOO["dropout_mlp"], make_dropout_gpt], ids=["dropout_mlp", "dropout_gpt"])
def test_dropout_exact(make: Callable[[], ZooCase]) -> None:
    """Same seed, same masks: outputs and grads equal eager's bit for bit, and the RNG ends in the
    same state, because a random op the backward recomputes replays the forward's generator state
    (``run_with_rng_state``); no random op runs bare in the backward."""
    be = fxremat.make_backend(compiler="eager")
    recording = RecordingPartitioner(be.partitioner)
    be.partitioner = recording
    compare_two_steps(make, be, {"eager": (EAGER, EXACT)}, "dropout: fxremat")
    assert recording.calls
    for fw, bw, *_ in recording.calls:
        assert any("native_dropout" in op for op in random_ops_in(fw)), "the forward samples the masks"
        assert not random_ops_in(bw), f"the backward recomputes random ops: {random_ops_in(bw)}"
    reports = fxremat.last_reports()
    check_reports(reports, "dropout")
    if make is make_dropout_gpt:  # here fxremat's own plan (with recomputation) is the one run
        assert [r.chosen for r in reports] == ["fxremat"], [r.reason for r in reports]
        assert reports[0].plan is not None and reports[0].plan.checkpoints
        replayed = [n for call in recording.calls for n in call.bw.graph.nodes if "run_with_rng_state" in str(n.target)]
        assert replayed, "the backward recomputes no dropout: every mask was saved"
    # Not vacuous: the step depends on the seed, i.e. dropout is really active.
    case = make()
    a = train_step(case.model, case.model, clone_inputs(case.inputs), seed=1)
    b = train_step(case.model, case.model, clone_inputs(case.inputs), seed=2)
    assert not torch.equal(a.outputs[0], b.outputs[0])


# With torch._inductor.config.fallback_random=True, FX's dead-code elimination keeps dead random
# ops (native_dropout; SDPA) in the backward torch extracts; fxremat must drop them (rerunning them
# would advance the RNG) and still plan the graph (it once fell back to min-cut here).


@pytest.mark.parametrize("name", ["transformer", "dropout_gpt", "resnet_bn"])
def test_fallback_random_keeps_fxremat_plan(name: str) -> None:
    """Inductor's ``fallback_random`` (eager's RNG, for bitwise parity) must not disable fxremat.
    The no-Inductor path shows the bug as well, without Inductor's compile time."""
    make = make_dropout_gpt if name == "dropout_gpt" else ZOO[name]
    with inductor_config.patch(fallback_random=True):
        compare_two_steps(make, fxremat.make_backend(compiler="eager"), {"eager": (EAGER, VS_EAGER)},
                          f"{name} with fallback_random")
    check_reports(fxremat.last_reports(), f"{name} with fallback_random")


# ----------------------------------------------------------------------------- dynamic shapes


def test_dynamic_batch_no_recompile() -> None:
    case, ref = ZOO["dynamic_batch"](), ZOO["dynamic_batch"]()
    assert case.dynamic_dims
    counting = CountingBackend(fxremat.make_backend(compiler="eager"))
    compiled = torch.compile(case.model, backend=counting)
    inputs = clone_inputs(case.inputs)
    mark_dynamic(case, inputs)
    batches = [inputs[0].shape[0], 16, 7]
    for step, batch in enumerate(batches):
        if step:
            fresh = new_values(tuple(t.new_zeros(batch, *t.shape[1:]) for t in case.inputs), seed=step)
            inputs = clone_inputs(fresh)
        expected = train_step(ref.model, ref.model, clone_inputs(inputs), seed=step)
        actual = train_step(compiled, case.model, inputs, seed=step)
        assert actual.outputs[0].shape[0] == batch
        assert_same(actual, expected, f"dynamic_batch, batch {batch}", **VS_EAGER)
        assert counting.frames == 1, f"recompiled at batch {batch}: {counting.frames} compiles"
    reports = fxremat.last_reports()
    assert len(reports) == 1, "one graph, partitioned once, serves every batch size"
    check_reports(reports, "dynamic_batch")


# ---------------------------------------------------------------------------------- solvers


class BothSolvers(FxrematPartitioner):
    """Partitions every joint graph with the ``dp`` solver (on a copy) and then with ``linear``,
    keeping both reports: one Dynamo/AOTAutograd trace per model instead of one per solver."""

    def __init__(self) -> None:
        super().__init__(Options("linear"))
        self.reports: dict[str, list[fxremat.PartitionReport]] = {"dp": [], "linear": []}

    def __call__(self, gm, joint_inputs, **kwargs):
        for solver in ("dp", "linear"):
            fxremat.last_reports(clear=True)
            joint = copy.deepcopy(gm) if solver == "dp" else gm
            pair = fxremat.partition(joint, joint_inputs, options=Options(solver), **kwargs)
            self.reports[solver].append(fxremat.last_reports()[-1])
        return pair


@pytest.mark.parametrize("name", ZOO_NAMES)
def test_dp_and_linear_solvers_agree(name: str) -> None:
    be = fxremat.make_backend(compiler="eager")
    be.partitioner = both = BothSolvers()
    case = ZOO[name]()
    inputs = clone_inputs(case.inputs)
    mark_dynamic(case, inputs)
    torch.compile(case.model, backend=be)(*inputs)  # AOTAutograd partitions while building the forward
    assert both.reports["linear"], name
    dp = [(r.plan, r.chosen, r.saved) for r in both.reports["dp"]]
    linear = [(r.plan, r.chosen, r.saved) for r in both.reports["linear"]]
    assert dp == linear, name


# --------------------------------------------------------------------------------- Inductor


def _deviation(actual: StepResult, expected: StepResult) -> float:
    """Largest error over everything compared, each tensor's error relative to its own scale."""
    pairs = [(actual.loss, expected.loss), *zip(actual.outputs, expected.outputs)]
    pairs += [(actual.param_grads[n], g) for n, g in expected.param_grads.items()]
    pairs += list(zip(actual.buffers.values(), expected.buffers.values()))
    dev = 0.0
    for a, b in pairs:
        assert (a is None) == (b is None)
        if a is None:
            continue
        a, b = a.double(), b.double()
        dev = max(dev, ((a - b).abs().max() / b.abs().max().clamp(min=1.0)).item())
    return dev


@pytest.mark.inductor
@pytest.mark.parametrize("name", ["mlp", "transformer", "dropout_mlp"])
def test_inductor_matches_eager(name: str) -> None:
    """fxremat + Inductor is no further from eager than Inductor with its default partitioner.
    Dropout models run with ``fallback_random=True`` so that Inductor draws eager's masks."""
    uses_dropout = ZOO[name]().uses_dropout
    with inductor_config.patch(fallback_random=uses_dropout):
        ref, default_case, fx_case = ZOO[name](), ZOO[name](), ZOO[name]()
        seed = STEP_SEEDS[0]
        expected = train_step(ref.model, ref.model, clone_inputs(ref.inputs), seed)
        default = train_step(torch.compile(default_case.model), default_case.model,
                             clone_inputs(default_case.inputs), seed)
        torch._dynamo.reset()
        fxremat.last_reports(clear=True)
        compiled = torch.compile(fx_case.model, backend=fxremat.make_backend(compiler="inductor"))
        actual = train_step(compiled, fx_case.model, clone_inputs(fx_case.inputs), seed)
        reports = fxremat.last_reports()
    dev_default, dev_fx = _deviation(default, expected), _deviation(actual, expected)
    assert dev_fx <= max(2 * dev_default, 1e-5), f"{name}: fxremat {dev_fx:.3g} vs default {dev_default:.3g}"
    if uses_dropout:  # masks equal eager's, or the deviation would be O(1)
        assert dev_default <= 1e-4 and dev_fx <= 1e-4, (dev_default, dev_fx)
    check_reports(reports, f"{name} (inductor)")
