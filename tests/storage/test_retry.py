"""``arena.storage.retry.retry``: how long it waits out transient failures, on a simulated clock."""

from __future__ import annotations

import pytest

from arena.storage import retry as retry_module
from tests.waiting import SteppedClock


class _Down(Exception):
    """A transient failure."""


class _ClockFromZero(SteppedClock):
    START = 0.0


def _always_down() -> None:
    raise _Down("down")


@pytest.mark.parametrize("clock_type", [SteppedClock, _ClockFromZero])
def test_retry_gives_up_within_its_timeout_from_the_first_failure(monkeypatch, clock_type) -> None:
    """Delays 0.05, 0.1, 0.2, 0.4, 0.8, then 1.0: after 1.55 s the next wait would end at 2.55 s,
    past the 2.52 s limit, so it gives up there. A first failure read at 0.0 on the clock was
    taken for "no failure yet" (``first or now``), the limit counted from the second failure,
    and it slept once more, to 2.55 s."""
    clock = clock_type()
    monkeypatch.setattr(retry_module, "time", clock.module())
    with pytest.raises(RuntimeError, match="gave up"):
        retry_module.retry(_always_down, transient=lambda e: isinstance(e, _Down), timeout_s=2.52,
                           give_up=lambda e: RuntimeError(f"gave up: {e}"), what="testing")
    assert clock.sleeps == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8])
    assert clock.elapsed <= 2.52
