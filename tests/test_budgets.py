"""Memory budgets (issue 11, item 5), through the no-Inductor path (fast, exact memory on CPU).

* Best effort: a budget no plan of a graph meets runs that graph's plan of least predicted peak and
  logs one warning per such graph (HF GPT-2 with both attention kinds and HF BERT with dropout at
  ``memory_budget=0.5`` used to fail the whole compile); ``strict_budget=True`` raises
  ``BudgetError`` instead.  Bytes and fractions alike.
* Monotone: a lower budget never predicts a higher peak (every fraction 1.0 ... 0.1 on zoo models
  and the masked encoder, every breakpoint of the solver's curve on the masked encoder), and never
  measures a higher one (eager path, ``fxremat.profiling.measure_peak``).
* The pair that runs, min-cut's included, is never predicted above the solver's plan for the
  budget, nor above min-cut's own pair at ``activation_memory_budget`` = the same fraction.
* torch's global ``activation_memory_budget`` is ignored (min-cut runs at 1.0, one INFO line).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import pytest
import torch
import torch._dynamo
import torch._functorch.config as functorch_config
from helpers import loss_of
from test_linearize import PaddedEncoder, _inputs
from zoo import ZOO

import fxremat
import fxremat.analysis
import fxremat.partitioner
import fxremat.rivals
import fxremat.saved
from fxremat import Options, _torch, make_backend
from fxremat.backend import min_cut_backend
from fxremat.memory import simulate
from fxremat.profiling import peak_of_training_step
from fxremat.report import captured_warnings

pytestmark = pytest.mark.usefixtures("fresh_compile")

FRACTIONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
VS_EAGER = dict(rtol=1e-5, atol=1e-5)
EXACT = dict(rtol=0.0, atol=0.0)


def masked(p: float = 0.1) -> tuple[torch.nn.Module, tuple]:
    torch.manual_seed(0)
    return PaddedEncoder(4, p=p), _inputs()


def zoo(name: str) -> Callable[[], tuple[torch.nn.Module, tuple]]:
    def make():
        case = ZOO[name]()
        return case.model, case.inputs
    return make


MODELS = {"masked_encoder": masked, **{name: zoo(name) for name in ("resnet_bn", "gpt", "transformer", "dropout_mlp")}}


def plan_each(model: torch.nn.Module, inputs: tuple, budgets: Any, planned_for: str | None = None,
              **options: Any) -> dict[Any, fxremat.PartitionReport]:
    """Partition the model's one joint graph once per budget, inside a single trace (AOTAutograd
    calls the partitioner once; it plans every budget there), and return each budget's report.
    ``budgets``: a list, or ``budgets(joint, joint_inputs, kwargs)`` returning one; ``planned_for``:
    the compiler fxremat plans for ("inductor": its fusion and buffer reuse; default, the eager one
    that runs)."""
    reports: dict[Any, fxremat.PartitionReport] = {}

    def partition(joint, joint_inputs, **kwargs):
        for budget in budgets(joint, joint_inputs, kwargs) if callable(budgets) else budgets:
            fxremat.last_reports(clear=True)
            fxremat.partition(joint, joint_inputs, options=Options(memory_budget=budget, **options),
                              **(kwargs if planned_for is None else {**kwargs, "compiler": planned_for}))
            (reports[budget],) = fxremat.last_reports()  # one graph; no report would mean a fallback
        return _torch.min_cut(joint, joint_inputs, **kwargs)

    backend = make_backend(compiler="eager")
    backend.partitioner = partition
    torch.compile(model, backend=backend)(*inputs)
    return reports


def step(model: torch.nn.Module, inputs: tuple, backend: Any = None, seed: int = 0) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    fn = model if backend is None else torch.compile(model, backend=backend)
    torch.manual_seed(seed)
    loss = loss_of(fn(*inputs))
    loss.backward()
    return {"loss": loss.detach(), **{n: p.grad.clone() for n, p in model.named_parameters()}}


def assert_same(actual: dict, expected: dict, **tol: float) -> None:
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], **tol, msg=name)


# --------------------------------------------------------------------------------- monotone


@pytest.mark.parametrize("name", list(MODELS))
def test_lower_budget_never_predicts_a_higher_peak(name):
    model, inputs = MODELS[name]()
    with captured_warnings() as warned:
        reports = plan_each(model, inputs, FRACTIONS)
    peaks = [reports[f].predicted_peak_bytes for f in FRACTIONS]
    assert peaks == sorted(peaks, reverse=True), f"{name}: predicted peaks {dict(zip(FRACTIONS, peaks))}"
    for f in FRACTIONS:
        r = reports[f]
        assert r.budget_bytes is not None and r.budget_met is not None, r
        if r.chosen == "min-cut":  # min-cut's pair runs only where it is no higher than fxremat's
            assert r.min_cut.peak_bytes <= r.fxremat.peak_bytes, (f, r)
    missed = [f for f in FRACTIONS if not reports[f].budget_met]
    assert missed == list(FRACTIONS[len(FRACTIONS) - len(missed):]), f"only the lowest fractions are missed: {missed}"
    assert len(warned) == len(missed), warned  # one warning per graph whose budget no plan meets
    assert peaks[-1] < peaks[0] or name == "dropout_mlp", f"{name}: the sweep never lowered the peak: {peaks}"


@pytest.mark.parametrize("name", ["masked_encoder", "gpt"])
def test_a_met_budget_is_never_beaten_by_the_least_peak_pair_on_both_counts(name):
    """Where a budget is met, the pair that runs is never both higher (replayed peak) and slower
    (the time model's step estimate) than the least-peak pair: that one would run instead."""
    model, inputs = MODELS[name]()
    reports = plan_each(model, inputs, (None, *FRACTIONS))
    least = reports[None]
    assert least.step is not None
    for f in FRACTIONS:
        r = reports[f]
        if not r.budget_met or r.reason.startswith("min-cut's pair"):
            continue
        assert r.step is not None and r.fxremat is not None
        assert r.fxremat.peak_bytes < least.fxremat.peak_bytes or r.step.step_s <= least.step.step_s, (
            f, r.fxremat.peak_bytes, r.step.step_s, least.fxremat.peak_bytes, least.step.step_s)


def test_every_budget_on_the_curve(monkeypatch):
    """At every breakpoint of the solver's curve (the budget equal to a plan's chain peak), the pair
    that runs is predicted no higher than the solver's plan for that budget, and the predictions are
    monotone.  On this model the lowest breakpoint's own plan replays higher than the one before it
    (a gap of the chain model), so a pair whose chain peak is above that budget runs there."""
    curves: list[list[fxremat.Plan]] = []
    memos = []  # the joint graph's memo: the pairs extracted for each plan, by checkpoints
    real_curve = fxremat.partitioner.curve

    def recording_curve(solve, chain):
        curves.append(real_curve(solve, chain))
        return curves[-1]

    monkeypatch.setattr(fxremat.partitioner, "curve", recording_curve)

    def breakpoints(joint, joint_inputs, kwargs):
        fxremat.partition(joint, joint_inputs, options=Options(memory_budget=1.0), **kwargs)  # computes the curve
        memos.append(fxremat.rivals._MEMOS[joint])
        return [p.peak_bytes for p in curves[0]]  # ints: bytes on the chain model

    reports = plan_each(*masked(), breakpoints)
    plans = curves[0]
    assert len(plans) >= 4, plans
    assert all(c == plans for c in curves), "the curve changed between budgets"
    budgets = [p.peak_bytes for p in plans]
    peaks = [reports[b].predicted_peak_bytes for b in budgets]
    assert peaks == sorted(peaks, reverse=True), peaks
    extracted = memos[0].for_layout(False).extracted  # the pairs replayed (no convolution: one layout)
    own = [extracted[("always", p.checkpoints)].timeline.peak_bytes for p in plans]
    for b, own_peak in zip(budgets, own):
        r = reports[b]
        assert r.budget_met and r.budget_bytes == b, r
        assert r.predicted_peak_bytes <= own_peak, (b, r.predicted_peak_bytes, own_peak)
    assert any(reports[b].plan.peak_bytes > b for b in budgets), (
        f"the chain model and the replay agree everywhere on this model; the test no longer shows the "
        f"running minimum: own {own}, chosen {peaks}")


def test_lower_budget_never_measures_a_higher_peak():
    """Eager path, exact CPU allocator peaks: one compile per fraction.  Predicted peaks are
    monotone in the fraction by construction; measured ones only where the predictions differ by
    more than the memory model's error, so the fractions pick plans far apart (at 0.5 this model
    runs min-cut's 0.5 saved set made safe, predicted 3% below 0.85's pair and measured 1.4% above
    it: the replay misses that pair by 4.7%)."""
    fractions = (1.0, 0.85, 0.1)  # the last one no plan meets: best effort
    measured, predicted = [], []
    for f in fractions:
        model, inputs = masked()
        torch._dynamo.reset()
        fxremat.last_reports(clear=True)
        compiled = torch.compile(model, backend=make_backend(memory_budget=f, compiler="eager"))
        with captured_warnings():
            loss_of(compiled(*inputs)).backward()  # compiles (and plans) once
        (report,) = fxremat.last_reports()
        predicted.append(report.predicted_peak_bytes)
        measured.append(peak_of_training_step(compiled, inputs))
    assert predicted == sorted(predicted, reverse=True), predicted
    assert measured == sorted(measured, reverse=True), f"measured {measured}, predicted {predicted}"
    assert len(set(measured)) == len(fractions), f"some fractions share a plan: {measured}"


@pytest.mark.parametrize("name", list(MODELS))
def test_no_higher_than_min_cut_at_the_same_fraction(name):
    """At a fraction ``f``, the pair fxremat runs is predicted no higher than min-cut's pair at
    ``activation_memory_budget=f`` (when that pair may run at all: it recomputes no random op)."""
    model, inputs = MODELS[name]()
    fractions = FRACTIONS[1:]
    rivals: dict[float, int | None] = {}

    def budgets(joint, joint_inputs, kwargs):
        for f in fractions:
            fw, bw = fxremat.rivals.min_cut_pair(joint, joint_inputs, f, **kwargs)  # memoized: planning reuses it
            random = any(_torch.is_random(n) for n in bw.graph.nodes)
            rivals[f] = None if random else simulate(fw, bw, kwargs["num_fwd_outputs"], False).peak_bytes
        return fractions

    with captured_warnings():
        reports = plan_each(model, inputs, budgets)
    for f in fractions:
        if rivals[f] is not None:
            assert reports[f].predicted_peak_bytes <= rivals[f], (name, f, reports[f].predicted_peak_bytes, rivals[f])
    taken = [f for f in fractions if reports[f].reason.startswith("min-cut's")]  # its pair or its saved set made safe
    if name == "masked_encoder":  # min-cut's knob saves less than fxremat's curve there at 0.9 to 0.3
        assert taken, "no min-cut pair was ever the lower: the test shows nothing"


@pytest.mark.parametrize("name", ["masked_encoder", "gpt"])
def test_min_cut_at_the_same_fraction_never_dominates_the_pair_run(name):
    """Issue 12's dominance, predicted: at every fraction some plan meets, no min-cut pair of the
    grid (made safe where it is unsafe), at that fraction, above it or below it, is both predicted
    no higher and estimated clearly faster than the pair fxremat runs there (each is a candidate,
    and the fastest candidate within the budget runs)."""
    model, inputs = MODELS[name]()
    joints = []  # keeps the joint graph, and so its memo of min-cut's pairs, alive

    def budgets(joint, joint_inputs, kwargs):
        joints.append(joint)
        return FRACTIONS[1:]

    reports = plan_each(model, inputs, budgets)
    rivals = fxremat.rivals._MEMOS[joints[0]].for_layout(False).rivals
    assert set(fxremat.rivals.RIVAL_GRID) <= set(rivals), sorted(rivals)  # every grid fraction was a candidate
    checked = []
    for f in FRACTIONS[1:]:
        ours = reports[f]
        if not ours.budget_met:
            continue
        for g, theirs in rivals.items():
            if theirs is None:
                continue
            checked.append((f, g))
            assert not (theirs.timeline.peak_bytes <= ours.predicted_peak_bytes
                        and theirs.step.step_s < fxremat.partitioner.CLEARLY_FASTER * ours.predicted_step_s), (
                f, theirs.reason, theirs.timeline.peak_bytes, theirs.step.step_s, ours.predicted_peak_bytes,
                ours.predicted_step_s)
    assert any(g < f for f, g in checked), "no min-cut pair below a met fraction: the test shows nothing"


def test_min_cut_recomputing_a_random_op_is_a_hazard():
    """A min-cut backward that recomputes dropout (as min-cut does under a low
    ``activation_memory_budget`` through Inductor on HF BERT) draws a fresh mask:
    ``min_cut_hazards`` names it, so such a pair never runs as min-cut built it (its saved set,
    made safe, is the budget candidate: the next test)."""
    found: list[list[str]] = []

    def partition(joint, joint_inputs, **kwargs):
        jg = fxremat.analysis.analyze(joint, num_fwd_outputs=kwargs["num_fwd_outputs"],
                                      static_lifetime_input_indices=kwargs.get("static_lifetime_input_indices"))
        fw, bw = _torch.min_cut(joint, joint_inputs, **kwargs)
        assert not fxremat.saved.min_cut_hazards(fw, bw, jg)  # min-cut's default pair saves the mask
        drop = next(n for n in jg.forward if _torch.is_random(n))
        graph = torch.fx.Graph()
        env = {a: graph.placeholder(a.name) for a in drop.all_input_nodes}
        graph.output((graph.node_copy(drop, env.__getitem__),))  # a backward that recomputes it
        found.append(fxremat.saved.min_cut_hazards(fw, torch.fx.GraphModule({}, graph), jg))
        return fw, bw

    backend = make_backend(compiler="eager")
    backend.partitioner = partition
    model, inputs = MODELS["dropout_mlp"]()
    torch.compile(model, backend=backend)(*inputs)
    assert found and any("would recompute random" in why for why in found[0]), found


def test_an_unsafe_min_cut_pair_runs_made_safe():
    """On the masked encoder with dropout, min-cut's pairs at ``activation_memory_budget`` 0.5-0.7
    recompute dropout without its RNG state (unsafe), yet save less than fxremat's curve plans at
    those fractions.  At ``memory_budget=0.5`` their saved set runs, made safe by fxremat's own
    extraction: the backward replays the forward's dropout (``run_with_rng_state``), no caller
    input is saved that eager does not keep, the peak is min-cut's own pair's within 1% (the
    replay saves generator states), and loss and gradients match eager with the same seed."""
    model, inputs = masked()
    graphs: list[tuple[torch.fx.GraphModule, torch.fx.GraphModule]] = []
    rival: dict[str, int] = {}

    def partition(joint, joint_inputs, **kwargs):
        fw, bw = fxremat.rivals.min_cut_pair(joint, joint_inputs, 0.5, **kwargs)
        jg = fxremat.analysis.analyze(joint, num_fwd_outputs=kwargs["num_fwd_outputs"],
                                      static_lifetime_input_indices=kwargs.get("static_lifetime_input_indices"))
        rival["hazards"] = len(fxremat.saved.min_cut_hazards(fw, bw, jg))
        rival["peak"] = simulate(fw, bw, kwargs["num_fwd_outputs"], False).peak_bytes
        pair = fxremat.partition(joint, joint_inputs, options=Options(memory_budget=0.5), **kwargs)
        graphs.append(pair)
        return pair

    backend = make_backend(compiler="eager")
    backend.partitioner = partition
    expected = step(model, inputs, seed=1)
    fxremat.last_reports(clear=True)
    actual = step(model, inputs, backend, seed=1)
    (report,) = fxremat.last_reports()
    assert report.reason.startswith("min-cut's saved set at activation_memory_budget=0.5, made safe "
                                    "(min-cut would recompute random"), report.reason
    assert rival["hazards"] and report.predicted_peak_bytes <= 1.01 * rival["peak"], (report.predicted_peak_bytes, rival)
    ((fw, bw),) = graphs
    replayed = [n for n in bw.graph.nodes if n.op == "call_function" and "run_with_rng_state" in str(n.target)]
    assert replayed, "the made-safe pair recomputes no dropout: the test shows nothing"
    assert_same(actual, expected, **VS_EAGER)


# ------------------------------------------------------------------------------ best effort


def test_unmet_budget_is_best_effort_with_one_warning():
    model, inputs = masked(p=0.0)
    expected = step(model, inputs)
    reports = plan_each(*masked(p=0.0), [None, 0.01])
    least, unmet = reports[None], reports[0.01]
    assert unmet.budget_met is False and unmet.budget_bytes < unmet.chain_no_recompute_peak // 50
    assert unmet.predicted_peak_bytes <= least.predicted_peak_bytes  # no worse than budget=None
    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
    with captured_warnings() as warned:
        actual = step(model, inputs, make_backend(memory_budget=0.01, compiler="eager"))
    (report,) = fxremat.last_reports()
    assert report.budget_met is False and report.plan == unmet.plan
    assert len(warned) == 1 and "memory_budget=0.01" in warned[0] and "least predicted peak" in warned[0], warned
    assert "strict_budget=True" in warned[0]
    assert_same(actual, expected, **VS_EAGER)


def test_no_budget_is_no_higher_than_an_unmet_budgets_own_plans(monkeypatch):
    """Without a budget the pair run is the least-peak one: an unmet budget's best effort, whose
    candidates include every plan of the activations' curve, finds no lower plan of fxremat's own
    (min-cut's grid pairs, candidates only at a fraction, left out).  Tiny HF T5 with a padded
    mask, planned for Inductor: the activation chain's least-peak plan replays below the whole
    chain's (before 2026-12-05 only a budget below reach ran it: 0.32 MiB against 0.36)."""
    pytest.importorskip("transformers")
    from bench.hf_models import make_hf_case

    monkeypatch.setattr(fxremat.partitioner, "min_cut_rivals", lambda *args, **kwargs: [])
    built = make_hf_case("t5", "tiny", True).build("cpu")
    reports = plan_each(built.module, built.inputs, [None, 0.01], planned_for="inductor")
    least, unmet = reports[None], reports[0.01]
    assert unmet.budget_met is False and least.chosen == unmet.chosen == "fxremat", (least, unmet)
    assert least.predicted_peak_bytes <= unmet.predicted_peak_bytes, (least.predicted_peak_bytes, unmet.predicted_peak_bytes)


@pytest.mark.parametrize("budget", [0.01, 1], ids=["fraction", "bytes"])
def test_strict_budget_raises(budget):
    model, inputs = masked(p=0.0)
    compiled = torch.compile(model, backend=make_backend(memory_budget=budget, compiler="eager", strict_budget=True))
    with pytest.raises(Exception) as info:
        compiled(*inputs)
    error = fxremat.BudgetError.behind(info.value)
    assert error is not None, info.value
    assert f"memory_budget={budget!r}" in str(error) and "the smallest peak any plan reaches is" in str(error)


def test_bytes_budget_is_best_effort_too():
    model, inputs = masked(p=0.0)
    expected = step(model, inputs)
    with captured_warnings() as warned:
        actual = step(model, inputs, make_backend(memory_budget=1, compiler="eager"))
    (report,) = fxremat.last_reports()
    assert report.budget_bytes == 1 and report.budget_met is False
    assert len(warned) == 1 and "memory_budget=1 (1 bytes" in warned[0], warned
    assert_same(actual, expected, **VS_EAGER)


def _hf_lm(kind: str):
    transformers = pytest.importorskip("transformers")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    torch.manual_seed(0)
    if kind == "bert":
        config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=64, max_position_embeddings=32)
        model = transformers.BertForMaskedLM(config).train()  # dropout 0.1 everywhere
    else:
        config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                         bos_token_id=0, eos_token_id=0, attn_implementation=kind)
        model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 64, (2, 16))
    return model, {"input_ids": ids, "labels": ids}


@pytest.mark.parametrize("kind", ["eager", "sdpa", "bert"], ids=["gpt2-eager", "gpt2-sdpa", "bert-dropout"])
def test_hf_models_at_half_budget(kind):
    """The issue's scenario: ``memory_budget=0.5`` on HF GPT-2 (both attention kinds) and BERT with
    dropout, where no plan of some graphs meets the fraction.  Best effort compiles, warns once per
    such graph and matches eager (same seed: BERT's dropout masks are replayed, not redrawn)."""
    def run(backend):
        model, kwargs = _hf_lm(kind)
        fn = model if backend is None else torch.compile(model, backend=backend)
        torch.manual_seed(1)
        loss = fn(**kwargs).loss
        loss.backward()
        return {"loss": loss.detach(), **{n: p.grad for n, p in model.named_parameters() if p.grad is not None}}

    expected = run(None)
    with captured_warnings() as warned:
        actual = run(make_backend(memory_budget=0.5, compiler="eager"))
    reports = fxremat.last_reports()
    unmet = [r for r in reports if r.budget_met is False]
    assert reports and unmet, "every graph met the budget: the scenario is no longer exercised"
    assert len(warned) == len(unmet), warned
    assert_same(actual, expected, **VS_EAGER)


# ---------------------------------------------------------- torch's activation_memory_budget


def test_torch_global_activation_memory_budget_is_ignored(caplog):
    model, inputs = masked(p=0.0)
    expected = step(model, inputs)
    min_cut = step(model, inputs, min_cut_backend(compiler="eager"))
    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
    with caplog.at_level(logging.INFO, logger="fxremat"):
        plain = step(model, inputs, make_backend(compiler="eager"))
    (plain_report,) = fxremat.last_reports(clear=True)
    assert not [m for m in caplog.messages if "activation_memory_budget" in m]

    # Not vacuous: min-cut at 0.5 saves something else than at 1.0 on this graph.
    saved = {}

    def both(joint, joint_inputs, **kwargs):
        for b in (1.0, 0.5):
            with functorch_config.patch(activation_memory_budget=b):
                fw, _ = _torch.min_cut(joint, joint_inputs, **kwargs)
            saved[b] = _torch.saved_names(fw, kwargs["num_fwd_outputs"])
        return _torch.min_cut(joint, joint_inputs, **kwargs)

    probe = make_backend(compiler="eager")
    probe.partitioner = both
    torch._dynamo.reset()
    torch.compile(model, backend=probe)(*inputs)
    assert saved[0.5] != saved[1.0], saved

    torch._dynamo.reset()
    caplog.clear()
    with functorch_config.patch(activation_memory_budget=0.5), caplog.at_level(logging.INFO, logger="fxremat"):
        ours = step(model, inputs, make_backend(compiler="eager"))
        assert functorch_config.activation_memory_budget == 0.5  # left as the user set it
    assert functorch_config.activation_memory_budget == 1.0
    (report,) = fxremat.last_reports()
    ignored = [m for m in caplog.messages if "ignoring torch._functorch.config.activation_memory_budget=0.5" in m]
    assert len(ignored) == 1, caplog.messages
    assert [r.levelno for r in caplog.records if r.getMessage() in ignored] == [logging.INFO]
    # min-cut ran at 1.0: the same comparison and the same plan as without the global budget.
    assert report.min_cut == plain_report.min_cut and report.saved == plain_report.saved
    assert report.plan == plain_report.plan and report.chosen == plain_report.chosen
    assert_same(ours, plain, **EXACT)
    assert_same(ours, min_cut, **EXACT)
    assert_same(ours, expected, **VS_EAGER)


@pytest.mark.parametrize("name", ["resnet_bn", "gpt"])
def test_min_cut_runs_sharing_solves_give_the_same_pairs(name):
    """min-cut at the grid's fractions solves three budget-independent max-flow problems each
    time; fxremat shares them between the runs on one joint graph (``_torch.shared_solves``).
    Every fraction's pair equals an unshared run's, code and saved set, and the shared runs
    solve each repeated problem once."""
    compared: list[float | None] = []
    solves: dict = {}

    def partition(joint, joint_inputs, **kwargs):
        for f in (None, *FRACTIONS[1:]):
            with _torch.activation_memory_budget(f):
                plain = _torch.min_cut(joint, joint_inputs, **kwargs)
                with _torch.shared_solves(solves):
                    shared = _torch.min_cut(joint, joint_inputs, **kwargs)
            for a, b in zip(shared, plain):
                assert a.code == b.code, f
            compared.append(f)
        return _torch.min_cut(joint, joint_inputs, **kwargs)

    backend = make_backend(compiler="eager")
    backend.partitioner = partition
    model, inputs = MODELS[name]()
    torch.compile(model, backend=backend)(*inputs)
    assert compared == [None, *FRACTIONS[1:]]
    # at most the three budget-independent problems plus one knapsack problem per fraction
    assert 1 <= len(solves) <= 3 + len(FRACTIONS) - 1, len(solves)
    before = len(solves)
    # a joint graph of another shape asks other questions: nothing it is answered with is stale
    other, other_inputs = MODELS["dropout_mlp" if name != "dropout_mlp" else "gpt"]()

    def shared(joint, joint_inputs, **kwargs):
        with _torch.shared_solves(solves):
            return _torch.min_cut(joint, joint_inputs, **kwargs)

    backend.partitioner = shared
    torch._dynamo.reset()
    torch.compile(other, backend=backend)(*other_inputs)
    assert len(solves) == before + 1
