"""The torch.compile backends: Inductor (or no-op compilers) with fxremat as the partitioner.

Invariant: the partitioner's cache identity (:meth:`FxrematPartitioner.uuid`) covers fxremat's
source and every option, so Inductor's FX-graph and AOTAutograd caches never serve a graph
planned by another version or with other options.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

import torch
import torch.fx as fx

from . import _torch
from .fragments import Fragment, fragment_of
from .options import Options
from .partitioner import partition

__all__ = ["FxrematPartitioner", "MinCutPartitioner", "make_backend", "min_cut_backend", "backend"]

_COMPILERS = ("inductor", "eager")


def _backward_patches() -> dict[str, Any] | None:
    """No horizontal fusion in the backward of fxremat's plans (see :class:`_Backend`)."""
    from torch._inductor import config as inductor_config

    if not hasattr(inductor_config, "score_fusion_memory_threshold"):
        return None
    return {"score_fusion_memory_threshold": 1 << 62}


@functools.lru_cache(maxsize=1)
def _source_hash() -> str:
    files = tuple(sorted(str(p) for p in Path(__file__).parent.rglob("*.py")))
    return _torch.get_hash_for_files(files).hex()


class FxrematPartitioner(_torch.CustomPartitionerFn or object):
    """A partition function object: usable as AOTAutograd's ``partition_fn`` and as Inductor's
    ``custom_partitioner_fn``."""

    def __init__(self, options: Options | None = None, fragment: Fragment | None = None):
        self.options = options or Options()
        self.fragment = fragment  # the graph is followed by more of the step's forward (None: not known to be)

    def __call__(self, gm: fx.GraphModule, joint_inputs: Any, **kwargs: Any):
        return partition(gm, joint_inputs, options=self.options, fragment=self.fragment, **kwargs)

    def for_graph(self, gm: fx.GraphModule, example_inputs: list[Any]) -> "FxrematPartitioner":
        """The partitioner for the Dynamo graph ``gm``: told whether the graph is followed by more
        of the step's forward (:func:`fxremat.fragments.fragment_of`)."""
        fragment = fragment_of(gm, example_inputs)
        return self if fragment == self.fragment else FxrematPartitioner(self.options, fragment)

    def uuid(self) -> str:
        kind = None if self.fragment is None else self.fragment.layer_piece
        return f"fxremat-{_source_hash()}-{self.options.cache_key()}-fragment={kind}"

    def __repr__(self) -> str:
        return f"FxrematPartitioner({self.options!r})"


class MinCutPartitioner(_torch.CustomPartitionerFn or object):
    """PyTorch's default partitioner (optionally at an ``activation_memory_budget``), for
    comparisons run through exactly the same pipeline as fxremat."""

    def __init__(self, activation_memory_budget: float | None = None):
        self.activation_memory_budget = activation_memory_budget

    def __call__(self, gm: fx.GraphModule, joint_inputs: Any, **kwargs: Any):
        with _torch.activation_memory_budget(self.activation_memory_budget):
            return _torch.min_cut(gm, joint_inputs, **kwargs)

    def uuid(self) -> str:
        return f"min-cut-{torch.__version__}-{self.activation_memory_budget!r}"


class _Backend:
    """``torch.compile(model, backend=...)`` target: AOTAutograd + a partitioner + a compiler.

    ``planned``: Inductor compiles the graphs as fxremat's memory model plans them
    (``_torch.compile_with_inductor``); min-cut's backend keeps PyTorch's defaults.

    * Wrapper-level buffer reuse (``allow_buffer_reuse``): in forward graphs Inductor's own rule,
      in backward graphs fxremat's valley rule (``_torch._local_reuse``): a dead buffer is kept
      for a later allocation of its size only
      where, in Inductor's estimate of the live bytes, it fills a valley between where it was
      freed and where it is taken over.  Inductor's own rule compares with its estimate of the
      whole graph's peak, which can be far above the real one, so across recomputed segments the
      buffers of one segment's backward stayed alive into the next segment's rebuild (HF Llama,
      seq 1024, fxremat's plan: 100.6 MiB measured with it, 93.4 without, 92.6 predicted; HF T5,
      seq 1024, padded: 173.4 with it, 147.3 without or with the valley rule, 2026-12-02).  In a
      forward, where nothing is recomputed, Inductor's rule left every suite peak unchanged and
      spares fresh large buffers (T5 s1024: page faults per step 131-162k -> 74-117k, 2026-12-07).
    * On the CPU, one layout for both graphs (``_torch.compile_with_inductor(cpu_layout="planned")``).
      Inductor lays out each CPU graph that contains a convolution channels-last, deciding each
      graph alone: a backward that saves every convolution's input (min-cut's) stays contiguous
      beside a channels-last forward, one that recomputes a convolution is channels-last.  fxremat
      compiles both graphs in the layout the partitioner planned (``_torch.cpu_layouts``: by
      default channels-last where the forward has a depthwise convolution, which oneDNN runs far
      faster so, and contiguous otherwise; the other where its pair predicts clearly less).
      Measured 2026-12-03 (AMD EPYC VM, 1 thread, median of 5 interleaved steps):
      HF ConvNeXt-atto 160 px batch 8, least peak 49.31 MiB / 693 ms contiguous against
      51.66 MiB / 512 ms channels-last in both (the extra: the channels-last copy of the input),
      fxremat at 0.8: 72.28 MiB / 616 ms against 74.88 MiB / 418 ms; min-cut's default pair
      (forward channels-last, backward contiguous) 608 ms, the same pair channels-last in both
      423 ms.  HF ResNet-50 160 px (dense convolutions): least peak 183.27 MiB / 2615 ms
      contiguous against 205.84 MiB / 2659 ms channels-last in both, so contiguous there (an
      older measurement, 2026-12-01: forward channels-last and backward contiguous 177.2 MiB and
      2.05 s against 156.0 MiB and 1.71 s contiguous in both).
    * In the backward, no horizontal fusion (kernels that only share an input merged into one;
      ``score_fusion_memory_threshold`` out of reach; a producer still fuses into its consumer):
      recomputations of neighbouring layers read the same mask or position bias, so Inductor
      fused them into one kernel and ran one layer's recomputation during another layer's
      backward, holding both layers' buffers (2026-12-02, with the merged masks of
      :mod:`fxremat.merge`: HF Qwen2, seq 1024, padded, 112.2 -> 96.3 MiB, predicted 96.3;
      HF Llama, seq 2048, 240.7 -> 201.1, predicted 201.1; HF T5, seq 1024, padded, 266.2 ->
      219.0; HF BART, seq 1024, padded, 89.4 -> 82.1).  Still needed on 2026-12-03 (least-peak
      plans, horizontal fusion allowed: HF GPT-2 eager 50.7 -> 54.6 MiB, BERT 59.4 -> 63.4, T5
      seq 256 46.5 -> 49.0, ConvNeXt 49.3 -> 54.0; step times within 2%).  Also applied to
      min-cut's pairs when a budget runs one: allowing fusion there was a trade (HF ViT at 0.8:
      98.2 MiB in 349 ms against 98.8 in 369; ConvNeXt at 0.5: 74.7 MiB against 72.3 and slower;
      Qwen2 seq 1024 at 0.5: 226.7 against 202.4), docs/results.md."""

    def __init__(self, partitioner: Any, compiler: str, planned: bool = False):
        if compiler not in _COMPILERS:
            raise ValueError(f"unknown compiler {compiler!r}; expected one of {list(_COMPILERS)}")
        self.partitioner = partitioner
        self.compiler = compiler
        self.planned = planned

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable:
        partitioner = self.partitioner
        if isinstance(partitioner, FxrematPartitioner):
            partitioner = partitioner.for_graph(gm, example_inputs)
        if self.compiler == "inductor":
            return _torch.compile_with_inductor(gm, example_inputs, partitioner,
                                                reuse_buffers="local" if self.planned else "inductor",
                                                cpu_layout="planned" if self.planned else "inductor",
                                                backward_patches=_backward_patches() if self.planned else None)
        return _torch.compile_without_inductor(gm, example_inputs, partitioner)

    def __repr__(self) -> str:
        return f"<torch.compile backend: {self.partitioner!r}, compiler={self.compiler!r}>"


def make_backend(
    solver: str = "linear",
    memory_budget: int | float | None = None,
    *,
    compiler: str = "inductor",
    strict_budget: bool = False,
    recomputable_ops: tuple[Any, ...] = (),
) -> _Backend:
    """A configured backend.

    Args:
        solver: ``"linear"`` (exact, O(n); default), ``"dp"`` (exact reference, O(n^2)) or
            ``"chen"`` (uniform sqrt(n) segments).
        memory_budget: ``None`` for the least peak; an ``int``: bytes; a ``float`` in (0, 1]:
            a fraction of each graph's peak without recomputation.  fxremat then recomputes as
            little as possible within the budget (see docs/usage.md for the exact rule).
        compiler: ``"inductor"`` (default) compiles both graphs with Inductor; ``"eager"`` runs
            them as plain FX code (for debugging and exact memory checks).
        strict_budget: for a graph whose budget no plan meets: ``False`` (default) runs the plan
            of least predicted peak with one warning; ``True`` raises :class:`fxremat.BudgetError`
            naming the smallest feasible peak.
        recomputable_ops: custom ops you vouch are pure and deterministic (names
            ``"namespace::name"`` or ``torch.ops`` ops), which the backward may then recompute;
            other custom ops are saved (:class:`fxremat.Options`).
    """
    options = Options(solver, memory_budget, strict_budget, recomputable_ops)
    return _Backend(FxrematPartitioner(options), compiler, planned=True)


def min_cut_backend(activation_memory_budget: float | None = None, *, compiler: str = "inductor") -> _Backend:
    """The same pipeline with PyTorch's min-cut partitioner: the baseline fxremat is judged against."""
    return _Backend(MinCutPartitioner(activation_memory_budget), compiler)


backend = make_backend()
