"""Match runners: one interface, an in-process implementation and a Ray one.

A runner takes :class:`MatchBatch` es (jobs plus where each agent comes from) and yields
``(batch, records)`` as batches complete, in any order. The Ray implementation lives
in :mod:`arena.ray_runner` so Ray is imported only where it is used.

Agents are resolved *inside* the worker: builtins by name, neural agents by snapshot
sha256 through a bounded cache, so a worker holds only the policies it recently
played, never the whole league.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Protocol

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


SnapshotLoader = Callable[[str, str], Policy]  # (sha256, device) -> policy


class PolicyResolver:
    """Builds policies on demand; neural ones through a bounded LRU cache.

    Args:
        load_snapshot: Fetches and validates a snapshot into a policy.
        cache_size: Neural policies kept at most (builtins are tiny and always kept).
        device: ``cpu`` or ``cuda`` for neural policies.
    """

    def __init__(self, load_snapshot: SnapshotLoader | None = None, cache_size: int = 32,
                 device: str = "cpu") -> None:
        self.load_snapshot = load_snapshot
        self.cache_size = cache_size
        self.device = device
        self._builtins: dict[tuple[str, str], Policy] = {}
        self._neural: OrderedDict[str, Policy] = OrderedDict()
        self.hits = self.misses = 0

    def policy(self, env_id: str, source: AgentSource) -> Policy:
        if source.builtin is not None:
            key = (env_id, source.builtin)
            if key not in self._builtins:
                self._builtins[key] = make_policy(source.builtin, env_id)
            return self._builtins[key]
        if source.snapshot is None or self.load_snapshot is None:
            raise UnknownAgent(f"agent {source.key!r} has no builtin name and no loadable snapshot")
        if source.snapshot in self._neural:
            self.hits += 1
            self._neural.move_to_end(source.snapshot)
            return self._neural[source.snapshot]
        self.misses += 1
        policy = self.load_snapshot(source.snapshot, self.device)
        self._neural[source.snapshot] = policy
        while len(self._neural) > self.cache_size:
            self._neural.popitem(last=False)
        return policy

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

    def __init__(self, load_snapshot: SnapshotLoader | None = None, cache_size: int = 32,
                 device: str = "cpu") -> None:
        self.engine = MatchEngine()
        self.resolver = PolicyResolver(load_snapshot, cache_size, device)

    def run(self, batches: Iterable[MatchBatch]) -> Iterator[tuple[MatchBatch, list[MatchRecord]]]:
        for batch in batches:
            yield batch, play_batch(self.engine, self.resolver, batch)

    def close(self) -> None:
        self.engine.close()
