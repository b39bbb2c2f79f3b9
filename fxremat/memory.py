"""The liveness-aware memory model: the peak bytes of a forward + backward pair, as it will run.

Invariant: :func:`simulate` replays both graphs node by node, exactly as FX's generated code and
AOTAutograd's boxed runtime execute them: a node's new storages are allocated when it runs, and
a storage is freed right after the last use of the last node that refers to it (views share their
base's storage, so an alias is never counted twice and keeps its base alive).  Nothing is freed
before its last use.  What survives each phase:

* forward inputs (parameters, user inputs) belong to the caller and are never counted;
* forward outputs (user outputs and saved values) survive the forward; user outputs are held by
  the caller through the backward, saved values die at their last backward use, and new values
  of mutated inputs are copied into the inputs and dropped at the hand-over;
* tangents are allocated when the backward starts; gradients (backward outputs) live to the end.

With ``inductor=True`` the replay follows what Inductor allocates instead of FX's one buffer per
node: a value Inductor computes inside its readers' kernels (:mod:`fxremat.fusion`: pointwise,
read only by pointwise ops and reductions, not returned, and not stored on reuse) is never
allocated and keeps its inputs alive as a view would; a matmul read only by an add runs at the add
(Inductor's addmm; :func:`fxremat.lowering.keep_matmuls_in_place` avoids that where it would hold
more than it saves); and a pointwise result takes over the buffer of a same-size input that dies at
it (Inductor's in-place reuse; saved tensors die in the backward and are donated the same way),
as does an index-put's result its first argument when that dies at it (Inductor reinplaces it).
It assumes that Inductor's wrapper-level buffer reuse (``allow_buffer_reuse``) holds a dead
buffer only across a valley of Inductor's estimate, as fxremat's backends compile (``_torch._local_reuse``); under
Inductor's own rule a dead buffer may stay alive until a later allocation of its size, within its
estimate of the whole graph's peak.

Scratch memory that a kernel allocates and frees *inside* one op is added at that op's step for
the few ops where it is as large as an activation (:func:`scratch_bytes`: convolution, its
backward and batch norm's backward, whose CPU kernels reorder their operands; measured on torch
2.13's oneDNN).  It works on any partition (fxremat's or PyTorch's), so both are measured with
the same ruler.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Iterable

import torch
import torch.fx as fx

from . import _torch
from .fusion import fused_values
from .lowering import add_reading

__all__ = ["Timeline", "simulate", "fused_in"]


@dataclass(frozen=True)
class Timeline:
    """Bytes alive while each node runs: its outputs allocated, its inputs not yet freed, plus
    the scratch its kernel uses inside the op (``scratch``, already included)."""

    labels: tuple[str, ...]  # node names, forward then backward
    bytes_alive: tuple[int, ...]
    forward_steps: int  # labels[:forward_steps] are forward nodes
    scratch: tuple[int, ...] = ()  # the part of bytes_alive[i] that is in-kernel scratch

    @property
    def peak_bytes(self) -> int:
        return max(self.bytes_alive, default=0)

    @property
    def peak_step(self) -> int:
        return max(range(len(self.bytes_alive)), key=self.bytes_alive.__getitem__, default=0)

    @property
    def between_ops_peak_bytes(self) -> int:
        """The peak counting tensors only (what is alive between two ops)."""
        scratch = self.scratch or (0,) * len(self.bytes_alive)
        return max((a - s for a, s in zip(self.bytes_alive, scratch)), default=0)


_bytes = _torch.value_nbytes


def scratch_bytes(node: fx.Node) -> int:
    """Bytes a kernel allocates and frees inside the op: operand reorders of CPU convolution
    (input + weight), its backward (grad_output + input + weight) and batch norm's backward
    (one input-sized temporary); 0 for every other op."""
    packet = getattr(node.target, "overloadpacket", None)
    aten = torch.ops.aten
    if packet is aten.convolution:
        return _bytes(node.args[0]) + _bytes(node.args[1])
    if packet is aten.convolution_backward:
        return _bytes(node.args[0]) + _bytes(node.args[1]) + _bytes(node.args[2])
    if packet is aten.native_batch_norm_backward:
        return _bytes(node.args[1])
    return 0


def backward_scratch_bytes(node: fx.Node) -> int:
    """:func:`scratch_bytes` of the backward kernel of forward node ``node`` (a convolution's
    backward reorders its output's gradient, its input and its weight)."""
    if getattr(node.target, "overloadpacket", None) is torch.ops.aten.convolution:
        return _bytes(node) + _bytes(node.args[0]) + _bytes(node.args[1])
    return 0


def _storages(node: fx.Node) -> list[tuple[object, int]]:
    return [(_torch.storage_key(t), _torch.storage_nbytes(t)) for t in _torch.tensors_in(node.meta.get("val"))]


_is_pointwise = _torch.inductor_pointwise

def _reinplaced(node: fx.Node) -> bool:
    """An index-put, which writes into a copy of its first argument and which Inductor runs in
    place when that argument dies at it (its reinplacing pass): an embedding's gradient,
    accumulated into a buffer of zeros, is one buffer, not two (HF Llama, sequence 256: 8 MiB
    over-predicted)."""
    return _torch.index_put_name(node) is not None


def fused_in(graph: fx.Graph) -> set[fx.Node]:
    """Values Inductor never allocates (:func:`fxremat.fusion.fused_values`), and matmuls it runs
    as an ``addmm``."""
    returned = set(graph.find_nodes(op="output")[0].all_input_nodes)
    fused = set(fused_values(graph, lambda n: [key for key, _ in _storages(n)]))
    # A matmul whose one reader adds it to another value runs as that add (Inductor's addmm
    # pattern): its operands stay alive until then (a tied LM head's weight gradient, accumulated
    # with the embedding's at the end of the backward, keeps the logits' gradient alive).
    mm = torch.ops.aten.mm.default
    fused.update(n for n in graph.nodes if n.target is mm and n not in returned and add_reading(n) is not None)
    return fused


class _Replay:
    """Reference counts of storages by live node; a storage is freed when its count drops to 0."""

    def __init__(self, external: set, inductor: bool = False):
        self.external = external  # storages owned by the caller: never counted
        self.inductor = inductor
        self.keys: dict[fx.Node, list[tuple[object, int]]] = {}  # a fused node: its inputs' storages
        self.refs: dict[object, int] = {}
        self.size: dict[object, int] = {}
        self.alive = 0
        self.labels: list[str] = []
        self.trace: list[int] = []
        self.scratch: list[int] = []

    def storages(self, node: fx.Node) -> list[tuple[object, int]]:
        return self.keys[node] if node in self.keys else _storages(node)

    def hold(self, node: fx.Node) -> None:
        for key, nbytes in self.storages(node):
            if key in self.external:
                continue
            if self.refs.get(key, 0) == 0:
                self.size[key] = nbytes
                self.alive += nbytes
            self.refs[key] = self.refs.get(key, 0) + 1

    def release(self, node: fx.Node) -> None:
        for key, _ in self.storages(node):
            if key in self.external:
                continue
            self.refs[key] -= 1
            if self.refs[key] == 0:
                self.alive -= self.size[key]

    def reuse_dying_input(self, node: fx.Node, dying: Iterable[fx.Node], returned: set[str]) -> None:
        """Inductor's in-place reuse: ``node``'s new buffer takes over a same-size buffer that
        ``node`` reads and that dies right after it (its bytes are then counted once)."""
        own = _storages(node)
        if len(own) != 1 or own[0][0] in self.external:
            return
        dying_refs: dict[object, int] = {}
        for value in dying:
            if value.name not in returned:
                for key, _ in self.storages(value):
                    dying_refs[key] = dying_refs.get(key, 0) + 1
        for key, count in dying_refs.items():
            if key != own[0][0] and key not in self.external and self.size.get(key) == own[0][1] and self.refs.get(key) == count:
                self.alive -= self.size[key]
                self.size[key] = 0  # freed when its last reader goes, already counted as node's
                return

    def run(self, graph: fx.Graph, held_from_before: dict[str, fx.Node]) -> None:
        """Replay ``graph``; placeholders named in ``held_from_before`` are already held."""
        nodes = [n for n in graph.nodes if n.op != "output"]
        output = graph.find_nodes(op="output")[0]
        returned = {a.name for a in output.all_input_nodes}
        last_use: dict[fx.Node, fx.Node] = {}
        for node in nodes:
            for arg in node.all_input_nodes:
                last_use[arg] = node
        dies_after: dict[fx.Node, list[fx.Node]] = {}
        for value, user in last_use.items():
            dies_after.setdefault(user, []).append(value)
        fused = fused_in(graph) if self.inductor else set()
        for node in nodes:
            if node in fused:  # never allocated: reads its inputs' buffers, like a view
                self.keys[node] = list(dict.fromkeys(k for a in node.all_input_nodes for k in self.storages(a)))
            if node.op == "placeholder":
                if node.name not in held_from_before:
                    self.hold(node)
            else:
                self.hold(node)
                if self.inductor and node not in fused and _is_pointwise(node):
                    self.reuse_dying_input(node, dies_after.get(node, ()), returned)
                elif self.inductor and _reinplaced(node) and isinstance(node.args[0], fx.Node):
                    dying = [a for a in dies_after.get(node, ()) if a is node.args[0]]
                    self.reuse_dying_input(node, dying, returned)
            self.labels.append(node.name)
            self.scratch.append(scratch_bytes(node))
            self.trace.append(self.alive + self.scratch[-1])
            for value in dies_after.get(node, ()):
                if value.name not in returned:
                    self.release(value)
            if node not in last_use and node.name not in returned:
                self.release(node)  # never used: dies at once


def simulate(fw: fx.GraphModule, bw: fx.GraphModule, num_fwd_outputs: int, inductor: bool = False) -> Timeline:
    """Replay a forward/backward pair and return the timeline of bytes alive (``inductor``: as
    Inductor's kernels allocate, see the module docstring)."""
    fw_placeholders = [n for n in fw.graph.nodes if n.op == "placeholder"]
    external = {key for n in fw_placeholders for key, _ in _storages(n)}
    replay = _Replay(external, inductor)
    replay.run(fw.graph, held_from_before={n.name: n for n in fw_placeholders})
    forward_steps = len(replay.labels)

    fw_outputs = [o for o in fw.graph.find_nodes(op="output")[0].args[0] if isinstance(o, fx.Node)]
    saved = {o.name: o for o in fw_outputs[num_fwd_outputs:]}
    # Hand-over: each returned node still holds its storages.  User outputs stay held by the
    # caller for the whole backward (one extra reference if the same value is also saved); a
    # saved value's reference passes to its backward placeholder, which drops it at last use.
    mutation = _torch.input_mutation_outputs(fw)
    for i, node in enumerate(fw_outputs[:num_fwd_outputs]):
        if node.name in saved:
            replay.hold(node)
        if i < len(mutation) and mutation[i]:
            replay.release(node)  # copied into the mutated input, then dropped
    bw_placeholders = {n.name for n in bw.graph.nodes if n.op == "placeholder"}
    for name, node in saved.items():
        if name not in bw_placeholders:
            replay.release(node)  # returned by the forward but unused by the backward
    replay.run(bw.graph, held_from_before={n: saved[n] for n in bw_placeholders if n in saved})
    return Timeline(tuple(replay.labels), tuple(replay.trace), forward_steps, tuple(replay.scratch))
