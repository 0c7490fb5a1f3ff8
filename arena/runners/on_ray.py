"""Match batches on Ray: ``MatchWorker`` actors, bounded in-flight work, re-dispatch.

Each actor owns a :class:`~arena.engine.MatchEngine` and a bounded policy cache and
plays whole batches (thousands of matches per call, so Ray's per-call overhead is
noise). The driver keeps at most ``max_in_flight`` batches outstanding and collects
them with ``ray.wait``. A batch whose actor died is re-dispatched unchanged — the
same match ids — so the recorder's ``ON CONFLICT DO NOTHING`` makes the result count
once whichever copy lands.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict

import ray
from ray.exceptions import (
    ActorDiedError,
    ActorUnavailableError,
    ObjectLostError,
    RayActorError,
    WorkerCrashedError,
)

from arena.engine import MatchEngine, MatchRecord
from arena.engine.records import gc_paused
from arena.runners.batches import MatchBatch, PolicyResolver, SnapshotPolicies, play_batch
from arena.settings import Settings, ray_init_kwargs

log = logging.getLogger(__name__)

# After a worker's batch is lost, other workers get new batches for this long.
RESTART_GRACE_S = 3.0

LOST_WORK = (RayActorError, ActorDiedError, ActorUnavailableError, WorkerCrashedError, ObjectLostError)


def init_ray(settings: Settings, num_cpus: int | None = None) -> None:
    """Join ``ARENA_RAY_ADDRESS`` or start a local Ray as the settings say (idempotent).

    Args:
        settings: ``ray_address``, else a local instance with ``ray_object_store_bytes``
            (:func:`arena.settings.ray_init_kwargs`).
        num_cpus: CPUs of a local instance (default: every CPU of this machine).
    """
    if ray.is_initialized():
        return
    kwargs = ray_init_kwargs(settings)
    if num_cpus is not None and "address" not in kwargs:
        kwargs["num_cpus"] = num_cpus
    ray.init(log_to_driver=False, **kwargs)


@ray.remote(max_restarts=-1, max_task_retries=0)
class MatchWorker:
    """A Ray actor that plays match batches with the batched engine."""

    def __init__(self, snapshots_factory: Callable[[str], SnapshotPolicies] | None, device: str) -> None:
        snapshots = snapshots_factory(device) if snapshots_factory is not None else None
        self.engine = MatchEngine()
        self.resolver = PolicyResolver(snapshots)
        self.batches = 0

    def play(self, batch: MatchBatch) -> list[MatchRecord]:
        records = play_batch(self.engine, self.resolver, batch)
        self.batches += 1
        return records

    def stats(self) -> dict:
        """pid, node, batches played since (re)start, snapshot-cache counters."""
        stats = getattr(self.resolver.snapshots, "stats", None)
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id(),
                "batches": self.batches, "snapshot_cache": asdict(stats) if stats is not None else None}


class RayMatchRunner:
    """Plays batches on ``num_workers`` ``MatchWorker`` actors.

    Args:
        num_workers: Actors to start.
        snapshots_factory: Picklable callable ``(device) -> SnapshotCache`` run inside
            each actor (it connects to the Redis snapshot pool there).
        max_in_flight: Outstanding batches (default two per worker, so a worker
            never waits for the driver).
    """

    def __init__(self, num_workers: int = 2,
                 snapshots_factory: Callable[[str], SnapshotPolicies] | None = None,
                 max_in_flight: int | None = None) -> None:
        gpus = ray.cluster_resources().get("GPU", 0.0)
        self.device = "cuda" if gpus > 0 else "cpu"
        # SPREAD: on a multi-node cluster the workers land on different nodes.
        options = {"num_cpus": 0.5, "scheduling_strategy": "SPREAD"}
        if gpus > 0:
            options["num_gpus"] = min(1.0, gpus / num_workers)
        self.workers = [
            MatchWorker.options(**options).remote(snapshots_factory, self.device)
            for _ in range(num_workers)
        ]
        self.max_in_flight = max_in_flight or 2 * num_workers
        self.redispatched = 0
        self._next = 0
        self._resting: dict[int, float] = {}

    def _submit(self, batch: MatchBatch, inflight: dict) -> None:
        """Send ``batch`` to the next worker not known to be restarting."""
        now, n = time.monotonic(), len(self.workers)
        order = [(self._next + i) % n for i in range(n)]
        index = next((i for i in order if self._resting.get(i, 0.0) <= now), order[0])
        self._next = index + 1
        inflight[self.workers[index].play.remote(batch)] = (batch, index)

    def run(self, batches: Iterable[MatchBatch]) -> Iterator[tuple[MatchBatch, list[MatchRecord]]]:
        source = iter(batches)
        retry: deque[MatchBatch] = deque()
        inflight: dict = {}
        exhausted = False
        while True:
            while len(inflight) < self.max_in_flight and (retry or not exhausted):
                batch = retry.popleft() if retry else next(source, None)
                if batch is None:
                    exhausted = True
                    break
                self._submit(batch, inflight)
            if not inflight:
                return
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                batch, index = inflight.pop(ref)
                try:
                    with gc_paused():  # unpickling thousands of records
                        records = ray.get(ref)
                except LOST_WORK as exc:
                    self.redispatched += 1
                    # The actor is being restarted: send it nothing for a moment.
                    self._resting[index] = time.monotonic() + RESTART_GRACE_S
                    log.warning("batch %d lost (%s); re-dispatching its %d matches with the same ids",
                                batch.batch_id, type(exc).__name__, len(batch.jobs),
                                extra={"env": batch.env_id, "batch": batch.batch_id,
                                       "first_match_id": batch.jobs[0].match_id if batch.jobs else None})
                    retry.append(batch)
                    continue
                yield batch, records

    @property
    def in_flight_limit(self) -> int:
        return self.max_in_flight

    def stats(self, timeout_s: float = 2.0) -> list[dict]:
        """``MatchWorker.stats()`` of every worker that answers within ``timeout_s``
        (a worker being restarted after a crash does not)."""
        refs = [w.stats.remote() for w in self.workers]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        out = []
        for ref in ready:
            try:
                out.append(ray.get(ref))
            except LOST_WORK:
                continue
        return out

    def close(self) -> None:
        for worker in self.workers:
            ray.kill(worker)
        self.workers = []
