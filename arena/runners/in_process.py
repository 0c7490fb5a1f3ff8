"""The in-process runner: plays batches in this process, one after another (and one per thread)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

from arena.engine import MatchEngine, MatchRecord
from arena.runners.batches import (
    ConnectedPolicySource,
    MatchBatch,
    PolicyResolver,
    SnapshotPolicies,
    play_batch,
)


class InProcessRunner:
    """Plays batches in this process, one after another."""

    def __init__(self, snapshots: SnapshotPolicies | None = None,
                 connected: ConnectedPolicySource | None = None) -> None:
        self.engine = MatchEngine()
        self.resolver = PolicyResolver(snapshots, connected)

    def run(self, batches: Iterable[MatchBatch]) -> Iterator[tuple[MatchBatch, list[MatchRecord]]]:
        for batch in batches:
            yield batch, play_batch(self.engine, self.resolver, batch)

    def close(self) -> None:
        self.engine.close()


class ThreadRunners:
    """An :class:`InProcessRunner` for each thread that asks (an engine is not shared between threads).

    Args:
        snapshots: Builds the snapshot cache of a thread's runner.
        connected: Builds the connected agents' source of a thread's runner.
    """

    def __init__(self, snapshots: Callable[[], SnapshotPolicies],
                 connected: Callable[[], ConnectedPolicySource]) -> None:
        self._snapshots, self._connected = snapshots, connected
        self._local = threading.local()

    def get(self) -> InProcessRunner:
        """This thread's runner, made on its first call."""
        runner = getattr(self._local, "runner", None)
        if runner is None:
            runner = InProcessRunner(self._snapshots(), self._connected())
            self._local.runner = runner
        return runner
