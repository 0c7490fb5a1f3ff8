"""RedisSnapshotPool: league snapshots in Redis, backed by a durable store.

Weights are content-addressed: the key is the sha256 of the snapshot's bytes (safetensors
weights, or an ONNX model for an ``"arch": "onnx"`` spec), written
with ``SET NX`` so storing the same snapshot twice changes nothing. Each pool (a league
or an env id) is a sorted set of sha256s scored by creation time in microseconds,
strictly increasing within the pool, so ``list`` is newest first without ties.

Redis is a cache of the durable store, never the only copy: ``put`` writes the durable
copy first; ``get`` verifies the bytes against their hash and falls back to the
durable copy when Redis lost or damaged them (and writes them back); a pool whose
sorted set is missing is restored from the durable memberships on first use.

Snapshots are copies, never views of live weights: :meth:`RedisSnapshotPool.put_module`
serializes the module's tensors to bytes at call time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import redis

from agents.checkpoint_spec import CheckpointSpec, validate_spec
from agents.checkpoint_weights import DEFAULT_MAX_BYTES
from arena.core.settings import Settings
from arena.snapshots.durable import DurableStore, FileSnapshotStore, SnapshotRecord
from arena.snapshots.formats import verify_snapshot
from arena.snapshots.keys import RedisKeys, check_pool_name, check_sha256
from envs.errors import ArenaError

if TYPE_CHECKING:
    from torch import nn

log = logging.getLogger(__name__)

__all__ = ["RedisSnapshotPool", "SnapshotCorrupt", "SnapshotNotFound"]

_RESTORE_CHUNK = 1000

# KEYS: weights, meta hash, pool zset.
# ARGV: weights, spec JSON, meta JSON, created, sha256, now in integer microseconds.
# Returns {weights newly stored (0/1), the member's score (integer µs)}.
_PUT_SCRIPT = """
local stored = 0
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then stored = 1 end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('HSET', KEYS[2], 'spec', ARGV[2], 'meta', ARGV[3], 'created', ARGV[4])
end
local score = redis.call('ZSCORE', KEYS[3], ARGV[5])
if score then return {stored, tonumber(score)} end
local s = tonumber(ARGV[6])
local top = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if top[2] and tonumber(top[2]) >= s then s = tonumber(top[2]) + 1 end
redis.call('ZADD', KEYS[3], s, ARGV[5])
return {stored, s}
"""


class SnapshotNotFound(ArenaError):
    """No snapshot with this sha256 exists, in Redis or in the durable store."""


class SnapshotCorrupt(ArenaError):
    """Stored bytes no longer match their sha256 and no intact copy is left."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class RedisSnapshotPool:
    """Snapshot pool over a Redis client and a :class:`DurableStore`.

    Args:
        client: A ``redis.Redis`` returning bytes (``decode_responses=False``).
        durable: Where every snapshot and membership is also kept.
        keys: Key namespace (tests pass a unique prefix).
        max_bytes: Largest accepted weights.
        clock: Unix time source for creation times and pool scores.
    """

    def __init__(
        self,
        client: redis.Redis,
        durable: DurableStore,
        *,
        keys: RedisKeys | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("RedisSnapshotPool needs a client with decode_responses=False")
        self.client = client
        self.durable = durable
        self.keys = keys or RedisKeys()
        self.max_bytes = max_bytes
        self._clock = clock
        self._put_script = client.register_script(_PUT_SCRIPT)

    @classmethod
    def from_settings(cls, client: redis.Redis, settings: Settings) -> RedisSnapshotPool:
        """The service's pool: files under ``settings.snapshot_dir``, upload size limit."""
        return cls(
            client, FileSnapshotStore(settings.snapshot_dir), max_bytes=settings.max_upload_bytes
        )

    def __repr__(self) -> str:
        return f"RedisSnapshotPool(prefix={self.keys.prefix!r}, durable={self.durable!r})"

    # --- writing ------------------------------------------------------------------

    def put(
        self,
        weights: bytes,
        spec: CheckpointSpec | Mapping[str, Any],
        pool: str,
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        """Validate and store a snapshot, and add it to ``pool``.

        Storing a snapshot that is already stored is a no-op (``SET NX``; the first
        ``meta`` wins); adding it to a pool it is already in keeps its original score.

        Args:
            weights: safetensors bytes (e.g. from :func:`agents.checkpoint.serialize_weights`),
                or the bytes of an ONNX model that passed
                :func:`~agents.onnx_agents.policy.validate_onnx_bytes` (spec arch ``onnx``).
            spec: The checkpoint spec (dataclass or its JSON dict).
            pool: Pool name, e.g. an env id or ``league:<id>``.
            meta: JSON-serializable metadata (training step, parent, ...).

        Returns:
            The sha256 of ``weights``.

        Raises:
            InvalidSubmission: The bytes do not pass under ``spec``
                (:func:`arena.snapshots.formats.verify_snapshot`).
            ValueError: Bad pool name or non-JSON ``meta``.
        """
        check_pool_name(pool)
        weights = bytes(weights)
        checked_spec, sha = verify_snapshot(weights, spec, self.max_bytes)
        try:
            meta_json = json.loads(json.dumps(dict(meta or {}), allow_nan=False))
        except (TypeError, ValueError) as e:
            raise ValueError(f"snapshot meta must be JSON-serializable: {e}") from None
        proposed = SnapshotRecord(sha, checked_spec.to_json(), meta_json, created=self._clock())
        record = self.durable.save(proposed, weights)  # durable first: Redis is the cache
        self.ensure_pool(pool)  # never start a fresh set on top of a pool Redis lost
        stored, score = self._put_script(
            keys=[self.keys.snapshot(sha), self.keys.snapshot_meta(sha), self.keys.pool(pool)],
            args=[
                weights,
                json.dumps(record.spec),
                json.dumps(record.meta),
                repr(record.created),
                sha,
                int(self._clock() * 1_000_000),
            ],
        )
        self.durable.add_to_pool(pool, sha, int(score))
        log.debug("put %s in pool %s (%s)", sha[:16], pool, "new" if stored else "already stored")
        return sha

    def put_module(
        self,
        module: nn.Module,
        spec: CheckpointSpec | Mapping[str, Any],
        pool: str,
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        """Snapshot a live (training) module: its weights are serialized, i.e. copied, now.

        Later optimizer steps on ``module`` do not change what was stored.

        Returns:
            The sha256 of the serialized weights.
        """
        from agents.checkpoint import serialize_weights  # torch: only a trainer has a live module

        return self.put(serialize_weights(module.state_dict()), spec, pool, meta)

    def remove(self, pool: str, sha256: str) -> bool:
        """Take a snapshot out of ``pool`` (its weights stay: match records refer to them).

        Returns:
            Whether it was a member (in Redis or in the durable store).
        """
        in_durable = self.durable.remove_from_pool(pool, sha256)
        in_redis = bool(self.client.zrem(self.keys.pool(pool), check_sha256(sha256)))
        return in_durable or in_redis

    # --- reading ------------------------------------------------------------------

    def get(self, sha256: str) -> tuple[bytes, CheckpointSpec]:
        """Weights and spec of a snapshot, verified against ``sha256``.

        Bytes missing from Redis, or not matching their hash, are read from the durable
        store and written back to Redis. While Redis is unreachable the durable copy is
        served as it is.

        Raises:
            SnapshotNotFound: Not in Redis nor in the durable store.
            SnapshotCorrupt: Damaged in Redis and no intact durable copy.
        """
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.get(self.keys.snapshot(sha256))
                pipe.hget(self.keys.snapshot_meta(sha256), "spec")
                raw, spec_json = pipe.execute()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("redis unreachable (%s); serving snapshot %s from its durable copy",
                        exc, sha256[:16])
            weights, record = self._load_durable(sha256, damaged=False)
            return weights, validate_spec(record.spec)
        damaged = raw is not None and _sha256(raw) != sha256
        if raw is not None and not damaged and spec_json is not None:
            return raw, validate_spec(spec_json)
        if damaged:
            log.warning("snapshot %s in Redis does not match its hash; refetching", sha256[:16])
        weights, record = self._load_durable(sha256, damaged)
        self._restore(record, weights)
        return weights, validate_spec(record.spec)

    def record(self, sha256: str) -> SnapshotRecord:
        """Spec, metadata and creation time of a snapshot.

        Raises:
            SnapshotNotFound: Unknown sha256.
        """
        fields = self.client.hgetall(self.keys.snapshot_meta(sha256))
        if {b"spec", b"meta", b"created"} <= fields.keys():
            return SnapshotRecord(
                sha256,
                json.loads(fields[b"spec"]),
                json.loads(fields[b"meta"]),
                float(fields[b"created"]),
            )
        return self._load_durable(sha256, damaged=False)[1]

    def exists(self, sha256: str) -> bool:
        """Whether the snapshot is stored (in Redis or durably)."""
        if self.client.exists(self.keys.snapshot(sha256)):
            return True
        return self.durable.load(sha256) is not None

    def list(self, pool: str, limit: int | None = None) -> list[str]:
        """sha256s in ``pool``, newest first (at most ``limit``)."""
        return [sha for sha, _ in self.list_with_scores(pool, limit)]

    def list_with_scores(self, pool: str, limit: int | None = None) -> list[tuple[str, int]]:
        """``(sha256, score)`` pairs in ``pool``, newest first; score is creation µs."""
        if limit is not None and limit <= 0:
            return []
        key, stop = self.keys.pool(pool), -1 if limit is None else limit - 1
        rows = self.client.zrange(key, 0, stop, desc=True, withscores=True)
        if not rows and self.ensure_pool(pool):
            rows = self.client.zrange(key, 0, stop, desc=True, withscores=True)
        return [(member.decode(), int(score)) for member, score in rows]

    def count(self, pool: str) -> int:
        """Number of snapshots in ``pool``."""
        self.ensure_pool(pool)
        return int(self.client.zcard(self.keys.pool(pool)))

    # --- recovery -----------------------------------------------------------------

    def ensure_pool(self, pool: str) -> int:
        """Restore ``pool``'s sorted set from the durable store if Redis has none.

        Returns:
            How many members were restored (0 when the set exists or the pool is empty).
        """
        key = self.keys.pool(pool)
        if self.client.exists(key):
            return 0
        restored = self._restore_members(key, self.durable.pool_members(pool))
        if restored:
            log.warning(
                "restored pool %s in Redis: %d snapshots from durable copies", pool, restored
            )
        return restored

    def rebuild_from_durable(self) -> dict[str, int]:
        """Re-add every durable pool membership missing from Redis (weights load lazily).

        Returns:
            ``{pool: members added}`` for every durable pool.
        """
        added = {
            pool: self._restore_members(self.keys.pool(pool), self.durable.pool_members(pool))
            for pool in self.durable.pools()
        }
        log.info("rebuilt %d pool(s) from durable copies: %s", len(added), added)
        return added

    def _restore_members(self, key: str, members: Mapping[str, int]) -> int:
        items, added = list(members.items()), 0
        for start in range(0, len(items), _RESTORE_CHUNK):
            added += int(
                self.client.zadd(key, dict(items[start : start + _RESTORE_CHUNK]), nx=True)
            )
        return added

    def _load_durable(self, sha256: str, damaged: bool) -> tuple[bytes, SnapshotRecord]:
        stored = self.durable.load(sha256)
        if stored is None:
            if damaged:
                raise SnapshotCorrupt(
                    f"snapshot {sha256} is damaged in Redis and has no durable copy; "
                    "submit it again"
                )
            raise SnapshotNotFound(f"no snapshot with sha256 {sha256}")
        weights, record = stored
        if _sha256(weights) != sha256:
            raise SnapshotCorrupt(
                f"snapshot {sha256}: the durable copy does not match its hash either"
                + (" (Redis copy damaged too)" if damaged else "")
                + "; submit it again"
            )
        return weights, record

    def _restore(self, record: SnapshotRecord, weights: bytes) -> None:
        # Plain SET, not NX: a damaged value must be replaced. Content addressing makes
        # a concurrent writer's bytes identical, so the race is harmless.
        with self.client.pipeline(transaction=True) as pipe:
            pipe.set(self.keys.snapshot(record.sha256), weights)
            pipe.hset(
                self.keys.snapshot_meta(record.sha256),
                mapping={
                    "spec": json.dumps(record.spec),
                    "meta": json.dumps(record.meta),
                    "created": repr(record.created),
                },
            )
            pipe.execute()
        log.info("re-populated snapshot %s in Redis from its durable copy", record.sha256[:16])
