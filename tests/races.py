"""Racing calls for the tests of concurrency (quotas, writers, migrations, recorders):
``race(calls)`` runs every call on a thread of its own, all released at once by a barrier,
returns their results in the order of ``calls`` and re-raises the first error a call raised."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def race(calls: Sequence[Callable[[], T]], timeout_s: float = 120.0) -> list[T]:
    """Run ``calls`` at once (a thread each, released together); their results, in order."""
    start = threading.Barrier(len(calls))
    results: list[T | None] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            start.wait()
            results[k] = calls[k]()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads), "a racing call did not return"
    return results  # type: ignore[return-value]
