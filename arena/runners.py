"""Match runners: one interface, an in-process implementation and a Ray one.

A runner takes :class:`MatchBatch` es (jobs plus where each agent comes from) and yields
``(batch, records)`` as batches complete, in any order. The Ray implementation lives
in :mod:`arena.ray_runner` so Ray is imported only where it is used.

Agents are resolved *inside* the worker: builtins by name, neural agents by snapshot
sha256 through a bounded cache, so a worker holds only the policies it recently
played, never the whole league (an RLlib memory bug we avoid on purpose).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from agents.catalog import make_policy
from agents.policy import Policy
from arena.engine import MatchEngine, MatchJob, MatchRecord
from envs.errors import UnknownAgent


@dataclass(frozen=True)
class AgentSource:
    """Where a worker gets an agent's policy.

    Attributes:
        key: Agent id as it appears in match records.
        builtin: Builtin name (``heuristic:epsilon=0.3``) for scripted agents.
        snapshot: sha256 of the snapshot in the pool for neural agents.
    """

    key: str
    builtin: str | None = None
    snapshot: str | None = None


@dataclass
class MatchBatch:
    """Jobs for one env, with the sources of every agent they use."""

    env_id: str
    jobs: list[MatchJob]
    sources: dict[str, AgentSource] = field(default_factory=dict)
    batch_id: int = 0


class SnapshotPolicies(Protocol):
    """A bounded source of neural policies by snapshot sha256 (:class:`SnapshotCache`)."""

    def get(self, sha256: str) -> Policy:
        ...


class PolicyResolver:
    """Builds the policies a batch needs: builtins by name, neural ones by snapshot.

    Neural policies come from a bounded cache (``arena.snapshot_cache.SnapshotCache``),
    so a worker's memory does not grow with the size of the league.
    """

    def __init__(self, snapshots: SnapshotPolicies | None = None) -> None:
        self.snapshots = snapshots
        self._builtins: dict[tuple[str, str], Policy] = {}

    def policy(self, env_id: str, source: AgentSource) -> Policy:
        if source.builtin is not None:
            key = (env_id, source.builtin)
            if key not in self._builtins:
                self._builtins[key] = make_policy(source.builtin, env_id)
            return self._builtins[key]
        if source.snapshot is None or self.snapshots is None:
            raise UnknownAgent(f"agent {source.key!r} has no builtin name and no snapshot source")
        return self.snapshots.get(source.snapshot)

    def policies(self, batch: MatchBatch) -> dict[str, Policy]:
        keys = {a for job in batch.jobs for a in job.agents}
        out = {}
        for key in keys:
            source = batch.sources.get(key, AgentSource(key=key, builtin=key))
            out[key] = self.policy(batch.env_id, source)
        return out


def play_batch(engine: MatchEngine, resolver: PolicyResolver, batch: MatchBatch) -> list[MatchRecord]:
    """What a worker does with one batch."""
    return engine.play(batch.env_id, batch.jobs, resolver.policies(batch))


class MatchRunner(Protocol):
    """Plays batches somewhere and yields them as they complete."""

    def run(self, batches: Iterable[MatchBatch]) -> Iterator[tuple[MatchBatch, list[MatchRecord]]]:
        ...

    def close(self) -> None:
        ...


class InProcessRunner:
    """Plays batches in this process, one after another."""

    def __init__(self, snapshots: SnapshotPolicies | None = None) -> None:
        self.engine = MatchEngine()
        self.resolver = PolicyResolver(snapshots)

    def run(self, batches: Iterable[MatchBatch]) -> Iterator[tuple[MatchBatch, list[MatchRecord]]]:
        for batch in batches:
            yield batch, play_batch(self.engine, self.resolver, batch)

    def close(self) -> None:
        self.engine.close()
