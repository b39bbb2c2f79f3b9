"""Shared fixtures for the tests that run torch.compile.

Nothing here is autouse: test modules that compile opt in with
``pytestmark = pytest.mark.usefixtures("fresh_compile")`` so the pure solver tests stay untouched.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

import fxremat
from fxremat import _torch


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
    with _torch.caches_disabled():
        yield
    torch._dynamo.reset()
    fxremat.last_reports(clear=True)


@pytest.fixture
def one_thread():
    """One intra-op thread for the test, restored after it: a parallel accumulation (index_put with
    accumulate) is not bitwise reproducible, and the allocator's peak depends on the thread count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
