"""Shared fixtures for the tests that run torch.compile.

Nothing here is autouse: test modules that compile opt in with
``pytestmark = pytest.mark.usefixtures("fresh_compile")`` so the pure solver tests stay untouched.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch._dynamo
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config

import fxremat


@pytest.fixture
def fresh_compile():
    """A clean compile environment for one test, restored afterwards.

    * Dynamo's caches are reset before and after, so every test compiles (and so partitions)
      afresh and no test hits another's recompile limit.
    * The FX graph cache and AOTAutograd's cache are disabled (through ``config.patch``, restored
      on exit): a cache hit would skip the partitioner, leaving ``fxremat.last_reports()`` empty and
      the plan under test unplanned.
    * fxremat's report list is cleared, so ``last_reports()`` holds this test's graphs only.
    """
    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
    with contextlib.ExitStack() as stack:
        stack.enter_context(inductor_config.patch(fx_graph_cache=False))
        stack.enter_context(functorch_config.patch(enable_autograd_cache=False))
        yield
    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
