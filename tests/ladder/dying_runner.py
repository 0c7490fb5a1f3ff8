"""A runner whose worker host is lost mid-run, for the tests that a queued batch survives its worker."""

from __future__ import annotations

from arena.runners import InProcessRunner


class Crash(RuntimeError):
    """The worker host lost (raised out of :meth:`DiesAfter.run`)."""


class DiesAfter:
    """Plays ``good`` batches, takes one more off the queue (dispatched), then dies."""

    def __init__(self, good: int) -> None:
        self.good, self.inner, self.dispatched = good, InProcessRunner(), []

    def run(self, batches):
        for i, batch in enumerate(batches):
            self.dispatched.append([j.match_id for j in batch.jobs])
            if i == self.good:
                raise Crash("worker host lost")
            yield from self.inner.run([batch])
