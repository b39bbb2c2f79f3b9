"""Honest peak-memory measurement of a single call.

Invariant: ``measure_peak(fn, *args).peak_bytes`` is the maximum, during the
call, of the allocator's allocated bytes minus its allocated bytes at the call's
start (>= 0; memory already live at the start never counts).  The allocator is
the CUDA caching allocator for CUDA (``memory_allocated``: live tensor bytes, not
cached blocks) and the default CPU allocator for CPU.

CPU has no peak counter, so we read torch.profiler's ``[memory]`` allocation
events (``profile_memory=True``), each carrying the allocator's
``total_allocated`` at that instant.  That counter only tracks blocks allocated
while memory profiling is on, so on CPU frees of blocks allocated before the call
are ignored (CUDA would see the total drop): the CPU peak is exactly "max over
the call of bytes allocated during it and not yet freed" (requested bytes).

torch's libkineto prints ``USDT: ... profiler_start`` and ``profiler_stop`` to stderr whenever a
profiling session starts and stops: its logger's ``USDT`` level ranks above ``ERROR``, the level
torch leaves it at, and ``KINETO_LOG_LEVEL`` is read only once, when libkineto initialises.
:func:`measure_peak` therefore catches what the process writes to file descriptor 2 while the
profiler starts and stops (not while ``fn`` runs) and passes every other line on unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
from torch.profiler import ProfilerActivity, profile

__all__ = ["PeakMeasurement", "measure_peak", "peak_of_training_step", "output_loss"]
_ALLOC = torch._C._profiler._EventType.Allocation  # tag of `[memory]` nodes in the event tree


@dataclasses.dataclass(frozen=True)
class PeakMeasurement:
    peak_bytes: int  # max allocated bytes above baseline during the call
    baseline_bytes: int  # allocator total at the call's start (CPU: profiler-tracked total)
    result: Any = dataclasses.field(default=None, compare=False, repr=False)  # fn's return


def _infer_device(objs: Iterable[Any]) -> torch.device:  # first CUDA tensor/param's device
    for o in objs:
        ts = [*o.parameters(), *o.buffers()] if isinstance(o, torch.nn.Module) else (
            o if isinstance(o, (tuple, list)) else [o])
        for t in ts:
            if isinstance(t, torch.Tensor) and t.device.type == "cuda":
                return t.device
    return torch.device("cpu")


def _allocation_events(prof: profile) -> list[tuple[int, int, int, int, int]]:
    """CPU `[memory]` events as (time_ns, id, alloc_size, total_allocated, ptr), by time."""
    out, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _ALLOC and node.extra_fields.device.type == "cpu":
            x = node.extra_fields
            out.append((node.start_time_ns, x.id, x.alloc_size, x.total_allocated, x.ptr))
    return sorted(out)


def allocation_levels(events: list[tuple[int, int, int, int, int]], sentinel_ptr: int) -> tuple[list[int], list[int], int]:
    """Bytes allocated above the baseline after each event that follows the 1-byte sentinel
    allocation at ``sentinel_ptr`` (which marks the baseline): ``(times_ns, levels, baseline)``.

    The profiler's ``total_allocated`` only tracks blocks allocated while memory profiling is on;
    a free of a block allocated before (in an earlier session) is undone, so a level counts
    exactly the bytes allocated after the sentinel and not yet freed."""
    start = next((i for i, e in enumerate(events) if e[4] == sentinel_ptr and e[2] == 1), None)
    if start is None:
        raise RuntimeError("measure_peak: torch.profiler recorded no CPU memory events "
                           "(profile_memory is not working in this torch build)")
    baseline = events[start][3]  # includes the 1-byte sentinel, like every later total
    live: set[int] = set()  # ptrs allocated during the call; frees of other blocks are undone
    correction = 0
    times, levels = [], []
    for t, _, size, total, ptr in events[start + 1:]:
        if size > 0:
            live.add(ptr)
        elif ptr in live:
            live.discard(ptr)
        else:
            correction -= size  # stale block from an earlier profiling session
        times.append(t)
        levels.append(total + correction - baseline)
    return times, levels, baseline


@contextlib.contextmanager
def _without_kineto_usdt_lines() -> Iterator[None]:
    """Hold back libkineto's ``USDT:`` lines written to file descriptor 2 inside the block; every
    other line is written to it afterwards, unchanged (see the module docstring)."""
    try:
        saved = os.dup(2)
    except OSError:  # no usable stderr: nothing to filter
        yield
        return
    try:
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                tmp.seek(0)
                kept = b"".join(line for line in tmp.read().splitlines(keepends=True) if not line.startswith(b"USDT:"))
                if kept:
                    os.write(2, kept)
    finally:
        os.close(saved)


def _measure_cpu(fn: Callable[..., Any], args: tuple) -> PeakMeasurement:
    if torch.autograd._profiler_enabled():  # a nested profile would end the outer session
        raise RuntimeError("measure_peak on CPU cannot run inside another torch.profiler session")
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _without_kineto_usdt_lines():
        prof.__enter__()
    try:
        sentinel_ptr = (sentinel := torch.empty(1, dtype=torch.uint8)).data_ptr()  # marks baseline
        result = fn(*args)
        del sentinel
    finally:
        with _without_kineto_usdt_lines():
            prof.__exit__(None, None, None)
    _, levels, baseline = allocation_levels(_allocation_events(prof), sentinel_ptr)
    return PeakMeasurement(peak_bytes=max(levels, default=0), baseline_bytes=baseline - 1, result=result)


def measure_peak(fn: Callable[..., Any], *args: Any, device: torch.device | str | None = None) -> PeakMeasurement:
    """Run ``fn(*args)`` once; device defaults to the first CUDA tensor's in args, else CPU."""
    dev = torch.device(device) if device is not None else _infer_device(args)
    if dev.type != "cuda":
        return _measure_cpu(fn, args)
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    baseline = torch.cuda.memory_allocated(dev)
    result = fn(*args)
    torch.cuda.synchronize(dev)
    peak = max(torch.cuda.max_memory_allocated(dev) - baseline, 0)
    return PeakMeasurement(peak_bytes=peak, baseline_bytes=baseline, result=result)


def output_loss(out: Any) -> torch.Tensor | None:
    """The default training loss of fxremat's tools: the sum of ``.float().sum()`` over every
    floating tensor in ``out`` (nested tuples, lists and dicts included) that requires grad;
    None if there is none."""
    from torch.utils._pytree import tree_leaves

    terms = [t.float().sum() for t in tree_leaves(out)
             if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    return sum(terms[1:], terms[0]) if terms else None


def peak_of_training_step(model: torch.nn.Module, inputs: Sequence[Any],
                          loss_fn: Callable[[Any], torch.Tensor] | None = None) -> int:
    """Peak bytes above baseline of ``model(*inputs)`` + ``loss.backward()``.
    Gradients are set to None first, so the peak includes the ``.grad`` tensors. Without
    ``loss_fn`` the loss is :func:`output_loss`.
    """
    model.zero_grad(set_to_none=True)

    def step() -> None:
        out = model(*inputs)
        loss = loss_fn(out) if loss_fn is not None else output_loss(out)
        if loss is None:
            raise ValueError("peak_of_training_step: no floating output requires grad")
        loss.backward()

    return measure_peak(step, device=_infer_device([model, *inputs])).peak_bytes
