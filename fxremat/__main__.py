"""``python -m fxremat explain [MODULE:FACTORY] [--solver S] [--memory-budget B] [--strict-budget] [--sweep] [--plot F] [--json F]``

Compiles one training step of a model with fxremat (eager compiler, caches off), prints what it
planned for each graph (see :func:`fxremat.explain`), and optionally writes a plot and a JSON
report.  ``--sweep`` also prints each graph's memory/recomputation frontier (and ``--plot`` then
draws the frontier instead of the memory timelines); the JSON always carries the frontier.
``FACTORY`` is a zero-argument callable in ``MODULE`` (an importable module name or a
``.py`` file path) returning ``(model, example_inputs_tuple)``; without it the built-in demo of
:mod:`fxremat.demo` is used.  Usage errors exit with status 2 and a one-line message.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import math
import re
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn, Sequence

from .solvers import SOLVERS

_BUDGET_ALLOWED = (
    "expected an int number of bytes >= 0 (optionally with a KiB/MiB/GiB suffix), "
    "a float fraction in (0, 1] of the peak without recomputation, or a percentage such as 50%"
)
_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30}


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``PROG: error: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_budget(text: str) -> int | float | None:
    """``--memory-budget`` values: ``none``; ``123456`` / ``64MiB`` bytes; ``0.5`` / ``50%`` fractions."""
    s = text.strip().lower().replace("_", "")
    if s == "none":
        return None
    m = re.fullmatch(r"(\d+)\s*(b|kib|mib|gib)?", s)
    if m:
        return int(m.group(1)) * _UNITS[m.group(2) or ""]
    try:
        if s.endswith("%"):
            value = float(s[:-1]) / 100
        else:
            value = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: {_BUDGET_ALLOWED}") from None
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: {_BUDGET_ALLOWED}")
    return value


def _parser() -> _Parser:
    parser = _Parser(prog="python -m fxremat", description="fxremat command-line tools.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    ex = sub.add_parser(
        "explain",
        help="compile one training step with fxremat and report its plan",
        description="Compile one forward + backward of a model with fxremat (eager compiler, caches off) and "
        "print, per compiled graph, the stages found, the checkpoints chosen, the predicted peak of fxremat "
        "vs PyTorch's min-cut partitioner vs no recomputation, the recomputation cost, and which plan was "
        "chosen and why.",
    )
    ex.add_argument(
        "factory", nargs="?", metavar="MODULE:FACTORY",
        help="zero-argument callable returning (model, example_inputs_tuple); MODULE is an importable "
        "module or a .py file (default: the built-in demo, fxremat.demo:make_demo)",
    )
    ex.add_argument("--solver", default="linear", choices=sorted(SOLVERS), help="checkpoint solver (default: linear)")
    ex.add_argument(
        "--memory-budget", type=parse_budget, default=None, metavar="B",
        help="per-graph budget: bytes (int, or with KiB/MiB/GiB), or a fraction in (0, 1] (or a percentage) "
        "of the peak without recomputation; default: none (least peak)",
    )
    ex.add_argument(
        "--strict-budget", action="store_true",
        help="a budget no plan of a graph meets is an error (default: that graph runs its least-peak plan, "
        "with a warning)",
    )
    ex.add_argument(
        "--sweep", action="store_true",
        help="also print each graph's exact memory/recomputation frontier (every budget at which the best plan "
        "changes); with --plot, draw the frontier (peak vs recomputation, min-cut's default point marked)",
    )
    ex.add_argument("--plot", metavar="FILE.png",
                    help="draw the memory timelines of fxremat and min-cut to FILE (with --sweep: the frontier)")
    ex.add_argument("--json", metavar="FILE", help="write the report, frontiers included, as JSON to FILE")
    ex.add_argument("-v", "--verbose", action="count", default=0,
                    help="log fxremat's decisions (-v: one line per graph, -vv: also the saved values)")
    return parser


def _load_factory(spec: str) -> tuple[Any, tuple, str]:
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise _UsageError(f"invalid factory {spec!r}: expected MODULE:FACTORY, e.g. mypkg.models:make_case")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise _UsageError(f"invalid factory {spec!r}: no such file {module_name}")
        mod_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[path.stem] = module
        mod_spec.loader.exec_module(module)
    else:
        if "" not in sys.path and "." not in sys.path:
            sys.path.insert(0, "")  # like `python -m`: modules in the current directory are importable
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                raise _UsageError(f"invalid factory {spec!r}: no module named {exc.name!r}") from None
            raise
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise _UsageError(f"invalid factory {spec!r}: {module_name} has no callable {attr!r}")
    result = factory()
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise _UsageError(f"factory {spec!r} must return (model, example_inputs_tuple), got {type(result).__name__}")
    model, inputs = result
    if not isinstance(inputs, (tuple, list)):
        inputs = (inputs,)
    return model, tuple(inputs), spec


def _check_writable(option: str, file: str | None) -> None:
    if file is not None and not Path(file).resolve().parent.is_dir():
        raise _UsageError(f"{option} {file}: directory {Path(file).resolve().parent} does not exist")


def _explain(args: argparse.Namespace) -> int:
    from .partitioner import BudgetError
    from .report import _PLOT_HELP, explain

    _check_writable("--plot", args.plot)
    _check_writable("--json", args.json)
    if args.plot is not None and importlib.util.find_spec("matplotlib") is None:
        raise _UsageError(f"--plot needs matplotlib, which is not installed: {_PLOT_HELP}")
    if args.factory is None:
        from .demo import DEMO_NAME, make_demo

        model, inputs = make_demo()
        name = DEMO_NAME
    else:
        model, inputs, name = _load_factory(args.factory)
    try:
        report = explain(model, *inputs, solver=args.solver, memory_budget=args.memory_budget, name=name,
                         strict_budget=args.strict_budget)
    except Exception as exc:  # noqa: BLE001 - a budget no plan meets is a usage error
        budget = BudgetError.behind(exc)
        if budget is None:
            raise
        raise _UsageError(str(budget)) from None
    print(report)
    if args.sweep:
        print()
        print(report.frontier_text())
    if args.json is not None:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=1) + "\n")
        print(f"JSON report written to {args.json}", file=sys.stderr)
    if args.plot is not None:
        (report.plot_frontier if args.sweep else report.plot)(args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(levelname)s %(message)s")
    if args.verbose:
        logging.getLogger("fxremat").setLevel(logging.DEBUG if args.verbose > 1 else logging.INFO)
    # A deprecation warning torch's pytree emits while fxremat copies the joint graph: noise here.
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
    try:
        return _explain(args)
    except _UsageError as exc:
        parser.exit(2, f"{parser.prog} {args.command}: error: {exc}\n")


if __name__ == "__main__":
    sys.exit(main())
