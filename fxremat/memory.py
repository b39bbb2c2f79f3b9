"""The liveness-aware memory model: the peak bytes of a forward + backward pair, as it will run.

Invariant: :func:`simulate` replays both graphs node by node, exactly as FX's generated code and
AOTAutograd's boxed runtime execute them: a node's new storages are allocated when it runs, and
a storage is freed right after the last use of the last node that refers to it (views share their
base's storage, so an alias is never counted twice and keeps its base alive).  Nothing is freed
before its last use.  What survives each phase:

* forward inputs (parameters, user inputs) belong to the caller and are never counted;
* forward outputs (user outputs and saved values) survive the forward; user outputs are held by
  the caller through the backward (or dropped at the hand-over: a piece of a layer's, whose
  outputs feed the rest of the layer), saved values die at their last backward use, and new values
  of mutated inputs are copied into the inputs and dropped at the hand-over;
* tangents are allocated when the backward starts; gradients (backward outputs) live to the end.

With ``inductor=True`` the replay follows what Inductor allocates instead of FX's one buffer per
node: a value Inductor computes inside its readers' kernels (:mod:`fxremat.fusion`: pointwise,
read only by pointwise ops and reductions, not returned, and not stored on reuse) is never
allocated and keeps its inputs alive as a view would; a stored pointwise value whose one reader
is an extern kernel is allocated just before that reader, where Inductor realizes it
(:func:`_realized_when_read`: the replay runs in that order); a matmul read only by an add runs at the add
(Inductor's addmm; :func:`fxremat.lowering.keep_matmuls_in_place` avoids that where it would hold
more than it saves), and that add, the addmm's output, is a buffer even where its readers are
pointwise; and a pointwise result takes over the buffer of a same-size input that dies at
it or at an elementwise fused value its kernel computes (Inductor's in-place reuse: HF's loss gradient,
``onehot * g - exp(logits - max - log_sum) * sum``, is written into the logits' buffer, through
the fused ``exp``; saved tensors die in the backward and are donated the same way),
as does an index-put's result its first argument when that dies at it (Inductor reinplaces it).
A concatenation is allocated by the first kernel that writes one of its pieces, and a piece
computed into its slice has no buffer of its own (:func:`fxremat.fusion.concat_writers`).  On the
CPU the values that die inside one C++ call of generated kernels are freed after the whole call
(:func:`fxremat.fusion.kernel_ends`).  Run channels-last, a concatenation of pieces computed into
their slices is written contiguous and copied channels-last for a convolution that reads it
(:func:`_copied_channels_last`).
It assumes that Inductor's wrapper-level buffer reuse (``allow_buffer_reuse``) holds a dead
buffer only across a valley of Inductor's estimate in a backward graph, as fxremat's backends
compile (``_torch._local_reuse``); under
Inductor's own rule (min-cut's graphs, and fxremat's forward graphs, where nothing is recomputed and
it measured no higher) a dead buffer may stay alive until a later allocation of its size, within
its estimate of the whole graph's peak.  It replays the graph's order: Inductor's peak-memory
reordering, which can run a kernel elsewhere, is met halfway by shaping the graph
(:func:`fxremat.lowering.defer_returned_products`), and vertical fusion, which can store a value
in its producer's kernel long before the graph computes it, is not modelled (the case measured,
a shared ``sigmoid`` in a recomputed segment, is rewritten away:
:func:`fxremat.lowering.split_shared_transcendentals`).

Scratch memory that a kernel allocates and frees *inside* one op is added at that op's step for
the few ops where it is as large as an activation (:func:`scratch_bytes`: convolution, its
backward and batch norm's backward, whose CPU kernels reorder their operands; measured on torch
2.13's oneDNN).  It depends on the layout the pair runs in (``channels_last``: what fxremat's
backends choose for a depthwise network on the CPU, ``JointGraph.channels_last``), where oneDNN
reorders only weights.  It works on any partition (fxremat's or PyTorch's), so both are measured with
the same ruler.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

import torch
import torch.fx as fx

from . import _torch
from .fusion import concat_writers, fused_values, is_view, kernel_ends
from .lowering import add_reading

if TYPE_CHECKING:
    from .analysis import JointGraph

__all__ = ["Timeline", "simulate", "replay_pair", "fused_in"]


@dataclass(frozen=True)
class Timeline:
    """Bytes alive while each node runs: its outputs allocated, its inputs not yet freed, plus
    the scratch its kernel uses inside the op (``scratch``, already included)."""

    labels: tuple[str, ...]  # node names, forward then backward
    bytes_alive: tuple[int, ...]
    forward_steps: int  # labels[:forward_steps] are forward nodes
    scratch: tuple[int, ...] = ()  # the part of bytes_alive[i] that is in-kernel scratch
    held_bytes: int = 0  # alive between the forward and the backward: saved values and held user outputs

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


# oneDNN's channels-last depthwise convolution backward with a kernel larger than 3x3 keeps
# per-channel weight-gradient buffers: 256 bytes per byte of weight (torch 2.13, AVX2 and AVX512,
# 1 or 2 threads: 40-320 channels, 5x5 and 7x7, any batch or image size; HF ConvNeXt's last stage,
# 320 channels 7x7: 15.4 MiB); with 3x3 it keeps none.
DEPTHWISE_WGRAD_PER_WEIGHT_BYTE = 256


def scratch_bytes(node: fx.Node, channels_last: bool = False) -> int:
    """Bytes a kernel allocates and frees inside the op (oneDNN on the CPU, torch 2.13).
    Contiguous: operand reorders of a convolution (input + weight, or an output-sized buffer
    where that is larger), of its backward (grad_output + input + weight; no input without an
    input gradient) and batch norm's backward (one input-sized temporary); on an AVX512 processor
    with channels padded to oneDNN's block (:func:`_blocked`).  ``channels_last``
    (the layout fxremat's backends compile a depthwise network in,
    :func:`_torch.cpu_channels_last`): activations need no reorder, only weights: a convolution's
    weight, its backward's weight and weight gradient (a depthwise one larger than 3x3:
    :data:`DEPTHWISE_WGRAD_PER_WEIGHT_BYTE`).  A 1x1, stride-1
    convolution on one thread (:func:`_one_thread_unit_kernel`) reorders nothing in either layout.
    Measured 2026-12-04, HF MobileNetV2's stride-2 depthwise backward: 15.4 MiB contiguous, 10 KB
    channels-last.  0 for every other op."""
    packet = getattr(node.target, "overloadpacket", None)
    aten = torch.ops.aten
    if packet is aten.convolution:
        if _one_thread_unit_kernel(node.args[1], node.args[3:9]):
            return 0
        if channels_last:
            return _bytes(node.args[1])
        block = _channel_block(node.args[3:9])
        out = _blocked(node, block)
        reordered = (_blocked(node.args[0], block, INPUT_BLOCKED_ABOVE)
                     + _blocked(node.args[1], block, INPUT_BLOCKED_ABOVE, weight=True))
        return max(reordered + out - _bytes(node), out)
    if packet is aten.convolution_backward:
        if _one_thread_unit_kernel(node.args[2], node.args[4:10]):
            return 0
        if channels_last:
            return _weight_scratch(node.args[2])
        # the input is reordered for its own gradient: a first layer, whose input takes none (the
        # pixels), reorders grad_output and weight only (HF ResNet-50's 7x7 stem at batch 8, 160 px:
        # 12.5 MiB measured, grad_output 12.5, input 2.3)
        wants_input_grad = not isinstance(node.args[10], (list, tuple)) or bool(node.args[10][0])
        block = _channel_block(node.args[4:10])
        grad_input = _blocked(node.args[1], block, INPUT_BLOCKED_ABOVE) if wants_input_grad else 0
        return _blocked(node.args[0], block) + grad_input + _bytes(node.args[2])
    if packet is aten.native_batch_norm_backward:
        return _bytes(node.args[1])
    return 0


def backward_scratch_bytes(node: fx.Node, channels_last: bool = False) -> int:
    """:func:`scratch_bytes` of the backward kernel of forward node ``node`` (a convolution's
    backward reorders its output's gradient, its input and its weight; channels-last, its weight)."""
    if getattr(node.target, "overloadpacket", None) is torch.ops.aten.convolution:
        if _one_thread_unit_kernel(node.args[1], node.args[3:9]):
            return 0
        if channels_last:
            return _weight_scratch(node.args[1])
        block = _channel_block(node.args[3:9])
        return _blocked(node, block) + _blocked(node.args[0], block, INPUT_BLOCKED_ABOVE) + _bytes(node.args[1])
    return 0


# oneDNN's blocked layout holds a contiguous convolution's channels in blocks of 16 (fp32): its
# reorders pad the output's channels (and its gradient's) to a multiple of 16, and the input's
# and the weight's input channels when there are more than 16 of them.  Measured 2026-12-06
# (torch 2.13, AMD EPYC with AVX512, one thread, batch 2, 32 px, 3x3, scratch = peak - outputs),
# forward / backward, KB, against this model: 32 -> 8 channels 338 / 393 (338 / 393), 24 -> 24
# 356 / 528 (356 / 532), 64 -> 3 652 / 669 (652 / 647), 16 -> 4 233 / 263 (233 / 258), 40 -> 32
# 438 / 649 (439 / 685), 12 -> 12 128 / 260 (135 / 229); without the padding the backward's
# were 16-38% under (the zoo U-Net's 24 -> 8 decoder convolution) and the forward's up to 22%.
# Only where it was measured: on an AVX2 processor the zoo's U-Net and DenseNet were within 10%
# without the padding (2026-12-01), and CUDA runs no oneDNN kernel.
CHANNEL_BLOCK = 16
INPUT_BLOCKED_ABOVE = 16  # fewer input channels are read as they lie (8 -> 32: 256 / 329 KB, unpadded)


def _channel_block(params: tuple) -> int:
    """The channel block of a convolution with (stride, padding, dilation, transposed, output
    padding, groups) ``params``: :data:`CHANNEL_BLOCK` for one group, not transposed, on an AVX512
    processor; 1 (no padding) otherwise."""
    return CHANNEL_BLOCK if not params[3] and params[5] == 1 and _avx512() else 1


@functools.cache
def _avx512() -> bool:
    return torch.backends.cpu.get_cpu_capability() == "AVX512"


def _blocked(value: Any, block: int, above: int = 0, weight: bool = False) -> int:
    """Bytes of ``value`` in oneDNN's blocked layout: an activation's channels (dim 1) padded to a
    multiple of ``block`` when there are more than ``above``; a ``weight``'s output channels
    (dim 0) always, its input channels (dim 1) when more than ``above``.  A CPU tensor's only."""
    val = value.meta.get("val") if isinstance(value, fx.Node) else None
    if (block == 1 or not isinstance(val, torch.Tensor) or val.dim() < 3 or val.device.type != "cpu"
            or not all(isinstance(d, int) for d in val.shape[:2])):
        return _bytes(value)
    pad = lambda c, a: -(-c // block) * block if c > a else c  # noqa: E731
    rows, channels = val.shape[:2]
    if not rows * channels:
        return _bytes(value)
    return _bytes(value) * (pad(rows, 0) if weight else rows) * pad(channels, above) // (rows * channels)


def _one_thread_unit_kernel(weight: Any, params: tuple) -> bool:
    """``weight`` and ``params`` (stride, padding, dilation, transposed, output padding, groups)
    describe a 2-d 1x1 convolution, stride 1, no padding, not transposed, one group, run on one thread
    (``torch.get_num_threads()`` when planning): oneDNN then computes it as a matrix product on the
    operands as they lie, with no reorder, forward or backward, contiguous or channels-last; on two
    threads the same op reorders as any other (measured 2026-12-04, torch 2.13, AMD EPYC with
    AVX512, batch 8: 256 -> 64 channels at 40 px, forward / backward scratch 0 / 0 MiB on one
    thread, 12.6 / 15.7 on two; HF ResNet-50's bottlenecks are two thirds 1x1 convolutions, and
    charging them scratch at one thread put its least-peak replay 10% above the measured peak)."""
    stride, padding, _dilation, transposed, _output_padding, groups = params  # convolution's order
    val = weight.meta.get("val") if isinstance(weight, fx.Node) else None
    return (torch.get_num_threads() == 1 and isinstance(val, torch.Tensor) and val.dim() == 4
            and tuple(val.shape[2:]) == (1, 1) and list(stride) == [1, 1] and not any(padding)
            and not transposed and groups == 1)


def _weight_scratch(weight: fx.Node) -> int:
    """A channels-last convolution backward's scratch: the weight and its gradient reordered, or a
    depthwise kernel's per-channel weight-gradient buffers."""
    val = weight.meta.get("val") if isinstance(weight, fx.Node) else None
    depthwise_large = isinstance(val, torch.Tensor) and val.dim() == 4 and val.shape[1] == 1 and val.shape[2] * val.shape[3] > 9
    return (DEPTHWISE_WGRAD_PER_WEIGHT_BYTE if depthwise_large else 2) * _bytes(weight)


def _storages(node: fx.Node) -> list[tuple[object, int]]:
    return [(_torch.storage_key(t), _torch.storage_nbytes(t)) for t in _torch.tensors_in(node.meta.get("val"))]


def _own(node: fx.Node) -> frozenset:
    """The storage keys of ``node``'s own value."""
    return frozenset(key for key, _ in _storages(node))


_is_pointwise = _torch.inductor_pointwise

def _reinplaced(node: fx.Node) -> bool:
    """An index-put, which writes into a copy of its first argument and which Inductor runs in
    place when that argument dies at it (its reinplacing pass): an embedding's gradient,
    accumulated into a buffer of zeros, is one buffer, not two (HF Llama, sequence 256: 8 MiB
    over-predicted).  Not when that argument is itself an index-put's output: Inductor then writes
    a copy (measured on two chained accumulating puts, 2026-12-04; fxremat.lowering merges the
    chains it can)."""
    return _torch.starts_put_chain(node)


def fused_in(graph: fx.Graph) -> set[fx.Node]:
    """Values Inductor never allocates (:func:`fxremat.fusion.fused_values`), and matmuls it runs
    as an ``addmm``."""
    returned = set(graph.find_nodes(op="output")[0].all_input_nodes)
    # A matmul whose one reader adds it to another value runs as that add (Inductor's addmm
    # pattern): its operands stay alive until then (a tied LM head's weight gradient, accumulated
    # with the embedding's at the end of the backward, keeps the logits' gradient alive).  That
    # add is the addmm's output, a buffer of its own even where its readers are pointwise (a shared
    # weight's gradient accumulated over layers, add(add(mm, mm), mm), is a chain of addmms, and
    # each layer's operands die at its own: HF ALBERT at sequence 512 was predicted with every
    # layer's 2 MiB operands alive until the next layer's addmm).
    mm = torch.ops.aten.mm.default
    addmm = {n: add_reading(n) for n in graph.nodes if n.target is mm and n not in returned}
    addmm = {n: add for n, add in addmm.items() if add is not None}
    fused = set(fused_values(graph, lambda n: [key for key, _ in _storages(n)], stored=set(addmm.values())))
    fused.update(addmm)
    return fused


class _Replay:
    """Reference counts of storages by live node; a storage is freed when its count drops to 0."""

    def __init__(self, external: set, inductor: bool = False, channels_last: bool = False):
        self.external = external  # storages owned by the caller: never counted
        self.inductor = inductor
        self.channels_last = channels_last
        self.keys: dict[fx.Node, list[tuple[object, int]]] = {}  # a fused node: its inputs' storages
        self.buffers: list[torch.Tensor] = []  # what keys of buffers no node names refer to
        self.alias: dict[object, tuple[object, int]] = {}  # a piece computed into a concatenation: its storage
        self.refs: dict[object, int] = {}
        self.size: dict[object, int] = {}
        self.alive = 0
        self.labels: list[str] = []
        self.trace: list[int] = []
        self.scratch: list[int] = []

    def storages(self, node: fx.Node) -> list[tuple[object, int]]:
        if node in self.keys:
            return self.keys[node]
        return [self.alias.get(key, (key, nbytes)) for key, nbytes in _storages(node)]

    def new_storage(self) -> object:
        """A key for a buffer that no node of the graph names (kept alive with the replay)."""
        self.buffers.append(torch.empty(0))
        return _torch.storage_key(self.buffers[-1])

    def hold(self, node: fx.Node) -> None:
        self.hold_storages(self.storages(node))

    def hold_storages(self, storages: Iterable[tuple[object, int]]) -> None:
        for key, nbytes in storages:
            if key in self.external:
                continue
            if self.refs.get(key, 0) == 0:
                self.size[key] = nbytes
                self.alive += nbytes
            self.refs[key] = self.refs.get(key, 0) + 1

    def release(self, node: fx.Node) -> None:
        self.release_storages(self.storages(node))

    def release_storages(self, storages: Iterable[tuple[object, int]]) -> None:
        for key, _ in storages:
            if key in self.external:
                continue
            self.refs[key] -= 1
            if self.refs[key] == 0:
                self.alive -= self.size[key]

    def reuse_dying_input(self, node: fx.Node, dying: Iterable[fx.Node], returned: set[str]) -> None:
        """Inductor's in-place reuse: ``node``'s new buffer takes over a same-size buffer that
        ``node`` reads and that dies right after it (its bytes are then counted once)."""
        own = _storages(node)
        if len(own) != 1 or own[0][0] in self.external or own[0][0] in self.alias:
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
        fused = fused_in(graph) if self.inductor else set()
        if self.inductor:
            nodes = _realized_when_read(nodes, fused, set(output.all_input_nodes))
        concats = concat_writers(nodes, _own, set(output.all_input_nodes)) if self.inductor else {}
        kernel_end = kernel_ends(nodes, fused, _own) if self.inductor else {}
        position = {n: i for i, n in enumerate(nodes)}
        first_write: dict[fx.Node, list[tuple[object, int]]] = {}  # a step: the concatenation buffers allocated there
        early_dropped: dict[fx.Node, list[tuple[object, int]]] = {}  # a step: their early references, dropped after it
        for cat, writers in concats.items():
            (cat_key, cat_bytes), = _storages(cat)
            buffer, drop = (cat_key, cat_bytes), cat
            if self.channels_last and _copied_channels_last(cat, writers):
                buffer, drop = (self.new_storage(), cat_bytes), kernel_end.get(cat, cat)
            for piece, writer in writers.items():
                if writer is piece:
                    for key, _ in _storages(piece):
                        self.alias[key] = buffer
            first_write.setdefault(min(writers.values(), key=position.get), []).append(buffer)
            early_dropped.setdefault(drop, []).append(buffer)
        freed_after: dict[fx.Node, list[fx.Node]] = {}  # a kernel's last node: the values that died in it
        last_use: dict[fx.Node, fx.Node] = {}
        for node in nodes:
            for arg in node.all_input_nodes:
                reader = concats.get(node, {}).get(arg, node)  # a piece is read where it is copied in
                if arg not in last_use or position[reader] > position[last_use[arg]]:
                    last_use[arg] = reader
        dies_after: dict[fx.Node, list[fx.Node]] = {}
        for value, user in last_use.items():
            dies_after.setdefault(user, []).append(value)
        for node in nodes:
            if node in fused:  # never allocated: reads its inputs' buffers, like a view
                self.keys[node] = list(dict.fromkeys(k for a in node.all_input_nodes for k in self.storages(a)))
            self.hold_storages(first_write.get(node, ()))  # allocated by its first writer
            if node.op == "placeholder":
                if node.name not in held_from_before:
                    self.hold(node)
            else:
                self.hold(node)
                if self.inductor and node not in fused and _is_pointwise(node):
                    dying = list(dies_after.get(node, ()))
                    if kernel_end.get(node, node) is node:  # and what dies at an elementwise fused value it computes
                        dying = [*(v for v in freed_after.get(node, ()) if _elementwise_reader(last_use.get(v), node, fused)),
                                 *dying]
                    self.reuse_dying_input(node, dying, returned)
                elif self.inductor and _reinplaced(node) and isinstance(node.args[0], fx.Node):
                    dying = [a for a in dies_after.get(node, ()) if a is node.args[0]]
                    self.reuse_dying_input(node, dying, returned)
            self.labels.append(node.name)
            self.scratch.append(scratch_bytes(node, self.channels_last))
            self.trace.append(self.alive + self.scratch[-1])
            for value in dies_after.get(node, ()):
                if value.name not in returned:
                    freed_after.setdefault(kernel_end.get(node, node), []).append(value)
            for value in freed_after.pop(node, ()):
                self.release(value)
            self.release_storages(early_dropped.pop(node, ()))
            if node not in last_use and node.name not in returned:
                self.release(node)  # never used: dies at once


def _elementwise_reader(reader: fx.Node | None, node: fx.Node, fused: set[fx.Node]) -> bool:
    """Whether ``reader``, a fused value of ``node``'s kernel, reads its inputs where ``node``
    writes: pointwise, of ``node``'s shape (a value read through a broadcast, a reduction or a
    view in between is not taken over in place)."""
    if reader is None or reader not in fused or not _is_pointwise(reader):
        return False
    shape = lambda n: getattr(n.meta.get("val"), "shape", None)  # noqa: E731
    return shape(reader) is not None and shape(reader) == shape(node)


def _copied_channels_last(cat: fx.Node, writers: dict[fx.Node, fx.Node]) -> bool:
    """Whether Inductor, running a pair channels-last, writes a 4-D concatenation into a contiguous
    buffer and copies it channels-last for a convolution that reads it: when every piece is
    computed into its slice (none is a channels-last tensor copied in, which would set the
    concatenation's layout).  Generated code of the zoo U-Net (torch 2.13 CPU): each skip
    concatenation is a contiguous buffer alive from its first piece's kernel, and a channels-last
    copy written in the kernel of its last piece; the contiguous one is freed after that kernel."""
    conv = ("convolution", "convolution_backward")
    in_place = all(w is p or (w is cat and _is_pointwise(p)) for p, w in writers.items())
    return (cat.meta["val"].dim() == 4 and in_place
            and any(_torch.op_name(u) in conv for u in cat.users))


def _realized_when_read(nodes: list[fx.Node], fused: set[fx.Node], returned: set[fx.Node]) -> list[fx.Node]:
    """``nodes`` in the order Inductor allocates them: a pointwise value it stores (not fused)
    whose one reader is an extern kernel (a matmul, a convolution's backward: neither pointwise,
    a reduction nor a view) stays unrealized until that reader is lowered, which realizes it, so
    it moves to just before its reader, and its inputs stay alive until then.  When the backward
    recomputes a segment for that reader, the value is computed after the recomputation (HF
    MobileNetV2: a batch norm's input gradient, whose 12.4 MiB operands stayed alive through the
    recomputed stem, 8 MiB above the graph order's peak)."""
    reduction = getattr(torch.Tag, "reduction", None)

    def deferred(node: fx.Node) -> fx.Node | None:
        if node in fused or node in returned or not _is_pointwise(node) or len(node.users) != 1:
            return None
        (reader,) = node.users
        if (reader.op != "call_function" or _is_pointwise(reader) or reduction in getattr(reader.target, "tags", ())
                or reader.target is operator.getitem or is_view(reader, _own)):
            return None
        return reader

    waiting: dict[fx.Node, list[fx.Node]] = {}
    for node in nodes:
        reader = deferred(node)
        if reader is not None:
            waiting.setdefault(reader, []).append(node)
    if not waiting:
        return nodes
    moved = {n for group in waiting.values() for n in group}
    out: list[fx.Node] = []
    for node in nodes:
        if node not in moved:
            out.extend(waiting.get(node, ()))
            out.append(node)
    return out


def simulate(fw: fx.GraphModule, bw: fx.GraphModule, num_fwd_outputs: int, inductor: bool = False,
             channels_last: bool = False, outputs_dropped: bool = False) -> Timeline:
    """Replay a forward/backward pair and return the timeline of bytes alive (``inductor``: as
    Inductor's kernels allocate, see the module docstring; ``channels_last``: both graphs run
    channels-last on the CPU, which changes convolutions' scratch, :func:`scratch_bytes`;
    ``outputs_dropped``: the caller drops the user outputs at the hand-over, a layer piece's
    ``JointGraph.outputs_dropped``, so only saved values are held into the backward)."""
    fw_placeholders = [n for n in fw.graph.nodes if n.op == "placeholder"]
    external = {key for n in fw_placeholders for key, _ in _storages(n)}
    replay = _Replay(external, inductor, channels_last)
    replay.run(fw.graph, held_from_before={n.name: n for n in fw_placeholders})
    forward_steps = len(replay.labels)

    fw_outputs = [o for o in fw.graph.find_nodes(op="output")[0].args[0] if isinstance(o, fx.Node)]
    saved = {o.name: o for o in fw_outputs[num_fwd_outputs:]}
    # Hand-over: each returned node still holds its storages.  User outputs stay held by the
    # caller for the whole backward (one extra reference if the same value is also saved), or
    # with ``outputs_dropped`` only where saved; a saved value's reference passes to its backward
    # placeholder, which drops it at last use.
    mutation = _torch.input_mutation_outputs(fw)
    dropped = set()
    for i, node in enumerate(fw_outputs[:num_fwd_outputs]):
        if i < len(mutation) and mutation[i]:
            if node.name in saved:
                replay.hold(node)
            replay.release(node)  # copied into the mutated input, then dropped
        elif outputs_dropped:
            if node.name not in saved and node.name not in dropped:
                replay.release(node)  # the caller's reference, dropped after the forward
            dropped.add(node.name)
        elif node.name in saved:
            replay.hold(node)
    bw_placeholders = {n.name for n in bw.graph.nodes if n.op == "placeholder"}
    for name, node in saved.items():
        if name not in bw_placeholders:
            replay.release(node)  # returned by the forward but unused by the backward
    held = replay.alive
    replay.run(bw.graph, held_from_before={n: saved[n] for n in bw_placeholders if n in saved})
    return Timeline(tuple(replay.labels), tuple(replay.trace), forward_steps, tuple(replay.scratch), held)


def replay_pair(jg: JointGraph, fw: fx.GraphModule, bw: fx.GraphModule) -> Timeline:
    """:func:`simulate` for a pair extracted from ``jg``'s joint graph, with its settings (its
    user outputs, Inductor or not, CPU layout, outputs dropped by the caller): every pair the
    partitioner compares is replayed through here, so none is judged on other terms."""
    return simulate(fw, bw, jg.num_fwd_outputs, jg.inductor, jg.channels_last, jg.outputs_dropped)
