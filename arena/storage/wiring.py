"""Wiring the real services together: database, Redis (external or embedded), pool.

``open_services`` is what the CLI and the server use: it migrates the database,
starts the embedded Redis-compatible server when no ``ARENA_REDIS_URL`` is set, and
builds the snapshot pool on top. :class:`SnapshotCacheFactory` is the picklable recipe
a Ray worker uses to build its own bounded snapshot cache next to the same Redis (the
cache builds networks: torch is imported when a recipe is used, never by an API process).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from arena.connected.policy import ConnectedPolicies
from arena.core.settings import Settings, get_settings, resolved_database_url
from arena.snapshots.durable import FileSnapshotStore
from arena.snapshots.pool import RedisSnapshotPool
from arena.storage.db import Sessions, make_engine, session_factory, upgrade
from arena.storage.redis_server import EmbeddedRedis, connect_redis, redact_url, redis_client
from arena.storage.retry import retry_transient

if TYPE_CHECKING:
    from arena.snapshots.cache import SnapshotCache

log = logging.getLogger(__name__)


@dataclass
class Services:
    """Handles on the running services."""

    settings: Settings
    sessions: Sessions
    redis: redis.Redis
    redis_url: str
    pool: RedisSnapshotPool

    def connected_policies(self) -> ConnectedPolicies:
        """The picklable source of connected agents' policies (through this Redis)."""
        return ConnectedPolicies(self.redis_url, self.pool.keys.prefix)

    def snapshot_cache_factory(self) -> SnapshotCacheFactory:
        return SnapshotCacheFactory(self.redis_url, str(self.settings.snapshot_dir),
                                    self.settings.snapshot_cache_size, self.settings.max_upload_bytes)


@dataclass(frozen=True)
class SnapshotCacheFactory:
    """Builds a worker's :class:`SnapshotCache` (pickled into each Ray actor)."""

    redis_url: str
    snapshot_dir: str
    capacity: int = 32
    max_bytes: int = 64 * 1024 * 1024

    def __call__(self, device: str = "cpu") -> SnapshotCache:
        from arena.snapshots.cache import SnapshotCache  # torch: only where matches are played

        # A lazy client: a worker (re)started while Redis is down must still come up; its
        # pool reads the durable copies until Redis answers again.
        pool = RedisSnapshotPool(redis_client(self.redis_url), FileSnapshotStore(Path(self.snapshot_dir)),
                                 max_bytes=self.max_bytes)
        return SnapshotCache(pool, capacity=self.capacity, device=device, max_bytes=self.max_bytes)


def open_database(settings: Settings, timeout_s: float = 30.0) -> Sessions:
    """Wait for the database (bounded), migrate it to the latest schema, return sessions.

    Raises:
        ServiceUnavailable: The database did not answer within ``timeout_s``.
    """
    url = resolved_database_url(settings)
    retry_transient(lambda: upgrade(url), timeout_s=timeout_s,
                    what=f"connecting to the database at {redact_url(url)}",
                    hint="check ARENA_DATABASE_URL and that the server is running")
    return session_factory(make_engine(url))


@contextmanager
def open_services(settings: Settings | None = None) -> Iterator[Services]:
    """Database + Redis + snapshot pool, torn down (embedded Redis stopped) on exit."""
    settings = settings or get_settings()
    sessions = open_database(settings)
    with ExitStack() as stack:
        redis_url = settings.redis_url
        if not redis_url:
            redis_url = stack.enter_context(EmbeddedRedis(settings.redis_dir)).url
        client = connect_redis(redis_url)
        stack.callback(client.close)
        pool = RedisSnapshotPool.from_settings(client, settings)
        yield Services(settings, sessions, client, redis_url, pool)
