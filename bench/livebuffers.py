"""Live-buffer walk over Inductor's generated code: where a compiled graph's own peak is, and what
is alive there.

Usage: ``TORCH_LOGS=output_code python your_step.py 2> step.log``, then
``python -m bench.livebuffers step.log``.  Every ``def call(self, args)`` in the log is walked:
each ``empty_strided_cpu``/``empty_strided_cuda`` adds its bytes, ``reinterpret_tensor`` and
``# reuse`` assignments alias a storage, and a ``del`` frees a storage once no alias of it is
left.  Graph inputs and tensors returned by fallback kernels (size unknown to the walk) are not
counted, so the walk gives the bytes the graph allocates itself, above what it was called with;
on the models of docs/results.md it reproduced the allocator's measured peaks to the byte once the
inputs alive at the call were added.  A diagnostic, not a test: it reads generated text.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass

_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "int8": 1,
          "uint8": 1, "bool": 1}
_ALLOC = re.compile(r"(buf\d+) = empty_strided_\w+\(\(([^)]*)\), \([^)]*\), torch\.(\w+)\)")
_ALIAS = re.compile(r"(buf\d+) = (?:reinterpret_tensor\((buf\d+),|(buf\d+)(?:\[0\])?;?\s*(?:#.*)?$)")


@dataclass(frozen=True)
class Walk:
    peak_bytes: int
    peak_line: str
    alive: tuple[tuple[str, int], ...]  # (buffer, bytes) alive at the peak, largest first


def _ints(text: str) -> list[int] | None:
    """The integers of a printed shape or stride; ``None`` where one is symbolic (``s59``: a size
    known only at run time, such as a CPU generator's saved state), whose bytes the walk leaves out."""
    try:
        return [int(d) for d in text.split(",") if d.strip()]
    except ValueError:
        return None


_INPUT = re.compile(r"assert_size_stride\((\w+), \(([^)]*)\), \(([^)]*)\)")


def walk(call_body: str, inputs: bool = False) -> Walk:
    """Walk one ``call`` function's source.  ``inputs``: also count the graph's inputs other than
    ``primals_*`` (parameters and user inputs are alive anyway), i.e. the saved tensors and tangents
    a backward is called with, each as float32 of its asserted size and stride, freed at its ``del``
    (two inputs that are views of one storage are counted twice)."""
    size: dict[str, int] = {}    # storage -> bytes, while alive
    alias: dict[str, str] = {}   # name -> its storage
    current = peak = 0
    peak_line, alive = "", {}
    for line in call_body.splitlines():
        s = line.strip()
        if inputs and (m := _INPUT.match(s)) and not m.group(1).startswith("primals_"):
            dims, strides = _ints(m.group(2)), _ints(m.group(3))
            known = dims is not None and strides is not None and all(dims)
            size[m.group(1)] = 4 * (1 + sum((d - 1) * st for d, st in zip(dims, strides))) if known else 0
            alias[m.group(1)] = m.group(1)
            current += size[m.group(1)]
        elif m := _ALLOC.match(s):
            name, shape, dtype = m.groups()
            dims = _ints(shape)
            size[name] = math.prod(dims) * _BYTES.get(dtype, 4) if dims is not None else 0
            alias[name] = name
            current += size[name]
        elif m := _ALIAS.match(s):
            source = m.group(2) or m.group(3)
            alias[m.group(1)] = alias.get(source, source)
        for name in re.findall(r"\bdel (\w+)", s):
            storage = alias.pop(name, name)
            if storage in size and storage not in alias.values():
                current -= size.pop(storage)
        if current > peak:
            peak, peak_line, alive = current, s, dict(size)
    ranked = tuple(sorted(alive.items(), key=lambda kv: -kv[1]))
    return Walk(peak, peak_line, ranked)


def call_bodies(source: str) -> list[str]:
    """The bodies of every ``def call(self, args)`` (or ``def call(args)``) in ``source``."""
    source = re.sub(r"^.*?\[__output_code\] ?", "", source, flags=re.M)  # TORCH_LOGS line prefixes
    out = []
    for m in re.finditer(r"^( *)def call\((?:self, )?args\):\n", source, flags=re.M):
        indent, body = len(m.group(1)), []
        for line in source[m.end():].splitlines():
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            body.append(line)
        out.append("\n".join(body))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", help="a TORCH_LOGS=output_code log (or one output-code module)")
    parser.add_argument("--top", type=int, default=12, help="live buffers to list at each peak")
    parser.add_argument("--inputs", action="store_true",
                        help="also count the inputs other than primals_* (saved tensors, tangents; as float32)")
    args = parser.parse_args()
    with open(args.log) as f:
        bodies = call_bodies(f.read())
    for k, body in enumerate(bodies):
        w = walk(body, args.inputs)
        what = "with its saved inputs" if args.inputs else "allocated by the graph"
        print(f"graph {k}: peak {w.peak_bytes / 2**20:.2f} MiB {what}, at: {w.peak_line[:120]}")
        print("  alive:", ", ".join(f"{b} {n / 2**20:.2f}" for b, n in w.alive[: args.top]), f"({len(w.alive)} buffers)")


if __name__ == "__main__":
    main()
