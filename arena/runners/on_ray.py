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

from arena.core.settings import Settings, ray_init_kwargs
from arena.engine import MatchRecord
from arena.engine.records import gc_paused
from arena.runners.batches import ConnectedPolicySource, MatchBatch, PolicyResolver, SnapshotPolicies, play_batch
from arena.runners.devices import gpus_per_worker as worker_gpus
from arena.runners.devices import match_engine, select_device

log = logging.getLogger(__name__)

# After a worker's batch is lost, other workers get new batches for this long.
RESTART_GRACE_S = 3.0

LOST_WORK = (RayActorError, ActorDiedError, ActorUnavailableError, WorkerCrashedError, ObjectLostError)


def init_ray(settings: Settings, num_cpus: int | None = None, num_gpus: float | None = None) -> None:
    """Join ``ARENA_RAY_ADDRESS`` or start a local Ray as the settings say (idempotent).

    Args:
        settings: ``ray_address``, else a local instance with ``ray_object_store_bytes``
            (:func:`arena.core.settings.ray_init_kwargs`).
        num_cpus: CPUs of a local instance (default: every CPU of this machine).
        num_gpus: GPUs of a local instance (default: Ray detects them). Logical GPUs on a
            CPU-only machine exercise the GPU placement (the test suite's cluster has 4).
    """
    if ray.is_initialized():
        return
    kwargs = ray_init_kwargs(settings)
    if "address" not in kwargs:
        if num_cpus is not None:
            kwargs["num_cpus"] = num_cpus
        if num_gpus is not None:
            kwargs["num_gpus"] = num_gpus
    ray.init(log_to_driver=False, **kwargs)


@ray.remote(max_restarts=-1, max_task_retries=0)
class MatchWorker:
    """A Ray actor that plays match batches with the batched engine.

    It plays on ``cuda`` (with the device-resident engine) where Ray assigned it a GPU
    and CUDA works in its process, else on ``cpu`` with the numpy engine
    (:mod:`arena.runners.devices`); it logs which and why, and reports both in
    :meth:`stats`.
    """

    def __init__(self, snapshots_factory: Callable[[str], SnapshotPolicies] | None,
                 connected: ConnectedPolicySource | None = None) -> None:
        import torch

        self.gpu_ids = [str(g) for g in ray.get_gpu_ids()]
        self.device, self.device_reason = select_device(self.gpu_ids, torch.cuda.is_available())
        level = logging.WARNING if self.gpu_ids and self.device == "cpu" else logging.INFO
        log.log(level, "match worker plays on %s (%s)", self.device, self.device_reason,
                extra={"device": self.device, "gpu_ids": self.gpu_ids})
        snapshots = snapshots_factory(self.device) if snapshots_factory is not None else None
        self.engine = match_engine(self.device)
        self.resolver = PolicyResolver(snapshots, connected)
        self.batches = 0

    def play(self, batch: MatchBatch) -> list[MatchRecord]:
        records = play_batch(self.engine, self.resolver, batch)
        self.batches += 1
        return records

    def stats(self) -> dict:
        """pid, node, device (and why), assigned GPUs, batches played since (re)start,
        snapshot-cache counters."""
        stats = getattr(self.resolver.snapshots, "stats", None)
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id(),
                "device": self.device, "device_reason": self.device_reason, "gpu_ids": self.gpu_ids,
                "batches": self.batches, "snapshot_cache": asdict(stats) if stats is not None else None}


class RayMatchRunner:
    """Plays batches on ``num_workers`` ``MatchWorker`` actors.

    Args:
        num_workers: Actors to start.
        snapshots_factory: Picklable callable ``(device) -> SnapshotCache`` run inside
            each actor (it connects to the Redis snapshot pool there).
        max_in_flight: Outstanding batches (default two per worker, so a worker
            never waits for the driver).
        gpus_per_worker: GPU share each actor asks for (``ARENA_RAY_GPUS_PER_WORKER``;
            ``None``: the cluster's GPUs shared evenly, none on a cluster without GPUs;
            see :func:`~arena.runners.devices.gpus_per_worker`).
        connected: Picklable source of connected agents' policies
            (:class:`~arena.connected.policy.ConnectedPolicies`: a Redis URL), so the
            workers ask connected agents through the broker.
    """

    def __init__(self, num_workers: int = 2,
                 snapshots_factory: Callable[[str], SnapshotPolicies] | None = None,
                 max_in_flight: int | None = None, gpus_per_worker: float | None = None,
                 connected: ConnectedPolicySource | None = None) -> None:
        cluster_gpus = ray.cluster_resources().get("GPU", 0.0)
        self.gpus_per_worker = worker_gpus(cluster_gpus, num_workers, gpus_per_worker)
        # SPREAD: on a multi-node cluster the workers land on different nodes.
        options = {"num_cpus": 0.5, "num_gpus": self.gpus_per_worker, "scheduling_strategy": "SPREAD"}
        if self.gpus_per_worker:
            log.info("starting %d match workers with %s GPU each (the cluster has %s)", num_workers,
                     self.gpus_per_worker, cluster_gpus)
        else:
            log.info("starting %d match workers on CPU (%s)", num_workers,
                     "no GPU resources in the Ray cluster" if not cluster_gpus else "ARENA_RAY_GPUS_PER_WORKER=0")
        self.workers = [MatchWorker.options(**options).remote(snapshots_factory, connected)
                        for _ in range(num_workers)]
        self._devices_logged: set[int] = set()
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
        for answer in out:
            self._log_device(answer)
        return out

    def _log_device(self, answer: dict) -> None:
        """Say once per worker process, in the driver's log, where it plays (the worker's
        own log line lands in Ray's worker logs)."""
        if answer["pid"] in self._devices_logged:
            return
        self._devices_logged.add(answer["pid"])
        fell_back = bool(answer["gpu_ids"]) and answer["device"] == "cpu"
        log.log(logging.WARNING if fell_back else logging.INFO, "match worker %s plays on %s (%s)",
                answer["pid"], answer["device"], answer["device_reason"],
                extra={"device": answer["device"], "gpu_ids": answer["gpu_ids"]})

    def close(self) -> None:
        for worker in self.workers:
            ray.kill(worker)
        self.workers = []
