"""Bad options fail early with a message that says what is allowed (and, for budgets, what is feasible)."""

import re

import pytest
import torch
import torch.nn as nn

import fxremat
from fxremat import _torch
from fxremat.options import Options


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(solver="foo"), r"unknown solver 'foo'; expected one of \['chen', 'dp', 'linear'\]"),
        (dict(memory_budget=-1), r"memory_budget must be None .* got -1"),
        (dict(memory_budget=1.5), r"float fraction in \(0, 1\] .* got 1.5"),
        (dict(memory_budget=0.0), r"got 0.0"),
        (dict(memory_budget="1GB"), r"got '1GB'"),
        (dict(memory_budget=True), r"got True"),
        (dict(memory_budget=0.5, strict_budget="yes"), r"strict_budget must be True or False; got 'yes'"),
        (dict(compiler="tvm"), r"unknown compiler 'tvm'; expected one of \['inductor', 'eager'\]"),
        (dict(recomputable_ops="mylib::op"), r"recomputable_ops must be a tuple of op names .* got 'mylib::op'"),
        (dict(recomputable_ops=("fused mlp",)), r"recomputable_ops: 'fused mlp' is not an op name 'namespace::name'"),
    ],
)
def test_make_backend_rejects_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        fxremat.make_backend(**kwargs)


def test_options_are_frozen_and_keyed():
    a, b = Options(memory_budget=0.5), Options(memory_budget=1 << 20)
    c = Options(memory_budget=0.5, strict_budget=True)
    d = Options(memory_budget=0.5, recomputable_ops=("mylib::b", torch.ops.aten.mm, "mylib::b"))
    assert d.recomputable_ops == ("aten::mm", "mylib::b")  # names, sorted, once each
    assert len({a.cache_key(), b.cache_key(), c.cache_key(), d.cache_key()}) == 4
    assert len({fxremat.FxrematPartitioner(o).uuid() for o in (a, b, c, d)}) == 4
    with pytest.raises(Exception):
        a.solver = "dp"


def test_infeasible_strict_budget_names_the_smallest_feasible_peak():
    torch._dynamo.reset()
    model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.Tanh()) for _ in range(6)])
    backend = fxremat.make_backend(memory_budget=1, compiler="eager", strict_budget=True)
    compiled = torch.compile(model, backend=backend)
    with _torch.caches_disabled():
        with pytest.raises(Exception) as info:
            compiled(torch.randn(256, 64)).sum().backward()
    # torch.compile wraps backend errors in BackendCompilerFailed (whose message torch may shorten
    # after other compiles in the process); the BudgetError is in its chain, with the whole message.
    error = fxremat.BudgetError.behind(info.value)
    assert error is not None, info.value
    text = f"{type(error).__name__}: {error}"
    assert "BudgetError: fxremat: memory_budget=1: budget_bytes=1 is infeasible" in text
    # The number: 327680 bytes when this test runs alone, 262144 after this file's other compiles
    # (one 256x64 activation less; not yet explained, noted in the session note of 2026-12-01).
    found = re.search(r"the smallest peak any plan reaches is (\d+) bytes \(\d+\.\d\d MiB\)", text)
    assert found and int(found.group(1)) in (262144, 327680), text
    torch._dynamo.reset()
