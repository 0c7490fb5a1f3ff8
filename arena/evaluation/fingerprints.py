"""Clone fingerprints of snapshots: computed by the background service, read by the API.

A snapshot's fingerprint (:mod:`league.evaluation.fingerprints`) is its policy's masked action
probabilities on the seeded positions of its env and role
(:mod:`arena.evaluation.fingerprint_positions`). It depends only on the snapshot's
bytes and the position set, so it is stored under both in Redis
(``RedisKeys.fingerprint(digest, sha256)``, float32 bytes, expiring), where every
process finds it; a snapshot that cannot be fingerprinted has its reason stored instead
(``RedisKeys.fingerprint_error``), so a failure is computed once too.

The API never computes one (a GET computes nothing heavy): it reads what is stored
(:meth:`FingerprintStore.position_set`, :meth:`FingerprintStore.stored`) and queues what
is missing (:meth:`FingerprintStore.ask`: single flight, one job per snapshot however many
ask, until it is done or its mark expires). The background service's
:class:`~arena.evaluation.fingerprint_worker.FingerprintWorker` computes the jobs
(:meth:`FingerprintStore.compute`) and publishes the position set it used.

The policy is built the one way pooled bytes become a policy
(:func:`~arena.snapshots.cache.load_snapshot_policy`: a ``NeuralPolicy`` for
safetensors weights, an ``OnnxPolicy`` for ONNX) and asked only for its ``logits``,
in batches of :data:`BATCH` rows, on the CPU.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import redis

from arena.evaluation.fingerprint_positions import Positions
from arena.snapshots.keys import RedisKeys
from league.evaluation.fingerprints import masked_probabilities

if TYPE_CHECKING:
    from arena.snapshots.cache import SnapshotSource

log = logging.getLogger(__name__)

BATCH = 128
"""Positions per ``logits`` call."""
TTL_S = 30 * 24 * 3600
"""How long Redis keeps a fingerprint (or why there is none)."""
JOB_TTL_S = 600
"""A queued fingerprint is queued again if it is not done this long after it was asked for
(its worker died): until then, asking again queues nothing."""

# KEYS: the queue, then one job mark per snapshot. ARGV: mark ttl, then one job (JSON) per mark.
_ASK = """
local queued = 0
for i = 2, #KEYS do
  if redis.call('SET', KEYS[i], '1', 'NX', 'EX', ARGV[1]) then
    redis.call('RPUSH', KEYS[1], ARGV[i])
    queued = queued + 1
  end
end
return queued
"""


class LogitsPolicy(Protocol):
    """What a fingerprint needs of a policy: a batch of observations in, logits out."""

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """``(k, num_actions)`` logits of ``(k, *obs_shape)`` observations."""
        ...


def policy_fingerprint(policy: LogitsPolicy, positions: Positions) -> np.ndarray:
    """``(positions, actions)`` float32 masked action probabilities of ``policy``.

    Raises:
        ValueError: The policy answered logits of the wrong shape.
    """
    out = []
    for start in range(0, len(positions), BATCH):
        logits = np.asarray(policy.logits(positions.obs[start:start + BATCH]), dtype=np.float64)
        masks = positions.masks[start:start + BATCH]
        if logits.shape != masks.shape:
            raise ValueError(f"the policy returned logits {logits.shape} for {masks.shape[0]} positions "
                             f"of {masks.shape[1]} actions")
        out.append(masked_probabilities(logits, masks))
    return np.concatenate(out).astype(np.float32)


@dataclass(frozen=True)
class Fingerprinted:
    """A snapshot's fingerprint, or why it has none (``error``)."""

    sha256: str
    probs: np.ndarray | None
    error: str = ""


@dataclass(frozen=True)
class PositionSet:
    """The position set of an env and role, as the worker published it (or why it has none)."""

    digest: str = ""
    count: int = 0
    num_actions: int = 0
    error: str = ""


class FingerprintStore:
    """Fingerprints by (position set, snapshot) in Redis, with an in-process LRU for reads.

    Args:
        source: The snapshot pool (``(bytes, spec)`` by sha256).
        client: Redis (bytes responses).
        keys: The key namespace.
        capacity: Fingerprints kept in this process.
        max_bytes: Largest snapshot accepted (the upload limit).
    """

    def __init__(self, source: SnapshotSource, client: redis.Redis, keys: RedisKeys, *,
                 capacity: int = 1024, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.source, self.client, self.keys = source, client, keys
        self.capacity, self.max_bytes = capacity, max_bytes
        self._local: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._ask = client.register_script(_ASK)
        self.computed = 0

    # -- the readers' side (the API): nothing computed ------------------------------------
    def position_set(self, env_id: str, role: str) -> PositionSet | None:
        """The position set the worker uses for ``env_id`` and ``role`` (``None``: none yet)."""
        raw = self.client.get(self.keys.fingerprint_positions(env_id, role))
        return None if raw is None else PositionSet(**json.loads(raw))

    def stored(self, positions: PositionSet, shas: list[str]) -> dict[str, Fingerprinted | None]:
        """What is stored for each snapshot: its fingerprint, why it has none, or ``None`` (not yet)."""
        out: dict[str, Fingerprinted | None] = {}
        with self._lock:
            for sha in shas:
                hit = self._local.get((positions.digest, sha))
                if hit is not None:
                    self._local.move_to_end((positions.digest, sha))
                    out[sha] = Fingerprinted(sha, hit)
        rest = [sha for sha in dict.fromkeys(shas) if sha not in out]
        if not rest:
            return out
        raws = self.client.mget([self.keys.fingerprint(positions.digest, sha) for sha in rest]
                                + [self.keys.fingerprint_error(positions.digest, sha) for sha in rest])
        size = 4 * positions.count * positions.num_actions
        for sha, raw, error in zip(rest, raws[:len(rest)], raws[len(rest):]):
            if raw is not None and len(raw) == size:
                probs = np.frombuffer(raw, dtype=np.float32).reshape(positions.count, positions.num_actions)
                self._keep((positions.digest, sha), probs)
                out[sha] = Fingerprinted(sha, probs)
            else:
                out[sha] = None if error is None else Fingerprinted(sha, None, error.decode())
        return out

    def ask(self, env_id: str, role: str, shas: list[str]) -> int:
        """Queue the fingerprints of ``shas`` for the background service; returns how many were
        queued now (one job per snapshot: those queued already, and not expired, are not again)."""
        shas = list(dict.fromkeys(shas))
        if not shas:
            return 0
        jobs = [json.dumps({"env": env_id, "role": role, "sha256": sha}) for sha in shas]
        marks = [self.keys.fingerprint_job(env_id, role, sha) for sha in shas]
        return int(self._ask(keys=[self.keys.fingerprint_queue(), *marks], args=[JOB_TTL_S, *jobs]))

    # -- the worker's side ----------------------------------------------------------------
    def publish_positions(self, env_id: str, role: str, positions: Positions | None, error: str = "") -> None:
        """Say which position set ``env_id`` and ``role`` use now (or why there is none)."""
        found = PositionSet(error=error) if positions is None else \
            PositionSet(positions.digest, len(positions), int(positions.masks.shape[1]))
        self.client.set(self.keys.fingerprint_positions(env_id, role), json.dumps(found.__dict__), ex=TTL_S)

    def compute(self, positions: Positions, sha256: str) -> Fingerprinted:
        """The fingerprint of snapshot ``sha256`` on ``positions``: read if stored, else computed and
        stored, or why it cannot be (stored too, so it is not tried again on every ask)."""
        key = self.keys.fingerprint(positions.digest, sha256)
        raw = self.client.get(key)
        if raw is not None and len(raw) == 4 * positions.masks.size:
            return Fingerprinted(sha256, np.frombuffer(raw, dtype=np.float32).reshape(positions.masks.shape))
        try:
            probs = self._compute(positions, sha256)
        except Exception as exc:  # any failure of the policy's runtime: no fingerprint, and why
            log.exception("no fingerprint for snapshot %s", sha256[:16])
            error = f"{type(exc).__name__}: {exc}"
            self.client.set(self.keys.fingerprint_error(positions.digest, sha256), error, ex=TTL_S)
            return Fingerprinted(sha256, None, error)
        pipe = self.client.pipeline(transaction=False)
        pipe.set(key, probs.tobytes(), ex=TTL_S)
        pipe.delete(self.keys.fingerprint_error(positions.digest, sha256))
        pipe.execute()
        return Fingerprinted(sha256, probs)

    def done(self, env_id: str, role: str, sha256: str) -> None:
        """The job of ``sha256`` is finished: asking again may queue it (if nothing is stored)."""
        self.client.delete(self.keys.fingerprint_job(env_id, role, sha256))

    def _keep(self, key: tuple[str, str], probs: np.ndarray) -> None:
        with self._lock:
            self._local[key] = probs
            self._local.move_to_end(key)
            while len(self._local) > self.capacity:
                self._local.popitem(last=False)

    def _compute(self, positions: Positions, sha256: str) -> np.ndarray:
        # torch: the worker's side builds the policy; the API, which only reads and queues, never does
        from arena.snapshots.cache import load_snapshot_policy

        policy = load_snapshot_policy(self.source, sha256, "cpu", max_bytes=self.max_bytes)
        spec = policy.spec
        if (spec.env, spec.role) != (positions.env_id, positions.role):
            raise ValueError(f"snapshot {sha256[:16]} plays {spec.env}/{spec.role}, "
                             f"not {positions.env_id}/{positions.role}")
        self.computed += 1
        return policy_fingerprint(policy, positions)
