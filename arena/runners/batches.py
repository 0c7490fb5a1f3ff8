"""What every runner shares: match batches, where agents come from, the runner interface.

A runner takes :class:`MatchBatch` es (jobs plus where each agent comes from) and yields
``(batch, records)`` as batches complete, in any order. The twins are
:class:`~arena.runners.in_process.InProcessRunner` and
:class:`~arena.runners.on_ray.RayMatchRunner` (Ray is imported only there).

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
        connected: Database id of a connected (or human) agent, played by its client
            over the broker (:class:`~arena.connected.policy.ConnectedPolicy`).
        human: A person (the human time control).
    """

    key: str
    builtin: str | None = None
    snapshot: str | None = None
    connected: int | None = None
    human: bool = False


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


class ConnectedPolicySource(Protocol):
    """Connected agents' policies (:class:`~arena.connected.policy.ConnectedPolicies`)."""

    def get(self, env_id: str, source: AgentSource) -> Policy:
        ...


class PolicyResolver:
    """Builds the policies a batch needs: builtins by name, neural ones by snapshot,
    connected ones through the broker.

    Neural policies come from a bounded cache (``arena.snapshots.cache.SnapshotCache``),
    so a worker's memory does not grow with the size of the league.
    """

    def __init__(self, snapshots: SnapshotPolicies | None = None,
                 connected: ConnectedPolicySource | None = None) -> None:
        self.snapshots = snapshots
        self.connected = connected
        self._builtins: dict[tuple[str, str], Policy] = {}

    def policy(self, env_id: str, source: AgentSource) -> Policy:
        if source.connected is not None:
            if self.connected is None:
                raise UnknownAgent(f"agent {source.key!r} is a connected agent and this worker has no broker")
            return self.connected.get(env_id, source)
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
