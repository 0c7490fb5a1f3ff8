"""Shared by the device tests (not a test module): the devices to run on, one torch thread.

``DEVICES`` parametrizes a test over ``cpu`` and, where one exists, ``cuda`` (skipped
with a reason otherwise). ``one_torch_thread`` runs a test on one torch CPU thread: the
device code issues many small operations, which a second, busy core only slows down.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device on this machine")),
]


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
