"""Clone fingerprints of snapshots: computed on demand, cached by snapshot hash.

A snapshot's fingerprint (:mod:`league.evaluation.fingerprints`) is its policy's masked action
probabilities on the seeded positions of its env and role
(:mod:`arena.evaluation.fingerprint_positions`). It depends only on the snapshot's
bytes and the position set, so it is cached under both: in this process (a bounded
LRU) and in Redis (``RedisKeys.fingerprint(digest, sha256)``, float32 bytes, expiring),
where every API process finds it. Redis holds nothing that cannot be recomputed from
the snapshot; reads that must write nothing (anonymous GETs) pass ``persist=False`` and
keep what they computed in the process only.

The policy is built the one way pooled bytes become a policy
(:func:`~arena.snapshots.cache.load_snapshot_policy`: a ``NeuralPolicy`` for
safetensors weights, an ``OnnxPolicy`` for ONNX) and asked only for its ``logits``,
in batches of :data:`BATCH` rows, on the CPU.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import redis

from arena.evaluation.fingerprint_positions import Positions
from arena.snapshots.cache import SnapshotSource, load_snapshot_policy
from arena.snapshots.keys import RedisKeys
from league.evaluation.fingerprints import masked_probabilities

log = logging.getLogger(__name__)

BATCH = 128
"""Positions per ``logits`` call."""
TTL_S = 30 * 24 * 3600
"""How long Redis keeps a fingerprint nobody asked for again."""


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


class FingerprintStore:
    """Fingerprints by (position set, snapshot): an in-process LRU in front of Redis.

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
        self._local: OrderedDict[tuple[str, str], tuple[np.ndarray, bool]] = OrderedDict()  # probs, in Redis
        self._lock = threading.Lock()
        self.computed = 0

    def get(self, positions: Positions, sha256: str, *, persist: bool = True) -> Fingerprinted:
        """The fingerprint of snapshot ``sha256`` on ``positions``, computed on a miss.

        Args:
            persist: Make sure Redis has it (``False``: write nothing; what is computed
                stays in this process).

        Returns:
            The fingerprint; a snapshot that cannot be loaded or run has ``error`` set.
        """
        key = (positions.digest, sha256)
        with self._lock:
            hit = self._local.get(key)
            if hit is not None:
                self._local.move_to_end(key)
        if hit is not None:
            probs, stored = hit
            if persist and not stored:
                self._keep(key, probs, stored=self._write(key, probs))
            return Fingerprinted(sha256, probs)
        probs = self._read(key, positions.masks.shape)
        stored = probs is not None
        if probs is None:
            try:
                probs = self._compute(positions, sha256)
            except Exception as exc:  # any failure of the policy's runtime: no fingerprint, nothing more
                log.exception("no fingerprint for snapshot %s", sha256[:16])
                return Fingerprinted(sha256, None, f"{type(exc).__name__}: {exc}")
            stored = persist and self._write(key, probs)
        self._keep(key, probs, stored)
        return Fingerprinted(sha256, probs)

    def _keep(self, key: tuple[str, str], probs: np.ndarray, stored: bool) -> None:
        with self._lock:
            self._local[key] = (probs, stored)
            self._local.move_to_end(key)
            while len(self._local) > self.capacity:
                self._local.popitem(last=False)

    def _read(self, key: tuple[str, str], shape: tuple[int, ...]) -> np.ndarray | None:
        try:
            raw = self.client.get(self.keys.fingerprint(*key))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("redis unreachable (%s); fingerprinting %s without its cache", exc, key[1][:16])
            return None
        if raw is None or len(raw) != 4 * shape[0] * shape[1]:
            return None
        return np.frombuffer(raw, dtype=np.float32).reshape(shape)

    def _write(self, key: tuple[str, str], probs: np.ndarray) -> bool:
        """Stores ``probs`` in Redis; whether it did."""
        try:
            self.client.set(self.keys.fingerprint(*key), probs.tobytes(), ex=TTL_S)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("redis unreachable (%s); fingerprint of %s kept in this process", exc, key[1][:16])
            return False
        return True

    def _compute(self, positions: Positions, sha256: str) -> np.ndarray:
        policy = load_snapshot_policy(self.source, sha256, "cpu", max_bytes=self.max_bytes)
        spec = policy.spec
        if (spec.env, spec.role) != (positions.env_id, positions.role):
            raise ValueError(f"snapshot {sha256[:16]} plays {spec.env}/{spec.role}, "
                             f"not {positions.env_id}/{positions.role}")
        self.computed += 1
        return policy_fingerprint(policy, positions)
