"""The in-process runner: plays batches in this process, one after another."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

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
