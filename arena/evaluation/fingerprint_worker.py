"""The background service's fingerprint worker: computes the fingerprints the API queued.

``GET /agents/{id}/family`` and the admin's integrity report only read stored fingerprints
and queue the missing ones (:meth:`~arena.evaluation.fingerprints.FingerprintStore.ask`);
the background service queues every agent that passes validation too. This thread pops
the jobs (``RedisKeys.fingerprint_queue``), builds the position set of the job's env and
role (once per process), publishes it, and computes and stores the fingerprint, or why
there is none. A job lost with a worker that died (popped, never finished) is queued
again by the next ask once its mark expires (:data:`~arena.evaluation.fingerprints.JOB_TTL_S`):
a fingerprint is a pure function of the snapshot, so computing it twice is harmless.
"""

from __future__ import annotations

import json
import logging

import redis

from arena.core.loop import ServiceLoop
from arena.evaluation.fingerprint_positions import fingerprint_positions
from arena.evaluation.fingerprints import Fingerprinted, FingerprintStore

log = logging.getLogger(__name__)

POP_TIMEOUT_S = 1.0
"""How long one wait for a job blocks (the thread notices a stop between waits)."""


class FingerprintWorker(ServiceLoop):
    """Computes queued fingerprints on a thread of its own (or one at a time: :meth:`run_one`).

    Args:
        store: Where fingerprints are read and stored.
    """

    thread_name = "arena-fingerprints"

    def __init__(self, store: FingerprintStore) -> None:
        super().__init__()
        self.store = store
        self.done = 0

    def run_one(self, timeout_s: float = POP_TIMEOUT_S) -> Fingerprinted | None:
        """Pop one job (waiting up to ``timeout_s``; 0: do not wait) and do it; ``None``: no job."""
        queue = self.store.keys.fingerprint_queue()
        if timeout_s <= 0:
            raw = self.store.client.lpop(queue)
        else:
            got = self.store.client.blpop([queue], timeout=timeout_s)
            raw = None if got is None else got[1]
        if raw is None:
            return None
        job = json.loads(raw)
        env_id, role, sha = job["env"], job["role"], job["sha256"]
        try:
            try:
                positions = fingerprint_positions(env_id, role)
            except (RuntimeError, ValueError) as exc:  # a registered env that never offers the role a choice
                self.store.publish_positions(env_id, role, None, str(exc))
                return Fingerprinted(sha, None, str(exc))
            self.store.publish_positions(env_id, role, positions)
            return self.store.compute(positions, sha)
        finally:
            self.store.done(env_id, role, sha)
            self.done += 1

    def drain(self) -> int:
        """Do every queued job now (in this thread); returns how many."""
        n = 0
        while self.run_one(0) is not None:
            n += 1
        return n

    def cycle(self) -> float:
        try:
            self.run_one()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("fingerprint worker: redis unreachable (%s); retrying", exc)
            return 2.0
        return 0.0

    def stop(self, timeout: float = 10.0) -> None:
        self.stop_loop(timeout)
