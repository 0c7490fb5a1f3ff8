"""Real Redis for tests (import these fixtures from ``tests/conftest.py``).

* ``embedded_redis``: one embedded server per test session, i.e. per pytest-xdist
  worker, persisted in a temporary directory.
* ``redis_url``: a logical database of that server, flushed before the test and used
  by no other test at the same time (each xdist worker has its own server), so a test
  may even ``FLUSHDB`` it.
* ``system_redis_url``: the machine's server on 127.0.0.1:6379 (skipped with a reason
  if nothing answers there). It is shared with other processes: use a unique
  ``redis_key_prefix`` and never flush it.
* ``snapshot_pool``: a snapshot pool on ``redis_url`` under a fresh key prefix, its durable
  copies in the test's ``tmp_path``.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from arena.storage.redis_server import EmbeddedRedis, RedisUnavailable, connect_redis

if TYPE_CHECKING:
    from arena.snapshots.pool import RedisSnapshotPool

SYSTEM_REDIS_URL = os.environ.get("ARENA_TEST_SYSTEM_REDIS_URL", "redis://127.0.0.1:6379/0")
_EMBEDDED_DBS = 16  # valkey's default number of logical databases; 0 is left unused
_next_db = itertools.cycle(range(1, _EMBEDDED_DBS))


@pytest.fixture(scope="session")
def embedded_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """The embedded Redis-compatible server, started once per session (per xdist worker)."""
    with EmbeddedRedis(tmp_path_factory.mktemp("embedded-redis")) as server:
        yield server


@pytest.fixture
def redis_url(embedded_redis: EmbeddedRedis) -> Iterator[str]:
    """URL of an empty logical database of the embedded server, for this test alone."""
    url = embedded_redis.url.rsplit("/", 1)[0] + f"/{next(_next_db)}"
    client = connect_redis(url, timeout_s=5)
    client.flushdb()
    client.close()
    yield url


@pytest.fixture(scope="session")
def system_redis_url() -> str:
    """URL of the system Redis (127.0.0.1:6379, or ``ARENA_TEST_SYSTEM_REDIS_URL``)."""
    try:
        connect_redis(SYSTEM_REDIS_URL, timeout_s=1.0).close()
    except RedisUnavailable as e:
        pytest.skip(f"system Redis not reachable: {e}")
    return SYSTEM_REDIS_URL


@pytest.fixture
def redis_key_prefix() -> str:
    """A key namespace no other test (or process) uses."""
    return f"arena-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def snapshot_pool(redis_url: str, tmp_path: Path, redis_key_prefix: str) -> Iterator[RedisSnapshotPool]:
    """A :class:`RedisSnapshotPool` on this test's database, keys under ``redis_key_prefix``, durable
    copies in ``tmp_path / "snapshots"`` (not fsynced: a test has no power cut to survive)."""
    from arena.snapshots.durable import FileSnapshotStore  # here: the pool imports torch, most tests need not
    from arena.snapshots.keys import RedisKeys
    from arena.snapshots.pool import RedisSnapshotPool

    client = connect_redis(redis_url, timeout_s=5)
    yield RedisSnapshotPool(client, FileSnapshotStore(tmp_path / "snapshots", fsync=False),
                            keys=RedisKeys(redis_key_prefix))
    client.close()
