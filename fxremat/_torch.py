"""Every private torch internal fxremat relies on, imported and adapted in this one place.

Invariant: no other fxremat module imports from ``torch._functorch``, ``torch._inductor`` or
``torch.fx.experimental``; if an internal moved, :data:`MISSING` names it and
:func:`check_supported` raises one clear error naming the torch version (the partitioner then
falls back to PyTorch's own).  Checked against torch 2.13.0 (CPU); signatures that changed
between 2.11 and 2.14 are called by keyword and probed with ``inspect.signature``.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import inspect
import operator
import sys
import warnings
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

__all__ = ["MISSING", "check_supported", "hint", "storage_key", "storage_nbytes"]

SUPPORTED = "2.11 to 2.14"
MISSING: list[str] = []


def _need(module: str, name: str) -> Any:
    try:
        mod = __import__(module, fromlist=[name])
        return getattr(mod, name)
    except (ImportError, AttributeError):
        MISSING.append(f"{module}.{name}")
        return None


_partitioners = "torch._functorch.partitioners"
classify_nodes = _need(_partitioners, "classify_nodes")
min_cut_rematerialization_partition = _need(_partitioners, "min_cut_rematerialization_partition")
default_partition = _need(_partitioners, "default_partition")
_extract_fwd_bwd_modules = _need(_partitioners, "_extract_fwd_bwd_modules")
is_primal = _need(_partitioners, "_is_primal")
is_tangent = _need(_partitioners, "_is_tangent")
is_sym_node = _need("torch.fx.experimental.proxy_tensor", "is_sym_node")
StorageWeakRef = _need("torch.multiprocessing.reductions", "StorageWeakRef")
CustomPartitionerFn = _need("torch._inductor.custom_graph_pass", "CustomPartitionerFn")
get_hash_for_files = _need("torch._inductor.custom_graph_pass", "get_hash_for_files")
_symbolic_shapes = _need("torch.fx.experimental", "symbolic_shapes")
_InputMutationAOTOutput = _need("torch._functorch._aot_autograd.descriptors", "InputMutationAOTOutput")
_CheckpointPolicy = _need("torch.utils.checkpoint", "CheckpointPolicy")
_BoxedCodeGen = _need("torch.fx.graph", "_BoxedCodeGen")
_contiguous_strides = _need("torch._prims_common", "make_contiguous_strides_for")
_channels_last_strides = _need("torch._prims_common", "make_channels_last_strides_for")
try:  # optional: without it random ops are never recomputed (saved instead)
    from torch._functorch.partitioners import functionalize_rng_ops as _functionalize_rng_ops
except ImportError:
    _functionalize_rng_ops = None
try:  # optional: without it min-cut cannot functionalize RNG either (no saved generator states)
    from torch._prims.rng_prims import run_and_save_rng_state as _run_and_save_rng_state
except ImportError:
    _run_and_save_rng_state = None
try:
    from torch._higher_order_ops.effects import with_effects as _with_effects
except ImportError:  # optional: without it there are no effectful HOPs to guard against
    _with_effects = None


def check_supported() -> None:
    """Raise ``RuntimeError`` naming the torch version if an internal fxremat needs is missing."""
    if MISSING:
        raise RuntimeError(
            f"fxremat supports torch {SUPPORTED}; torch {torch.__version__} lacks {', '.join(MISSING)}"
        )


# -- sizes and storages ----------------------------------------------------------------------
def tensors_in(val: Any) -> list[torch.Tensor]:
    """The (fake) tensors in a node's ``meta["val"]``, flattening tuples and lists."""
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        return [t for v in val for t in tensors_in(v)]
    return []


def hint(x: Any, fallback: int = 4096) -> int:
    """A concrete int for a possibly symbolic size (its hint), without adding guards."""
    if isinstance(x, int):
        return x
    ss = _symbolic_shapes
    for name in ("optimization_hint", "hint_int"):
        fn = getattr(ss, name, None)
        if fn is not None:
            return int(fn(x, fallback=fallback))
    node = getattr(x, "node", None)
    return int(node.hint) if node is not None and node.has_hint() else fallback


def storage_key(t: torch.Tensor) -> object:
    """A key equal for all tensors (views included) that share one storage; a sparse tensor
    (an embedding's ``sparse=True`` gradient), which has no single storage, is its own key."""
    if t.layout is not torch.strided:
        return ("sparse", id(t))
    return StorageWeakRef(t.untyped_storage())


def storage_keys(node: fx.Node) -> list[object]:
    """:func:`storage_key` of each tensor in ``node.meta["val"]``."""
    return [storage_key(t) for t in tensors_in(node.meta.get("val"))]


def storage_nbytes(t: torch.Tensor) -> int:
    if t.layout is torch.sparse_coo:
        return sum(hint(p.numel()) * p.element_size() for p in (t._indices(), t._values()))
    if t.layout is not torch.strided:  # other sparse layouts: bounded by the dense size
        return hint(t.numel()) * t.element_size()
    return hint(t.untyped_storage().nbytes())


def value_numel(node: fx.Node) -> int:
    """Elements of the tensors an FX node computes (its ``meta["val"]``; symbolic sizes by their hints)."""
    return sum(hint(t.numel()) for t in tensors_in(node.meta.get("val")))


def value_nbytes(value: Any) -> int:
    """Bytes of the tensor an FX node computes (its ``meta["val"]``); 0 for anything else."""
    val = value.meta.get("val") if isinstance(value, fx.Node) else None
    return hint(val.numel()) * val.element_size() if isinstance(val, torch.Tensor) else 0


# -- joint-graph facts -----------------------------------------------------------------------
def checkpoint_policy(node: fx.Node) -> str | None:
    """``"must_save"``, ``"prefer_save"``, ``"must_recompute"``, ``"prefer_recompute"`` or None."""
    policy = node.meta.get("recompute")
    if policy is None or _CheckpointPolicy is None:
        return None
    return policy.name.lower() if isinstance(policy, _CheckpointPolicy) else None


def can_replay_rng() -> bool:
    """Whether a recomputed random op can replay the forward's random numbers (see :func:`replay_rng`)."""
    return _functionalize_rng_ops is not None and _CheckpointPolicy is not None


_INDEXING = ("gather", "index", "embedding")  # Inductor lowers these to indirect loads in a pointwise kernel
# Ops without aten's pointwise tag that Inductor lowers to a pointwise kernel all the same (masked or
# indexed loads, constants): a negative ``constant_pad_nd`` in the backward of a TF-style padded
# convolution is computed inside its reader, so the gradient it crops stays alive until then.
_LOADERS = ("constant_pad_nd", "slice_scatter", "select_scatter", "repeat", "scalar_tensor", "full", "iota",
            "_unsafe_index", "copy")


def inductor_pointwise(node: fx.Node) -> bool:
    """Whether Inductor computes ``node`` as a pointwise kernel it can fuse: ops tagged pointwise,
    gathers/indexing/embedding lookups (indirect loads) and the loaders of ``_LOADERS``."""
    if node.op != "call_function":
        return False
    target = node.target
    if torch.Tag.pointwise in getattr(target, "tags", ()):
        return True
    packet = getattr(target, "overloadpacket", None)
    if packet is None or getattr(target, "_overloadname", "") not in ("default", "Tensor"):
        return False
    return packet.__name__ in _INDEXING or packet.__name__ in _LOADERS


def scatter_inlined_operands(node: fx.Node) -> tuple[fx.Node, ...]:
    """The operands a scatter ``node`` (a scatter-add or an index-put) computes inside its own
    kernel, where Inductor lowers it to a generated scatter that reads them through their loaders
    (so an unrealized pointwise operand is never stored); ``()`` where it calls aten's kernel
    instead, which needs them in memory.  The written tensor (the first argument) is never one.

    * A scatter-add: its index and source unless ``utils.use_scatter_fallback`` says aten (the same
      signature in torch 2.11-2.14): on the CPU a sum falls back whenever more than one thread runs
      (``cpp.fallback_scatter_reduce_sum``), so on one thread, and on CUDA for float32, the backward
      of a gather (DeBERTa's relative-position attention) computes its gradient's scaling inside it.
    * An index-put (``lowering.index_put_impl_``; an embedding's backward is one, accumulating into
      zeros): its indices, values and mask on any thread count, unless a boolean index, torch's
      deterministic mode or an accumulation Inductor's atomic add cannot do
      (``utils.needs_fallback_due_to_atomic_add_limitations``: 64-bit integers, booleans) sends it to
      aten.  Generated code of HF BERT's backward (torch 2.13, CPU): the layer norm's backward and the
      three embeddings' gradients are one kernel, the embedding gradients' values never stored."""
    name, args = op_name(node), node.args if isinstance(node, fx.Node) else ()
    if name in _INDEX_PUTS:
        return _index_put_inlined(node)
    summed = name in ("scatter_add", "scatter_add_") or (
        name in ("scatter_reduce", "scatter_reduce_") and len(args) >= 5 and args[4] == "sum")
    if not summed or len(args) < 4 or not all(isinstance(a, fx.Node) for a in (args[0], args[3])):
        return ()
    target, src = args[0].meta.get("val"), args[3].meta.get("val")
    if not (isinstance(target, torch.Tensor) and isinstance(src, torch.Tensor)):
        return ()
    try:
        from torch._inductor.utils import use_scatter_fallback

        fallback = use_scatter_fallback(torch.ops.aten.scatter_reduce_.two, "sum", target.dtype, src.dtype,
                                        src.device.type, True)
    except (ImportError, AttributeError, TypeError):  # another torch: aten's scatter (operands stored)
        return ()
    return () if fallback else tuple(a for a in (args[2], args[3]) if isinstance(a, fx.Node))


def _index_put_inlined(node: fx.Node) -> tuple[fx.Node, ...]:
    """:func:`scatter_inlined_operands` of an index-put."""
    operands = index_put_operands(node)
    target = node.args[0].meta.get("val") if isinstance(node.args[0], fx.Node) else None
    if operands is None or not isinstance(target, torch.Tensor) or torch.are_deterministic_algorithms_enabled():
        return ()
    mask, indices, values, accumulate = operands
    index_nodes = [i for i in (indices if isinstance(indices, (list, tuple)) else ()) if isinstance(i, fx.Node)]
    if not isinstance(values, fx.Node):
        return ()
    if any(getattr(i.meta.get("val"), "dtype", None) in (torch.bool, torch.uint8) for i in index_nodes):
        return ()  # a boolean index: aten's index_put (or a masked fill)
    if accumulate:
        try:
            from torch._inductor.utils import needs_fallback_due_to_atomic_add_limitations as atomic_fallback
        except ImportError:  # another torch: aten's kernel (operands stored)
            return ()
        if atomic_fallback(target.dtype):
            return ()
    return (*([mask] if isinstance(mask, fx.Node) else []), *index_nodes, values)


def _inductor_int(name: str, default: int) -> int:
    """An integer setting of ``torch._inductor.config`` (``default`` where this torch lacks it)."""
    from torch._inductor import config

    value = getattr(config, name, None)
    return value if isinstance(value, int) else default


def inductor_realize_thresholds(cpu: bool) -> tuple[int, int, int]:
    """Inductor's thresholds for storing a pointwise value instead of inlining it into its readers:
    (ops of a value read more than once, buffers read by any value, buffers read by a value read
    more than once),
    from ``torch._inductor.config`` (the CPU variants where this torch has them)."""
    get = _inductor_int
    opcount = get("realize_opcount_threshold", get("realize_cpu_opcount_threshold", 50) if cpu else
                  get("_realize_opcount_threshold_default", 30))
    acc = get("realize_acc_reads_threshold", get("realize_cpu_acc_reads_threshold", 12) if cpu else
              get("_realize_acc_reads_threshold_default", 8))
    return opcount, acc, get("realize_reads_threshold", 4)


def inductor_unroll_reductions_threshold() -> int:
    """Inductor lowers a reduction over at most this many elements as pointwise (unrolled)."""
    return _inductor_int("unroll_reductions_threshold", 8)


_INDEX_PUTS = ("index_put", "_unsafe_index_put", "_unsafe_masked_index_put_accumulate")


def op_name(node: Any) -> str:
    """The name of the aten op an FX node calls (its overload packet's: ``"cat"``), else ``""``."""
    if not isinstance(node, fx.Node) or node.op != "call_function":
        return ""
    return getattr(getattr(node.target, "overloadpacket", None), "__name__", "")


def index_put_name(node: Any) -> str | None:
    """The op's name if ``node`` is an index-put (it writes values into a copy of its first
    argument; an embedding's gradient is one, accumulating into zeros), else None."""
    name = op_name(node)
    return name if name in _INDEX_PUTS else None


def index_put_operands(node: Any) -> tuple[Any, Any, Any, bool] | None:
    """``(mask, indices, values, accumulate)`` of an index-put ``node`` (``mask`` None but for
    ``_unsafe_masked_index_put_accumulate``, which always accumulates), else None."""
    name = index_put_name(node)
    if name == "_unsafe_masked_index_put_accumulate":
        return (*node.args[1:4], True) if len(node.args) >= 4 else None
    if name is None or len(node.args) < 3:
        return None
    accumulate = node.kwargs.get("accumulate", node.args[3] if len(node.args) > 3 else False)
    return None, node.args[1], node.args[2], accumulate is True


def starts_put_chain(node: Any) -> bool:
    """Whether ``node`` is an index-put into a buffer that is no other index-put's output (the first
    put of a chain, or a put alone)."""
    return index_put_name(node) is not None and index_put_name(node.args[0]) is None


def is_random(node: fx.Node) -> bool:
    """Whether ``node`` draws random numbers: a seeded op, unless its dropout probability is
    literally 0 (SDPA without dropout is tagged seeded but draws nothing; wrapping it for RNG
    replay would also hide it from Inductor's SDPA lowering, which then copies an attention mask
    per call: eight (2, 1, 2048, 2048) float masks at once in HF Llama's forward)."""
    target = node.target
    if node.op != "call_function" or torch.Tag.nondeterministic_seeded not in getattr(target, "tags", ()):
        return False
    return not _zero_dropout(node, target)


def is_inductor_seeds(node: fx.Node) -> bool:
    """Whether ``node`` is Inductor's ``prims.inductor_seeds`` (the seeds its decomposition of
    random ops draws from, when ``fallback_random`` is off)."""
    packet = getattr(node.target, "overloadpacket", None)
    return node.op == "call_function" and getattr(packet, "__name__", "") == "inductor_seeds" and getattr(
        packet, "_qualified_op_name", "").startswith("prims::")


def _zero_dropout(node: fx.Node, target: Any) -> bool:
    """A seeded op whose dropout probability is literally 0 draws no random numbers (SDPA)."""
    schema = getattr(target, "_schema", None)
    for i, spec in enumerate(schema.arguments if schema is not None else ()):
        if spec.name in ("dropout_p", "p"):
            value = node.args[i] if i < len(node.args) else node.kwargs.get(spec.name, spec.default_value)
            return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0
    return False


@functools.cache
def realize_op() -> Any:
    """Inductor's ``prims.inductor_force_stride_order``: the identity on a tensor whose strides it
    is given, which Inductor lowers by storing its input in a buffer of its own rather than
    recomputing it inside every reader's kernel (None where this torch lacks it)."""
    try:
        import torch._inductor.inductor_prims  # noqa: F401 - registers the prims below

        return torch.ops.prims.inductor_force_stride_order.default
    except (ImportError, AttributeError, RuntimeError):
        return None


def _stored_copy(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def _register_stored_copy() -> Any:
    try:
        op = torch.library.custom_op("fxremat::stored_copy", _stored_copy, mutates_args=())
        op.register_fake(lambda x: torch.empty_like(x))
        return torch.ops.fxremat.stored_copy.default
    except (AttributeError, RuntimeError, TypeError):  # no custom_op, or registered already
        packet = getattr(getattr(torch.ops, "fxremat", None), "stored_copy", None)
        return getattr(packet, "default", None)


# Registered when fxremat is imported (a graph compiled earlier and loaded from Inductor's cache
# calls it without planning again).
_STORED_COPY = _register_stored_copy()


def stored_copy_op() -> Any:
    """``fxremat::stored_copy``: a copy Inductor cannot see into (an opaque custom op, which it
    calls as an extern kernel): its input is stored by a kernel of its own, never fused into the
    copy's readers' kernels.  None where this torch cannot register it."""
    return _STORED_COPY


def static_layout(val: torch.Tensor) -> bool:
    """Whether every size and stride of ``val`` is a plain int (none symbolic)."""
    return all(isinstance(d, int) for d in (*val.shape, *val.stride()))


def dense_strides(shape: Any, channels_last: bool = False) -> tuple[int, ...]:
    """The strides of a dense tensor of ``shape``: channels-last (a 4-d shape) or contiguous, by
    torch's own rule."""
    return tuple((_channels_last_strides if channels_last else _contiguous_strides)(shape))


def copies_operands(node: fx.Node) -> bool:
    """Whether Inductor lowers ``node`` as an aten call with a layout constraint on its operands
    (an attention kernel's ``sdpa_constraint``, an op tagged ``needs_fixed_stride_order``): an
    operand it has not stored is then copied into a fresh buffer for that call, computed again each
    time (False where this torch does not say).  Not a convolution or its backward: their
    lowering stores such an operand once and shares it (a ReLU read by two convolutions: one
    buffer, torch 2.13, 2026-12-07)."""
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and _constrained(node.target)


@functools.cache  # once per op: the partitioner asks for every reader of every candidate pair's values
def _constrained(target: Any) -> bool:
    if target in _SHARING_CONVOLUTIONS:
        return False
    try:
        from torch._inductor.lowering import maybe_layout_constraints

        return maybe_layout_constraints(target) is not None
    except (ImportError, AttributeError, RuntimeError):
        return False


_SHARING_CONVOLUTIONS = (torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default)


def insert_realize(graph: fx.Graph, node: fx.Node, strides: Sequence[int] | None = None,
                   every_reader: bool = False) -> fx.Node:
    """A :func:`realize_op` mark of ``node`` inserted after it, with ``node``'s value, in
    ``strides`` (where None, ``node``'s own); with ``every_reader``, every other reader of ``node``
    reads the mark instead.  A symbolic stride (a sequence length that changes
    between steps), which must be ``node``'s own in its dimension, is read by an
    ``aten.sym_stride`` node of ``node`` placed before the mark (a bare SymInt in the arguments is a name no node defines:
    the graph's FX code fails, ``name 's0' is not defined``, HF GPT-2's eager mask, 2026-12-07).
    Otherwise the caller points readers at the mark; ``node``'s users then include the mark and
    its ``sym_stride`` nodes (``mark.args[1]``)."""
    last, args = node, list(strides) if strides is not None else list(node.meta["val"].stride())
    for dim, stride in enumerate(args):
        if not isinstance(stride, int):
            with graph.inserting_after(last):
                last = args[dim] = graph.call_function(torch.ops.aten.sym_stride.int, (node, dim))
            last.meta["val"] = stride
    with graph.inserting_after(last):
        mark = graph.call_function(realize_op(), (node, args))
    mark.meta["val"] = node.meta["val"]
    if every_reader:
        node.replace_all_uses_with(mark, delete_user_cb=lambda u: u is not mark and u not in mark.args[1])
    return mark


def is_realize(node: fx.Node) -> bool:
    """Whether ``node`` is a :func:`realize_op` call (its input is stored, it is an alias of it)."""
    return node.op == "call_function" and node.target is not None and node.target is realize_op()


def is_impure(node: fx.Node) -> bool:
    """FX's impurity, not counting random ops (their replay is handled by :func:`replay_rng`)."""
    try:
        return node.is_impure(impure_random=False)
    except TypeError:  # older FX: no impure_random keyword
        return node.is_impure()


def replay_rng(joint: fx.GraphModule, fw: fx.GraphModule, bw: fx.GraphModule, num_sym_nodes: int):
    """Make every random op that the backward recomputes replay the forward's random numbers.

    torch's own ``functionalize_rng_ops`` (what activation checkpointing under ``torch.compile``
    uses) wraps the forward's op in ``run_and_save_rng_state``, saves the generator state, and
    runs the backward's copy under ``run_with_rng_state`` with it.  It handles the joint nodes
    marked recomputable; they are marked for the call and their ``recompute`` meta restored.
    """
    in_bw = {n.name for n in bw.graph.nodes if is_random(n)}
    if not in_bw:
        return fw, bw
    marked = {n: n.meta.get("recompute") for n in joint.graph.nodes if n.name in in_bw and is_random(n)}
    try:
        for node in marked:
            node.meta["recompute"] = _CheckpointPolicy.PREFER_RECOMPUTE
        return _functionalize_rng_ops(joint, fw, bw, num_sym_nodes)
    finally:
        for node, old in marked.items():
            if old is None:
                node.meta.pop("recompute", None)
            else:
                node.meta["recompute"] = old


def inductor_fallback_random() -> bool:
    """Whether Inductor draws random numbers as eager does (``torch._inductor.config.fallback_random``)."""
    inductor_config = sys.modules.get("torch._inductor.config")
    return bool(getattr(inductor_config, "fallback_random", False))


def _control_deps() -> tuple[Callable, type] | None:
    """Inductor's ``preserve_node_ordering`` and ``OrderedSet``, where its ``control_deps`` can be
    compiled in a graph Inductor did not build (torch >= 2.13; on 2.11 it has no autograd kernel:
    "could not find kernel for HigherOrderOperator control_deps at ... AutogradCPU")."""
    try:
        from torch._inductor.fx_passes.control_dependencies import control_deps, preserve_node_ordering
        from torch.utils._ordered_set import OrderedSet
    except ImportError:  # pragma: no cover - torch without control_deps
        return None
    return (preserve_node_ordering, OrderedSet) if torch._C.DispatchKey.Autograd in control_deps.py_kernels else None


def can_order_random_ops() -> bool:
    """Whether :func:`order_random_ops` can chain draws in this torch (2.13, 2.14: yes; 2.11: no, and
    there Inductor does not chain plain random ops either: min-cut's draws are not in eager's order)."""
    return _control_deps() is not None


def order_random_ops(fw: fx.GraphModule) -> int:
    """Chain the forward's random draws in program order, the replayed ones included; returns how
    many were chained.

    With ``fallback_random`` Inductor draws from the global generator and keeps its random ops in
    program order by chaining them with ``control_deps`` (torch >= 2.13), but only plain seeded
    ops: a ``run_and_save_rng_state`` that :func:`replay_rng` added is free to move, and a plain
    op with no data inputs (``bernoulli_`` on an ``empty``, DeBERTa's and SEW-D's dropout) was
    scheduled ahead of the replayed ones: every later draw differed from eager's (SEW-D,
    2026-12-05: gradients 1.0 off eager's, min-cut's 1e-5).  Chained here with Inductor's own
    ``preserve_node_ordering``; a no-op without a replayed op (Inductor chains plain ones itself)
    and where :func:`can_order_random_ops` is false."""
    tools = _control_deps()
    if tools is None:
        return 0
    draws = [n for n in fw.graph.nodes if is_random(n) or n.target is _run_and_save_rng_state]
    if len(draws) < 2 or not any(n.target is _run_and_save_rng_state for n in draws):
        return 0
    preserve_node_ordering, ordered_set = tools
    preserve_node_ordering(fw.graph, {later: ordered_set([earlier]) for earlier, later in zip(draws, draws[1:])})
    fw.recompile()
    return len(draws)


def is_effectful(node: fx.Node) -> bool:
    return _with_effects is not None and node.target is _with_effects


def mutated_primals(joint: fx.GraphModule, primals: tuple[fx.Node, ...]) -> set[fx.Node]:
    """Primal inputs the forward mutates, in both layouts AOTAutograd produces.

    Plain AOTAutograd returns a mutated input's new value as a forward output whose descriptor is
    ``InputMutationAOTOutput``; Inductor (keep_input_mutations) keeps an in-place op such as
    ``copy_`` on the primal in the graph.
    """
    mutated = set()
    output = joint.graph.find_nodes(op="output")[0]
    descs = output.meta.get("desc") or ()
    by_desc = {p.meta["desc"]: p for p in primals if p.meta.get("desc") is not None}
    if _InputMutationAOTOutput is not None:
        for desc in descs:
            if isinstance(desc, _InputMutationAOTOutput):
                # The mutated input may be a plain input or a synthetic base of aliased inputs
                # (ViewBaseAOTInput): match the primal carrying the same descriptor.
                primal = by_desc.get(desc.mutated_input)
                idx = getattr(desc.mutated_input, "idx", None)
                if primal is None and idx is not None and idx < len(primals):
                    primal = primals[idx]
                if primal is None:
                    raise NotImplementedError(f"cannot find the input mutated by {desc}")
                mutated.add(primal)
    primal_set = set(primals)
    for node in joint.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        if not target._schema.is_mutable:
            continue
        for arg, spec in zip(node.args, target._schema.arguments):
            if spec.alias_info is not None and spec.alias_info.is_write and arg in primal_set:
                mutated.add(arg)
    return mutated


def input_mutation_outputs(gm: fx.GraphModule) -> list[bool]:
    """For each output of a forward (or joint) graph: does it carry a mutated input's new value?

    AOTAutograd's runtime copies such values into the inputs right after the forward and drops
    them, so they do not stay alive like the user's outputs.
    """
    descs = gm.graph.find_nodes(op="output")[0].meta.get("desc") or ()
    return [_InputMutationAOTOutput is not None and isinstance(d, _InputMutationAOTOutput) for d in descs]


# -- partitioning helpers --------------------------------------------------------------------
def copy_joint(joint: fx.GraphModule) -> fx.GraphModule:
    """A copy of ``joint`` that a partitioner may DCE, CSE and re-tag without touching ``joint``.

    The graph is copied node by node (FX's own graph copy): new nodes, each with its own ``meta``
    dict whose values (fake tensors, descriptors, stack traces) are shared by reference, so writes
    such as ``meta["recompute"] = MUST_SAVE`` land on the copy only.  Attributes (lifted constants,
    subgraph modules of higher-order ops) are shared, not copied: ``copy.deepcopy`` of the module
    would clone a real constant tensor under the active fake mode, which fails ("Attempted to set
    the storage of a tensor on device "meta" to a storage on different device "cpu"").  Views
    whose value lost its base's storage get it back on the copy (:func:`realias_views`).
    """
    with warnings.catch_warnings():  # deepcopy of the codegen's pytree specs warns in some torch versions
        warnings.simplefilter("ignore", FutureWarning)
        graph = copy.deepcopy(joint.graph)
    out = fx.GraphModule(joint, graph, class_name=type(joint).__name__)
    out.meta = dict(getattr(joint, "meta", {}))
    realias_views(out.graph)
    return out


def realias_views(graph: fx.Graph) -> int:
    """Give each view node (an aten view op of static shape) whose ``meta["val"]`` does not share
    its base's storage the value the view op computes from its base's, in the base's fake mode;
    returns how many were given one.  Inductor's joint-graph passes replace nodes (a softmax's
    ``div``) with values of their own, and the views that read them keep the replaced value's
    storage, so the memory model, which knows aliases by storage, counted such a view as a second
    buffer (HF ALBERT at sequence 512: each recomputed layer's 8 MiB attention probabilities
    twice, 37.8 MiB predicted for 22.8 measured).  Run on every copy of a joint graph, so
    fxremat's plans and min-cut's pairs are measured alike; the caller's graph is not touched."""
    fixed = 0
    for node in graph.nodes:
        if node.op != "call_function" or not getattr(node.target, "is_view", False) or not node.args:
            continue
        base, val = node.args[0], node.meta.get("val")
        bval = base.meta.get("val") if isinstance(base, fx.Node) else None
        if not (isinstance(val, torch.Tensor) and isinstance(bval, torch.Tensor)) or storage_key(val) == storage_key(bval):
            continue
        mode = getattr(bval, "fake_mode", None)
        if mode is None or not all(isinstance(d, int) for d in (*val.shape, *bval.shape)):
            continue
        try:
            with mode:
                new = node.target(*fx.node.map_arg(node.args, lambda a: a.meta["val"]),
                                  **fx.node.map_arg(node.kwargs, lambda a: a.meta["val"]))
        except Exception:  # noqa: BLE001, S112 - a view we cannot replay keeps the value it has
            continue
        if (isinstance(new, torch.Tensor) and tuple(new.shape) == tuple(val.shape) and new.stride() == val.stride()
                and new.dtype == val.dtype and storage_key(new) == storage_key(bval)):
            node.meta["val"] = new
            fixed += 1
    return fixed


def accepted_kwargs(fn: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``kwargs`` that ``fn`` accepts (all of them if it takes ``**kwargs``)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in params}


def min_cut(joint: fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> tuple[fx.GraphModule, fx.GraphModule]:
    """PyTorch's default partitioner, run on a copy: it DCEs, CSEs and re-tags the joint it gets
    (inside :func:`shared_solves`, runs on copies of one joint graph share their max-flow solves)."""
    fn = min_cut_rematerialization_partition
    return fn(copy_joint(joint), joint_inputs, **accepted_kwargs(fn, kwargs))


try:  # optional: without it min-cut's runs at several budgets each solve every max-flow problem
    from torch._functorch.partitioners import solve_min_cut as _solve_min_cut
except ImportError:
    _solve_min_cut = None


def _solve_signature() -> inspect.Signature | None:
    """``solve_min_cut``'s signature where it is the one :func:`shared_solves` knows (torch 2.11 -
    2.14: ``joint_graph, node_info, min_cut_options, dont_ban``), else None."""
    try:
        signature = inspect.signature(_solve_min_cut)
    except (TypeError, ValueError):
        return None
    return signature if {"joint_graph", "min_cut_options", "dont_ban"} <= set(signature.parameters) else None


@contextlib.contextmanager
def shared_solves(solves: dict | None):
    """Within the context, torch's ``solve_min_cut`` answers a question it was asked before, on a
    copy of the same joint graph, from ``solves`` (None: no sharing).

    min-cut at an ``activation_memory_budget`` below 1 solves three max-flow problems that do not
    depend on the budget (its default, "more aggressive" and "aggressive" ban options), then one
    per budget (the knapsack's ``dont_ban``): at the ten fractions of fxremat's grid, 27 of the 40
    solves repeat.  An answer is stored as node names and handed out as the nodes of the graph
    asked about; the key holds the graph's node names, the options and the ``dont_ban`` names, so
    a different graph is a miss.  Where the signature is not the known one, or the function was
    already replaced, every call goes through unchanged."""
    module = __import__(_partitioners, fromlist=["solve_min_cut"])
    original = getattr(module, "solve_min_cut", None)
    signature = _solve_signature() if solves is not None and original is _solve_min_cut is not None else None
    if signature is None:
        yield
        return

    @functools.wraps(original)
    def remembered(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        graph, options = bound.arguments["joint_graph"], bound.arguments["min_cut_options"]
        try:
            # MinCutOptions is an unhashable dataclass: its repr names every field (another kind of
            # object reprs with its id, so it never hits).
            key = (tuple(n.name for n in graph.nodes), repr(options),
                   frozenset(n.name for n in bound.arguments.get("dont_ban") or ()))
        except AttributeError:  # an argument of another kind: not shared
            return original(*args, **kwargs)
        if key in solves:
            by_name = {n.name: n for n in graph.nodes}
            saved, banned, banned_type = solves[key]
            return [by_name[n] for n in saved], banned_type(by_name[n] for n in banned)
        result = original(*args, **kwargs)
        try:
            saved, banned = result
            solves[key] = (tuple(n.name for n in saved), tuple(n.name for n in banned), type(banned))
        except (TypeError, ValueError, AttributeError):  # an answer of another shape: not stored
            pass
        return result

    module.solve_min_cut = remembered
    try:
        yield
    finally:
        module.solve_min_cut = original


def default_partition_of(joint: fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> tuple[fx.GraphModule, fx.GraphModule]:
    """PyTorch's ``default_partition`` (saves, never recomputes), given only the kwargs it accepts
    (it takes no ``compiler``).  The last resort: it runs on ``joint`` itself, as AOTAutograd
    would run it, so it works even where the joint cannot be copied."""
    fn = default_partition
    return fn(joint, joint_inputs, **accepted_kwargs(fn, kwargs))


def saved_names(fw: fx.GraphModule, num_fwd_outputs: int) -> list[str]:
    """Names of the values a forward module saves for the backward (joint-graph names)."""
    outputs = fw.graph.find_nodes(op="output")[0].args[0]
    return [o.name for o in outputs[num_fwd_outputs:] if isinstance(o, fx.Node)]


def is_saved_rng_state(fw: fx.GraphModule, name: str) -> bool:
    """Whether forward node ``name`` is a generator state that min-cut's own RNG functionalization
    (``run_and_save_rng_state``, for random ops a checkpoint tags for recomputation) added to its
    copy of the joint graph and saves: a value of min-cut's pair, not of the joint graph."""
    node = next((n for n in fw.graph.nodes if n.name == name), None)
    if node is None or node.op != "call_function" or node.target is not operator.getitem:
        return False
    source, index = node.args
    return isinstance(source, fx.Node) and source.target is _run_and_save_rng_state and index == 0


def extract_fwd_bwd(
    joint: fx.GraphModule,
    saved_values: list[fx.Node],
    saved_sym_nodes: list[fx.Node],
    *,
    num_fwd_outputs: int,
    static_lifetime_input_nodes: Any = None,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """torch's own extraction of forward and backward modules for a given saved set.

    The backward recomputes every forward value it needs that is not saved (in joint order;
    :mod:`fxremat.partition` reorders it).  The lists are updated in place (here and by torch).

    Symbolic values (SymInt/SymFloat/SymBool nodes, backed or unbacked, e.g. the result of
    ``.item()``) are moved from ``saved_values`` to ``saved_sym_nodes`` first: AOTAutograd saves
    the first list with ``save_for_backward``, which accepts tensors only ("expected all
    tensors_saved_with_vc_check to be Tensors, got types: [<class 'int'>]").
    """
    syms = [n for n in saved_values if is_sym_node(n)]
    if syms:
        saved_values[:] = [n for n in saved_values if not is_sym_node(n)]
        saved_sym_nodes[:] = list(dict.fromkeys([*saved_sym_nodes, *syms]))
    params = inspect.signature(_extract_fwd_bwd_modules).parameters
    kwargs: dict[str, Any] = {"num_fwd_outputs": num_fwd_outputs}
    if "static_lifetime_input_nodes" in params and static_lifetime_input_nodes is not None:
        kwargs["static_lifetime_input_nodes"] = static_lifetime_input_nodes
    return _extract_fwd_bwd_modules(joint, saved_values, saved_sym_nodes, **kwargs)


def boxed_freeing_call(gm: fx.GraphModule):
    """A boxed callable that lets each input die after its last use (for no-op compilers).

    AOTAutograd hands the backward its saved tensors in a list; plain ``make_boxed_func`` keeps
    that list alive for the whole backward, so every saved tensor would live to the end.  FX's
    boxed code generator unpacks and clears the list first, as Inductor's generated code does.
    """
    if _BoxedCodeGen is not None:
        gm.graph.set_codegen(_BoxedCodeGen())
        gm.recompile()

        def run(args):
            return gm(args)

    else:  # pragma: no cover - older torch: still correct, frees later

        def run(args):
            return gm(*args)

    run._boxed_call = True
    return run



def eager_decompositions() -> dict:
    """Decompositions for the no-Inductor path: batch norm split as Inductor splits it, so its
    normalized output no longer reads the running statistics the forward then overwrites."""
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    return get_decompositions([aten._native_batch_norm_legit_functional, aten.native_batch_norm])


def compile_with_inductor(gm: fx.GraphModule, example_inputs: list, partitioner: Any, *,
                          reuse_buffers: str = "inductor", cpu_layout: str = "inductor",
                          backward_patches: dict[str, Any] | None = None):
    """Inductor's ``compile_fx`` with ``partitioner`` as its ``custom_partitioner_fn``.

    ``reuse_buffers``: Inductor's wrapper-level buffer reuse (``allow_buffer_reuse``), which keeps
    a dead buffer alive for a later allocation of the same size instead of freeing it.
    ``"inductor"``: Inductor's rule, which allows it while Inductor's own estimate of the graph's
    peak allows; that estimate can be far above the real peak (HF T5, seq 1024: 194 MiB
    estimated for a backward whose whole step measures 147: at a kernel that writes its output in
    place of an input it counts both buffers), so dead buffers stay alive across recomputed
    segments.  Less those double counts the estimate's peak is the real one there (147.3), but
    it still misses memory elsewhere (a CPU convolution backward's scratch): Inductor's rule on it
    raised HF ConvNeXt's peak from 49.4 to 52.6 MiB (2026-12-07).  ``"local"``:
    :func:`_local_reuse` in backward graphs (fxremat's plans), Inductor's rule in forward graphs,
    where nothing is recomputed and the saved values pile up towards the end: holding a dead
    buffer under the estimate of the forward's own peak left the measured peaks unchanged (all 18
    rows of the real-model suite) and spares fresh large buffers, each faulted in page by page on
    the CPU (HF T5, seq 1024, padded: minor faults
    per step 131-162 thousand under the valley rule in both graphs, 74-117 thousand so; step time
    1.108x -> 1.068x per-layer checkpointing's, 2026-12-07).  ``"off"``: none.
    In-place reuse inside a kernel (``inplace_buffers``) is unaffected by all three.

    ``cpu_layout``: Inductor's layout optimization (``layout_optimization``) of CPU graphs, which
    puts a graph in channels-last if it contains a convolution (and no grouped convolution with
    more than one input channel per group, ...: ``GraphLowering.decide_layout_opt``).
    ``"inductor"``: Inductor decides each graph by itself (PyTorch's default), so a backward that
    saves every convolution's input (min-cut's) stays contiguous while its forward and saved
    tensors are channels-last, and one that recomputes a convolution is channels-last.
    ``"planned"``: both graphs in one layout, the one :func:`cpu_channels_last` gives the forward
    (the layout the partitioner planned and marked, else :func:`cpu_layouts`' default:
    channels-last with a depthwise convolution, which runs far faster so on the CPU, contiguous
    otherwise).  ``"off"``: no graph in channels-last.

    ``backward_patches``: Inductor config applied to the backward graph only."""
    from torch._inductor.compile_fx import compile_fx

    if reuse_buffers not in ("inductor", "local", "off"):
        raise ValueError(f"reuse_buffers must be 'inductor', 'local' or 'off', not {reuse_buffers!r}")
    patches: dict[str, Any] = {"custom_partitioner_fn": partitioner}
    local = reuse_buffers == "local" and _install_local_reuse()
    if reuse_buffers == "off" or (reuse_buffers == "local" and not local):
        patches["allow_buffer_reuse"] = False
    if cpu_layout not in ("inductor", "planned", "off"):
        raise ValueError(f"cpu_layout must be 'inductor', 'planned' or 'off', not {cpu_layout!r}")
    on_cpu = not any(isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in example_inputs)
    plan_layout = on_cpu and cpu_layout == "planned" and _decide_layout_opt() is not None
    if on_cpu and cpu_layout != "inductor" and not plan_layout:
        patches["layout_optimization"] = False
    if not (backward_patches or local or plan_layout):
        return compile_fx(gm, example_inputs, config_patches=patches)
    inner = functools.partial(_inner_compile, backward_patches=backward_patches or {}, local_reuse=local,
                              plan_layout=plan_layout, pair={})  # the dict: filled by the forward, read by the backward
    return compile_fx(gm, example_inputs, config_patches=patches, inner_compile=inner)


# ``GraphModule.meta`` key of a forward graph fxremat's partitioner returns: the CPU layout it planned
# the pair for (True: channels-last), which :func:`cpu_channels_last` follows.
CPU_LAYOUT_MARK = "fxremat_cpu_channels_last"

# ``GraphModule.meta`` key of a forward graph fxremat's partitioner returns: True where the pair is
# min-cut's own (the partitioner found nothing better), which :func:`_inner_compile` then compiles
# as Inductor's defaults would, so that the step is the default compile's.
INDUCTOR_DEFAULTS_MARK = "fxremat_inductor_defaults"


def convolutions(gm: fx.GraphModule) -> list[fx.Node]:
    """The forward convolutions of ``gm`` (``aten.convolution``; their backwards are other ops)."""
    return gm.graph.find_nodes(op="call_function", target=torch.ops.aten.convolution.default)


def cpu_layouts(gm: fx.GraphModule, is_inference: bool = False) -> tuple[bool, ...]:
    """The CPU layouts (True: channels-last in both graphs) fxremat plans the pair of ``gm`` (a
    forward or a joint graph) in, its default first.  Where its convolutions run on the CPU and
    Inductor would lay the graph out channels-last (``GraphLowering.decide_layout_opt``: on the CPU,
    any convolution), both are planned: channels-last first where a convolution is depthwise or
    reads a channels-last input, contiguous first where the graph is a dense convolution network
    (:data:`NODES_PER_CONVOLUTION`); the partitioner keeps the default unless the other layout's
    pair predicts clearly less (``partitioner._pick_layout``).  Otherwise contiguous only."""
    decide = _decide_layout_opt()
    convs = convolutions(gm)
    on_cpu = all(isinstance(v, torch.Tensor) and v.device.type == "cpu"
                 for n in convs for v in (n.args[0].meta.get("val"), n.args[1].meta.get("val")))
    if not (convs and on_cpu and decide is not None and decide(gm, is_inference=is_inference)):
        return (False,)
    if _has_depthwise_convolution(convs) or _fed_channels_last(convs):
        return (True, False)
    if len(gm.graph.nodes) >= NODES_PER_CONVOLUTION * len(convs):
        return (False,)
    return (False, True)


# A dense graph with fewer convolutions than one per this many nodes (a transformer's patch
# embedding, a speech model's feature encoder) is planned contiguous only: its layout changes little
# but planning twice doubles the time.  Inductor skips its GPU layout optimization by the same
# measure (``decide_layout_opt``: 300 nodes per convolution, counted on a forward graph).
NODES_PER_CONVOLUTION = 300


def cpu_channels_last(gm: fx.GraphModule, is_inference: bool = False) -> bool:
    """Whether fxremat's backends compile the pair of ``gm`` (a forward or a joint graph)
    channels-last (``compile_with_inductor(cpu_layout="planned")``): the layout the partitioner
    planned and marked on the forward (:data:`CPU_LAYOUT_MARK`) where it may run so, else the
    default of :func:`cpu_layouts`."""
    layouts = cpu_layouts(gm, is_inference)
    mark = getattr(gm, "meta", {}).get(CPU_LAYOUT_MARK)
    return bool(mark) if mark is not None and mark in layouts else layouts[0]


def _fed_channels_last(convs: list[fx.Node]) -> bool:
    """Whether a convolution reads a graph input laid out channels-last (and not also contiguous):
    the caller's model and data are channels-last (``model.to(memory_format=torch.channels_last)``),
    and a contiguous compile would convert them (a torchvision-style ResNet fed so: 1.93 MiB
    contiguous against min-cut's 1.90 channels-last, 2026-12-04)."""
    for n in convs:
        for a in n.args[:2]:
            val = a.meta.get("val") if isinstance(a, fx.Node) and a.op == "placeholder" else None
            if (isinstance(val, torch.Tensor) and val.dim() == 4 and not val.is_contiguous()
                    and val.is_contiguous(memory_format=torch.channels_last)):
                return True
    return False


def _has_depthwise_convolution(convs: list[fx.Node]) -> bool:
    """Whether a convolution has one input channel per group (and more than one group)."""
    for n in convs:
        weight = n.args[1].meta.get("val") if isinstance(n.args[1], fx.Node) else None
        groups = n.args[8] if len(n.args) > 8 else n.kwargs.get("groups", 1)
        if isinstance(weight, torch.Tensor) and weight.dim() > 2 and weight.shape[1] == 1 and groups > 1:
            return True
    return False


def _decide_layout_opt() -> Callable[..., bool] | None:
    """Inductor's ``GraphLowering.decide_layout_opt(gm, is_inference=...)`` (None where absent)."""
    from torch._inductor.graph import GraphLowering

    return getattr(GraphLowering, "decide_layout_opt", None)


def _inner_compile(gm: fx.GraphModule, example_inputs: list, *, backward_patches: dict[str, Any],
                   local_reuse: bool, plan_layout: bool, pair: dict[str, bool], **kwargs: Any):
    """Inductor's ``compile_fx_inner``, with ``backward_patches`` applied to the backward graph
    only (compiled lazily, at the first backward, in whatever thread runs it), and
    :func:`_local_reuse` on for a backward graph's code generation if ``local_reuse`` (a forward keeps
    Inductor's rule: see :func:`compile_with_inductor`).  ``pair`` (one
    dict per compiled pair) carries what the forward's compile decided to the backward's:

    * a forward marked :data:`INDUCTOR_DEFAULTS_MARK` (min-cut's own pair, which the partitioner
      chose) is compiled, with its backward, as Inductor's defaults would: no patch, Inductor's
      buffer reuse and layouts, so that pair runs exactly as the default compile runs it;
    * ``plan_layout`` (``cpu_layout="planned"``): the forward records whether it is laid out
      channels-last (:func:`cpu_channels_last`), and the backward is compiled the same way."""
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx_inner

    backward = bool(kwargs.get("is_backward"))
    if not backward:
        pair["defaults"] = bool(getattr(gm, "meta", {}).get(INDUCTOR_DEFAULTS_MARK))
    if pair.get("defaults"):
        return compile_fx_inner(gm, example_inputs, **kwargs)
    patches = dict(backward_patches) if backward else {}
    if plan_layout and not backward:
        pair["channels_last"] = cpu_channels_last(gm, is_inference=bool(kwargs.get("is_inference")))
        if not pair["channels_last"]:
            patches["layout_optimization"] = False
    elif plan_layout and "channels_last" in pair:
        patches["force_layout_optimization" if pair["channels_last"] else "layout_optimization"] = pair["channels_last"]
    token = _LOCAL_REUSE.set(local_reuse and backward)
    try:
        with inductor_config.patch(patches):
            return compile_fx_inner(gm, example_inputs, **kwargs)
    finally:
        _LOCAL_REUSE.reset(token)


_LOCAL_REUSE: contextvars.ContextVar[bool] = contextvars.ContextVar("fxremat_local_reuse", default=False)


def _local_reuse(original: Any) -> Any:
    """Inductor's ``AllocateLine.should_reuse_buffer`` with fxremat's rule where
    :data:`_LOCAL_REUSE` is set, and Inductor's own everywhere else.

    The rule: a buffer freed after scheduler node ``f`` may become an allocation of node ``a``
    if ``a`` is ``f``'s successor (nothing is held), or if across nodes ``f+1 .. a-1`` Inductor's
    estimate of the live bytes plus the held buffer stays at or below the estimate at ``f`` *and*
    at ``a`` (a buffer of that size is alive at both): the held buffer only fills a valley of the
    estimate, so an estimate that is off by about the same amount across that stretch cannot let
    it raise the real peak.  Inductor's own rule compares with its estimate of the whole graph's
    peak, which lifts every stretch to that level.  Measured (docs/results.md): the same peaks as
    no reuse on the real-model suite; the level at either end (the higher of the two) raised HF
    ConvNeXt's from 49.3 to 51.2 MiB."""

    def should_reuse_buffer(self: Any, free_line: Any, size: int) -> bool:
        if not _LOCAL_REUSE.get():
            return original(self, free_line, size)
        f, a = free_line.scheduler_node_index, self.scheduler_node_index
        if f + 1 == a:
            return True
        try:
            estimate = self.wrapper.estimate_peak
            at = estimate.segmented_tree.summarize_range
            level = min(at(f, f), at(a, a), estimate.overall_peak_memory)
            return size + estimate.peak_between(free_line, self) <= level
        except (AttributeError, TypeError):
            return False

    should_reuse_buffer.fxremat_local_reuse = True
    return should_reuse_buffer


@functools.cache
def _install_local_reuse() -> bool:
    """Wraps Inductor's reuse rule with :func:`_local_reuse` (once per process; other compiles
    keep Inductor's rule).  ``False`` where this torch has no such rule: fxremat then compiles
    without buffer reuse."""
    try:
        from torch._inductor.codegen.wrapper import AllocateLine
    except ImportError:
        return False
    original = getattr(AllocateLine, "should_reuse_buffer", None)
    if original is None:
        return False
    if not getattr(original, "fxremat_local_reuse", False):
        AllocateLine.should_reuse_buffer = _local_reuse(original)
    return True


def compile_without_inductor(gm: fx.GraphModule, example_inputs: list, partitioner: Any):
    """AOTAutograd with ``partitioner`` and no-op compilers that free inputs at last use."""
    from torch._dynamo.backends.common import aot_autograd

    def boxed_nop(graph: fx.GraphModule, _inputs: list) -> Any:
        return boxed_freeing_call(graph)

    return aot_autograd(
        fw_compiler=boxed_nop, bw_compiler=boxed_nop, partition_fn=partitioner, decompositions=eager_decompositions()
    )(gm, example_inputs)


@contextlib.contextmanager
def caches_disabled():
    """A context turning off the on-disk FX-graph and AOTAutograd caches (a hit skips the partitioner)."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    with functorch_config.patch(enable_autograd_cache=False), inductor_config.patch(fx_graph_cache=False):
        yield


def min_cut_activation_memory_budget() -> float | None:
    """torch's global ``activation_memory_budget`` (min-cut's knob; 1.0 by default), None if absent."""
    from torch._functorch import config as functorch_config

    return getattr(functorch_config, "activation_memory_budget", None)


def activation_memory_budget(budget: float | None):
    """A context setting min-cut's ``activation_memory_budget`` (no-op for None)."""
    if budget is None:
        return contextlib.nullcontext()
    from torch._functorch import config as functorch_config

    return functorch_config.patch(activation_memory_budget=budget)


def graph_break_reason(gm: fx.GraphModule) -> str | None:
    """The first line of Dynamo's reason for ending the graph ``gm`` at a graph break (the rest
    of its frame runs after it, in Python and later graphs); None if it ends otherwise or was not
    made by Dynamo."""
    reason = getattr(gm, "compile_subgraph_reason", None)
    if reason is None or not getattr(reason, "graph_break", False):
        return None
    lines = str(getattr(reason, "reason", "")).strip().splitlines()
    return lines[0][:80] if lines else "graph break"


def resumed_frame() -> tuple[str, int] | None:
    """While Dynamo compiles a function it made to resume a frame after a graph break: the name
    and line of that frame's function where it broke (``forward``, 23); None otherwise."""
    try:
        from torch._dynamo.resume_execution import TORCH_DYNAMO_RESUME_IN_PREFIX
        from torch._guards import TracingContext
    except ImportError:
        return None
    codes = getattr(TracingContext.try_get(), "traced_code", None) or []
    prefix = TORCH_DYNAMO_RESUME_IN_PREFIX + "_"
    if not codes or not codes[0].co_name.startswith(prefix):
        return None
    name, _, line = codes[0].co_name[len(prefix):].rpartition("_at_")
    return (name, int(line)) if line.isdigit() else None
