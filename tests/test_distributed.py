"""Distributed training: fxremat under DDP, FSDP2 and functional collectives, two CPU ranks on gloo.

Each test spawns two processes (``torch.multiprocessing.spawn``, a ``FileStore`` in ``tmp_path``),
builds the same seeded model on both ranks (an input projection, four residual blocks, a head),
feeds each rank its own data, and trains two steps (forward, backward, SGD step; the second step's
gradients are kept) three ways in the same process group: eager PyTorch, PyTorch's min-cut
partitioner (``min_cut_backend(compiler="eager")``) and fxremat (``make_backend(compiler="eager")``).
The ranks save what they saw into ``tmp_path``; the assertions run in the test process.

* ``ddp``: ``DistributedDataParallel(bucket_cap_mb=1)`` compiled whole.  Dynamo's DDPOptimizer
  (``torch._dynamo.config.optimize_ddp``, on by default) splits the graph at bucket boundaries:
  three graphs here (one with ``optimize_ddp=False``), each planned on its own.  DDP's all-reduce
  runs in its C++ reducer's autograd hooks, outside every graph.
* ``fsdp2_whole`` / ``fsdp2_per_block``: ``fully_shard`` on every block, then on the root.  Whole:
  ``torch.compile(model)``.  FSDP2's hooks are ``torch._dynamo.disable``-d, so Dynamo breaks the
  graph at each block; the break being inside the root's loop, the root's frame runs eagerly and
  each block's forward is compiled as its own frame.  Per block: torchtitan's recipe,
  ``torch.compile(block, fullgraph=True)`` on each block before ``fully_shard``.  Either way the
  four blocks share one graph, and the all-gathers and reduce-scatters run in the hooks, between
  graphs.  One Inductor case (``fsdp2_per_block_inductor``, ``rtol=atol=1e-4``).
* ``funcol``: sequence-parallel blocks that all-gather the sequence shards and reduce-scatter the
  result with autograd-aware functional collectives, so ``_c10d_functional`` ops (all-gather,
  reduce-scatter, ``wait_tensor``) sit inside the joint graph fxremat partitions, and its plan
  recomputes the MLPs that read their results (asserted).  ``funcol_unbanned`` is the control:
  with fxremat's recompute ban on collectives patched away, the same plan recomputes all-gathers,
  and the check sees it.

Checked on every rank: fxremat's losses and gradients equal min-cut's exactly (partitioning only
chooses saved vs recomputed values; CPU kernels and a two-rank gloo sum are deterministic) and
eager's to ``rtol=atol=1e-5``; every collective of each joint graph fxremat planned runs exactly
once, in joint-graph order: in the forward if it is a forward node, else in the backward (none is
recomputed); both ranks ran the same plans.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch
import torch.distributed as dist
import torch.fx as fx
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

from fxremat._torch import CustomPartitionerFn

WORLD = 2
TIMEOUT_S = 120  # per spawn; a deadlocked collective fails the test instead of hanging it
COLLECTIVE_NAMESPACES = frozenset({"_c10d_functional", "_c10d_functional_autograd", "c10d"})
COLLECTIVE_NAMES = ("all_reduce", "all_gather", "reduce_scatter", "wait_tensor", "all_to_all", "broadcast")

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="needs gloo")


# --- models -------------------------------------------------------------------------------------


class MLP(nn.Module):
    """Pre-norm residual MLP: ``x + fc2(gelu(fc1(norm(x))))``."""

    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Block(nn.Module):
    """Two residual MLPs: the unit DDP buckets and FSDP2 shards."""

    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.a, self.b = MLP(d, h), MLP(d, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


class SPBlock(nn.Module):
    """Sequence parallel: the local token shard is normed, all-gathered (dim 0), run through the
    MLP on every rank, and reduce-scattered back (the sum over ranks, divided by their number)."""

    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed._functional_collectives as funcol

        group = dist.group.WORLD
        full = funcol.all_gather_tensor_autograd(self.norm(x), 0, group)
        y = self.fc2(F.gelu(self.fc1(full)))
        return x + funcol.reduce_scatter_tensor_autograd(y, "sum", 0, group) / dist.get_world_size()


class Net(nn.Module):
    def __init__(self, block: type[nn.Module], n: int, d: int, h: int) -> None:
        super().__init__()
        self.embed = nn.Linear(d, d)  # every block's input then requires grad: one graph signature
        self.blocks = nn.ModuleList(block(d, h) for _ in range(n))
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x).mean()


# (block, blocks, d, h, tokens per rank): activations large enough against the weights that
# fxremat's own plan wins on some graphs; DDP's blocks hold ~0.5 MiB each so that 1 MiB buckets split.
SIZES = {
    "ddp": (Block, 4, 128, 256, 1024),
    "fsdp2_whole": (Block, 4, 64, 256, 1024),
    "fsdp2_per_block": (Block, 4, 64, 256, 1024),
    "funcol": (SPBlock, 4, 64, 256, 2048),
}
SIZES["funcol_unbanned"] = SIZES["funcol"]
SIZES["fsdp2_per_block_inductor"] = SIZES["fsdp2_per_block"]


# --- what runs on each rank ---------------------------------------------------------------------


def _is_collective(node: fx.Node) -> bool:
    if node.op != "call_function":
        return False
    target = node.target
    if isinstance(target, torch._ops.OpOverload) and target.namespace in COLLECTIVE_NAMESPACES:
        return True
    name = getattr(target, "__name__", str(target))
    return any(c in name for c in COLLECTIVE_NAMES)


class CollectiveRecorder(CustomPartitionerFn or object):
    """Wraps a partition function and records, per joint graph, the names of its collective nodes
    and of those in the forward and backward graphs it returned (extraction keeps node names).
    A ``CustomPartitionerFn`` (Inductor accepts no other) with the inner one's cache identity."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = []

    def __call__(self, joint: fx.GraphModule, joint_inputs: Any, **kwargs: Any):
        collectives = [n.name for n in joint.graph.nodes if _is_collective(n)]
        fw, bw = self.inner(joint, joint_inputs, **kwargs)
        self.calls.append({
            "joint": collectives,
            "fw": [n.name for n in fw.graph.nodes if _is_collective(n)],
            "bw": [n.name for n in bw.graph.nodes if _is_collective(n)],
            "recomputed_from_collective": _recomputed_from_collective(fw, bw),
        })
        return fw, bw

    def uuid(self) -> Any:
        return self.inner.uuid()


def _recomputed_from_collective(fw: fx.GraphModule, bw: fx.GraphModule) -> list[str]:
    """Forward nodes the backward recomputes from a saved output of a forward collective
    (directly or through other recomputed nodes)."""
    fw_calls = {n.name for n in fw.graph.nodes if n.op == "call_function"}
    fw_collectives = {n.name for n in fw.graph.nodes if _is_collective(n)}
    downstream: set[fx.Node] = set()
    for n in bw.graph.nodes:  # topological order
        if n.op == "call_function" and n.name in fw_calls and any(
            a in downstream or (a.op == "placeholder" and a.name in fw_collectives) for a in n.all_input_nodes
        ):
            downstream.add(n)
    return sorted(n.name for n in downstream)


def _build(scenario: str, backend: Any) -> tuple[nn.Module, Any]:
    """The wrapped model (parameters owned by it) and the callable that runs a step's forward."""
    block, n, d, h, _ = SIZES[scenario]
    torch.manual_seed(0)  # identical weights on both ranks
    model = Net(block, n, d, h)
    if scenario == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, bucket_cap_mb=1)
        return model, model if backend is None else torch.compile(model, backend=backend)
    if scenario.startswith("fsdp2"):
        from torch.distributed.fsdp import fully_shard

        if scenario.startswith("fsdp2_per_block") and backend is not None:
            for i, blk in enumerate(model.blocks):
                model.blocks[i] = torch.compile(blk, backend=backend, fullgraph=True)
        for blk in model.blocks:
            fully_shard(blk)
        fully_shard(model)
        if scenario == "fsdp2_whole" and backend is not None:
            return model, torch.compile(model, backend=backend)
        return model, model
    return model, model if backend is None else torch.compile(model, backend=backend, fullgraph=True)


def _train(scenario: str, name: str) -> dict[str, Any]:
    import torch._dynamo

    import fxremat

    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
    recorder = None
    backend = None
    if name != "eager":
        compiler = "inductor" if scenario.endswith("_inductor") else "eager"
        backend = fxremat.make_backend(compiler=compiler) if name == "fxremat" else fxremat.min_cut_backend(compiler=compiler)
        recorder = backend.partitioner = CollectiveRecorder(backend.partitioner)
    model, run = _build(scenario, backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    tokens = SIZES[scenario][4]
    d = SIZES[scenario][2]
    rank = dist.get_rank()
    losses = []
    start = time.perf_counter()
    for step in range(2):
        gen = torch.Generator().manual_seed(1000 + 10 * rank + step)  # different data per rank
        x = torch.randn(tokens // 64, 64, d, generator=gen)
        opt.zero_grad(set_to_none=True)
        loss = run(x)
        loss.backward()
        if scenario.startswith("funcol"):  # replicated parameters, partial gradients: sum them
            for p in model.parameters():
                dist.all_reduce(p.grad)
        losses.append(loss.detach().clone())
        if step == 0:
            opt.step()
    seconds = time.perf_counter() - start
    grads = {}
    for pname, p in model.named_parameters():
        g = p.grad
        grads[pname.replace("_orig_mod.", "")] = (g.to_local() if hasattr(g, "to_local") else g).detach().clone()
    reports = [(r.chosen, r.reason, r.stages, r.plan.checkpoints if r.plan else ()) for r in fxremat.last_reports()]
    return {
        "losses": losses,
        "grads": grads,
        "calls": recorder.calls if recorder else [],
        "reports": reports if name == "fxremat" else [],
        "seconds": seconds,
    }


@contextlib.contextmanager
def _unbanned(active: bool):
    """The check's control: fxremat's analysis with collectives allowed to be recomputed."""
    if not active:
        yield
        return
    import fxremat.analysis

    original = fxremat.analysis._recompute_ban

    def ban(node: fx.Node, *args: Any) -> str | None:
        return None if _is_collective(node) else original(node, *args)

    with mock.patch.object(fxremat.analysis, "_recompute_ban", ban):
        yield


def _worker(rank: int, scenario: str, store: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD,
        timeout=datetime.timedelta(seconds=TIMEOUT_S),
    )
    try:
        from fxremat import _torch

        with _torch.caches_disabled(), _unbanned(scenario == "funcol_unbanned"):  # a cache hit would skip the partitioner
            names = ("fxremat",) if scenario == "funcol_unbanned" else ("eager", "min-cut", "fxremat")
            results = {name: _train(scenario, name) for name in names}
        torch.save(results, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _spawn(scenario: str, tmp_path: Path) -> list[dict[str, Any]]:
    """Run ``scenario`` on two ranks; the results of each rank (raises a rank's exception)."""
    ctx = mp.spawn(_worker, args=(scenario, str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD, join=False)
    deadline = time.monotonic() + TIMEOUT_S + 30
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            pytest.fail(f"{scenario}: the ranks did not finish within {TIMEOUT_S + 30} s")
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


# --- the tests ----------------------------------------------------------------------------------


def _check(scenario: str, results: list[dict[str, Any]]) -> None:
    """fxremat equals min-cut (exactly without Inductor) and eager; no collective is recomputed."""
    exact = 0 if not scenario.endswith("_inductor") else 1e-4
    near = 1e-5 if not scenario.endswith("_inductor") else 1e-4
    for rank, res in enumerate(results):
        ours, mc, eager = res["fxremat"], res["min-cut"], res["eager"]
        where = f"{scenario}, rank {rank}"
        assert ours["calls"] and mc["calls"], f"{where}: no graph was partitioned"
        assert len(ours["calls"]) == len(mc["calls"]), where
        for a, b in zip(ours["losses"], mc["losses"]):
            torch.testing.assert_close(a, b, rtol=exact, atol=exact, msg=lambda m: f"{where}: loss vs min-cut: {m}")
        for a, b in zip(ours["losses"], eager["losses"]):
            torch.testing.assert_close(a, b, rtol=near, atol=near, msg=lambda m: f"{where}: loss vs eager: {m}")
        assert ours["grads"].keys() == mc["grads"].keys() == eager["grads"].keys()
        for pname, g in ours["grads"].items():
            torch.testing.assert_close(g, mc["grads"][pname], rtol=exact, atol=exact,
                                       msg=lambda m: f"{where}: grad of {pname} vs min-cut: {m}")
            torch.testing.assert_close(g, eager["grads"][pname], rtol=near, atol=near,
                                       msg=lambda m: f"{where}: grad of {pname} vs eager: {m}")
        for i, call in enumerate(ours["calls"]):
            recomputed = sorted(set(call["fw"]) & set(call["bw"]))
            assert not recomputed, f"{where}: graph {i}: the backward recomputes collectives {recomputed}"
            # Each runs once, and in the joint graph's order: the plan does not change the sequence
            # of collectives a rank issues (the forward keeps joint order, the backward's schedule
            # keeps its nodes' relative order), so ranks cannot disagree on it.
            assert call["fw"] + call["bw"] == call["joint"], (
                f"{where}: graph {i}: collectives of the joint graph {call['joint']} vs forward {call['fw']} "
                f"+ backward {call['bw']}"
            )
    # Same graphs and shapes on every rank: the same plans (fxremat does not synchronize them).
    plans = [res["fxremat"]["reports"] for res in results]
    assert all(p == plans[0] for p in plans), plans


def _own_plan_ran(res: dict[str, Any]) -> bool:
    return any(chosen == "fxremat" and checkpoints for chosen, _, _, checkpoints in res["fxremat"]["reports"])


def test_ddp(tmp_path: Path) -> None:
    """DDP compiled whole: DDPOptimizer splits the graph at bucket boundaries; fxremat plans each."""
    results = _spawn("ddp", tmp_path)
    _check("ddp", results)
    for res in results:
        calls = res["fxremat"]["calls"]
        # ~2.1 MiB of parameters in 1 MiB buckets: three graphs on torch 2.13 (one per bucket).
        assert len(calls) >= 2, res["fxremat"]["reports"]
        assert all(not c["joint"] for c in calls), "DDP's all-reduce runs in its reducer, outside the graphs"
        assert _own_plan_ran(res), f"fxremat's own plan ran nowhere: {res['fxremat']['reports']}"
    # The reducer averaged the gradients: equal on both ranks, whose data (and losses) differ.
    g0, g1 = results[0]["fxremat"]["grads"], results[1]["fxremat"]["grads"]
    for pname in g0:
        torch.testing.assert_close(g0[pname], g1[pname], rtol=0, atol=0)
    assert not torch.equal(results[0]["fxremat"]["losses"][0], results[1]["fxremat"]["losses"][0])


@pytest.mark.parametrize("scenario", ["fsdp2_whole", "fsdp2_per_block"])
def test_fsdp2(scenario: str, tmp_path: Path) -> None:
    """FSDP2 (``fully_shard`` per block, then the root): each block is its own graph."""
    results = _spawn(scenario, tmp_path)
    _check(scenario, results)
    for res in results:
        calls = res["fxremat"]["calls"]
        # The four blocks share one compiled graph (same code and signature; their parameters
        # are graph inputs).  Whole-model compile: the root's frame falls back to eager at the
        # graph break in its loop, so embed and head are not compiled; per block they never were.
        assert len(calls) == 1, res["fxremat"]["reports"]
        assert all(not c["joint"] for c in calls), "FSDP2's collectives run in its hooks, outside the graphs"
        assert _own_plan_ran(res), f"fxremat's own plan ran nowhere: {res['fxremat']['reports']}"


@pytest.mark.inductor
def test_fsdp2_per_block_inductor(tmp_path: Path) -> None:
    """The torchtitan recipe through Inductor (``rtol=atol=1e-4``, the suite's Inductor tolerance)."""
    results = _spawn("fsdp2_per_block_inductor", tmp_path)
    _check("fsdp2_per_block_inductor", results)
    for res in results:
        assert len(res["fxremat"]["calls"]) == 1, res["fxremat"]["reports"]
        assert _own_plan_ran(res), f"fxremat's own plan ran nowhere: {res['fxremat']['reports']}"


def test_functional_collectives_never_recomputed(tmp_path: Path) -> None:
    """Collectives inside the joint graph: fxremat recomputes around them, never through them."""
    results = _spawn("funcol", tmp_path)
    _check("funcol", results)
    for res in results:
        (call,) = res["fxremat"]["calls"]  # fullgraph=True: one graph
        assert any("all_gather_into_tensor" in n for n in call["fw"]), call
        assert any("reduce_scatter_tensor" in n for n in call["fw"]), call
        assert call["bw"], "the backward of an all-gather is a reduce-scatter (and vice versa)"
        # fxremat's plan ran, and its backward recomputes MLPs from the saved results of
        # collectives: the collectives' outputs were saved, the collectives not rerun.
        ((chosen, reason, stages, checkpoints),) = res["fxremat"]["reports"]
        assert chosen == "fxremat" and checkpoints, (chosen, reason, stages, checkpoints)
        assert any(name.startswith(("addmm", "gelu")) for name in call["recomputed_from_collective"]), call


def test_collective_check_detects_recomputation(tmp_path: Path) -> None:
    """The control: with fxremat's ban on recomputing collectives lifted (a test-only patch of
    ``fxremat.analysis._recompute_ban``), its plan for the same graph does recompute all-gathers in
    the backward, and the check above sees it."""
    results = _spawn("funcol_unbanned", tmp_path)
    for res in results:
        (call,) = res["fxremat"]["calls"]
        recomputed = set(call["fw"]) & set(call["bw"])
        assert any(name.startswith("all_gather_into_tensor") for name in recomputed), call
