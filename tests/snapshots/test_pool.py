"""RedisSnapshotPool and SnapshotCache on real Redis servers (embedded and system).

Losing Redis data is done for real: ``FLUSHDB`` on the embedded server (each test has
its own logical database there), and deleting every key of the test's namespace on the
shared system server (flushing a server other processes use is not ours to do).
"""

from __future__ import annotations

import gc
import hashlib
import json
import shutil
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import torch

from agents.checkpoint import serialize_weights
from agents.checkpoint_spec import CheckpointSpec, make_spec
from agents.nets import build_net
from arena.snapshots.cache import SnapshotCache, load_snapshot_policy
from arena.snapshots.durable import FileSnapshotStore
from arena.snapshots.keys import RedisKeys
from arena.snapshots.pool import RedisSnapshotPool, SnapshotCorrupt, SnapshotNotFound
from arena.storage.redis_server import EmbeddedRedis, connect_redis
from envs.errors import InvalidSubmission

pytestmark = pytest.mark.redis

SPEC = make_spec("tictactoe-v3", "mlp", {"hidden": [8]})
POOL = "tictactoe-v3"


def tiny_weights(i: int) -> bytes:
    """Distinct valid weights for a small tictactoe MLP, deterministic in ``i``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = build_net(SPEC.arch, SPEC.hparams, SPEC.obs_shape, SPEC.num_actions)
    state = net.state_dict()
    state["head.bias"][0] = float(i)
    return serialize_weights(state)


@dataclass
class Backend:
    """A pool wired to one real server, plus what a test needs to break it."""

    kind: str
    client: redis.Redis
    keys: RedisKeys
    durable: FileSnapshotStore
    pool: RedisSnapshotPool

    def lose_redis_data(self) -> None:
        """Redis forgets everything this test stored (the durable copy survives)."""
        if self.kind == "embedded":
            self.client.flushdb()
        else:
            for key in self.client.scan_iter(match=self.keys.pattern(), count=500):
                self.client.delete(key)
        assert not list(self.client.scan_iter(match=self.keys.pattern()))


@pytest.fixture(params=["embedded", "system"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, redis_key_prefix: str
) -> Iterator[Backend]:
    """A pool on the embedded server or on the system server (skipped if absent)."""
    url = request.getfixturevalue(
        "redis_url" if request.param == "embedded" else "system_redis_url"
    )
    client = connect_redis(url, timeout_s=5)
    keys = RedisKeys(redis_key_prefix)
    durable = FileSnapshotStore(tmp_path / "snapshots", fsync=False)
    yield Backend(
        request.param, client, keys, durable, RedisSnapshotPool(client, durable, keys=keys)
    )
    for key in client.scan_iter(match=keys.pattern(), count=500):
        client.delete(key)
    client.close()


@pytest.fixture
def embedded(redis_url: str, tmp_path: Path, redis_key_prefix: str) -> Iterator[Backend]:
    """A pool on the embedded server only (for the tests that store many snapshots)."""
    client = connect_redis(redis_url, timeout_s=5)
    keys = RedisKeys(redis_key_prefix)
    durable = FileSnapshotStore(tmp_path / "snapshots", fsync=False)
    yield Backend("embedded", client, keys, durable, RedisSnapshotPool(client, durable, keys=keys))
    client.close()


def test_put_get_round_trip_with_durable_copy(backend: Backend) -> None:
    weights = tiny_weights(1)
    sha = backend.pool.put(weights, SPEC, POOL, meta={"step": 100})
    assert sha == hashlib.sha256(weights).hexdigest()
    got, spec = backend.pool.get(sha)
    assert got == weights and spec == SPEC
    assert backend.pool.record(sha).meta == {"step": 100}
    on_disk = backend.durable.root / sha[:2]
    assert (on_disk / f"{sha}.safetensors").read_bytes() == weights
    assert json.loads((on_disk / f"{sha}.json").read_text())["spec"] == SPEC.to_json()
    assert backend.client.get(backend.keys.snapshot(sha)) == weights


def test_storing_twice_is_a_no_op(backend: Backend) -> None:
    weights = tiny_weights(2)
    sha = backend.pool.put(weights, SPEC.to_json(), POOL, meta={"step": 1})
    [(_, score)] = backend.pool.list_with_scores(POOL)
    key = backend.keys.snapshot(sha)
    backend.client.pexpire(key, 600_000)  # a plain SET would clear this TTL; SET NX does not
    assert backend.pool.put(weights, SPEC, POOL, meta={"step": 2}) == sha
    assert backend.client.pttl(key) > 0
    assert backend.pool.list_with_scores(POOL) == [(sha, score)]  # same member, same score
    assert backend.pool.record(sha).meta == {"step": 1}  # the first put's meta wins
    assert backend.durable.load(sha)[1].meta == {"step": 1}


def test_list_is_newest_first_and_remove_unindexes(backend: Backend) -> None:
    pool = RedisSnapshotPool(backend.client, backend.durable, keys=backend.keys, clock=lambda: 1e9)
    shas = [pool.put(tiny_weights(i), SPEC, POOL) for i in range(4)]
    scored = pool.list_with_scores(POOL)
    assert [s for s, _ in scored] == shas[::-1]
    assert scored[-1][1] == 10**15 and [sc for _, sc in scored] == [
        10**15 + i for i in (3, 2, 1, 0)
    ]
    assert pool.list(POOL, limit=2) == shas[:1:-1] and pool.list(POOL, limit=0) == []
    assert pool.remove(POOL, shas[1]) and not pool.remove(POOL, shas[1])
    assert pool.list(POOL) == [shas[3], shas[2], shas[0]]
    assert pool.get(shas[1])[0] == tiny_weights(1)  # unindexed, not deleted
    backend.lose_redis_data()
    assert pool.list(POOL) == [shas[3], shas[2], shas[0]]  # not resurrected by the rebuild
    assert pool.count(POOL) == 3 and pool.list("other-pool") == []


def test_lost_redis_data_is_rebuilt_from_durable_copies(backend: Backend) -> None:
    pool = backend.pool
    league = [pool.put(tiny_weights(i), SPEC, "league:1", meta={"i": i}) for i in range(5)]
    other = [pool.put(tiny_weights(i), SPEC, "league:2") for i in (10, 11)]
    before = pool.list_with_scores("league:1")
    backend.lose_redis_data()

    weights, spec = pool.get(league[2])  # falls back to the file and re-populates Redis
    assert weights == tiny_weights(2) and spec == SPEC
    assert backend.client.get(backend.keys.snapshot(league[2])) == weights
    assert pool.record(league[2]).meta == {"i": 2}
    assert pool.list_with_scores("league:1") == before  # restored with the same scores
    assert pool.rebuild_from_durable() == {"league:1": 0, "league:2": 2}
    assert pool.list("league:2") == other[::-1]

    backend.lose_redis_data()
    newest = pool.put(tiny_weights(99), SPEC, "league:1")  # put restores the old set first
    assert pool.list("league:1") == [newest, *league[::-1]]


def test_a_whole_new_redis_server_is_repopulated(tmp_path: Path) -> None:
    """FLUSHALL, then the server and its files are gone: only the durable copy remains."""
    durable = FileSnapshotStore(tmp_path / "snapshots", fsync=False)
    with EmbeddedRedis(tmp_path / "redis-1") as server:
        client = connect_redis(server.url, timeout_s=5)
        pool = RedisSnapshotPool(client, durable)
        shas = [pool.put(tiny_weights(i), SPEC, POOL) for i in range(3)]
        client.flushall()
        assert pool.list(POOL) == shas[::-1] and pool.get(shas[0])[0] == tiny_weights(0)
        client.close()
    shutil.rmtree(tmp_path / "redis-1")
    with EmbeddedRedis(tmp_path / "redis-2") as fresh:
        client = connect_redis(fresh.url, timeout_s=5)
        pool = RedisSnapshotPool(client, durable)
        assert pool.rebuild_from_durable() == {POOL: 3}
        assert pool.list(POOL) == shas[::-1]
        assert [pool.get(sha)[0] for sha in shas] == [tiny_weights(i) for i in range(3)]
        assert client.dbsize() == 1 + 2 * 3  # the pool set, then weights + meta per get
        client.close()


def test_corrupted_bytes_in_redis_are_replaced_from_the_durable_copy(backend: Backend) -> None:
    weights = tiny_weights(3)
    sha = backend.pool.put(weights, SPEC, POOL)
    key = backend.keys.snapshot(sha)
    tampered = bytearray(weights)
    tampered[-1] ^= 0xFF  # one flipped bit pattern in the last float: still parseable
    backend.client.set(key, bytes(tampered))
    cache = SnapshotCache(backend.pool, capacity=2)
    policy = cache.get(sha)
    assert policy.weights_hash == sha
    assert backend.client.get(key) == weights  # repaired in place


def test_corruption_without_a_good_copy_is_a_clear_error(backend: Backend) -> None:
    sha = backend.pool.put(tiny_weights(4), SPEC, POOL)
    weights_file, record_file = backend.durable.paths(sha)
    weights_file.write_bytes(b"garbage")  # the durable copy is damaged too
    backend.client.set(backend.keys.snapshot(sha), b"also garbage")
    with pytest.raises(SnapshotCorrupt, match="durable copy does not match its hash"):
        backend.pool.get(sha)
    weights_file.unlink()
    record_file.unlink()
    with pytest.raises(SnapshotCorrupt, match="no durable copy"):
        backend.pool.get(sha)
    missing = hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(SnapshotNotFound):
        backend.pool.get(missing)
    with pytest.raises(ValueError, match="64 lowercase hex"):
        backend.pool.get("../../etc/passwd")


def test_invalid_snapshots_are_refused_and_nothing_is_stored(backend: Backend) -> None:
    c4 = make_spec("connect_four-v3", "mlp", {"hidden": [8]})
    with pytest.raises(InvalidSubmission, match="shape"):
        backend.pool.put(tiny_weights(5), c4, POOL)  # tictactoe weights, connect four spec
    with pytest.raises(ValueError, match="pool name"):
        backend.pool.put(tiny_weights(5), SPEC, "bad pool/name")
    with pytest.raises(ValueError, match="JSON-serializable"):
        backend.pool.put(tiny_weights(5), SPEC, POOL, meta={"x": object()})
    assert list(backend.client.scan_iter(match=backend.keys.pattern())) == []
    assert backend.durable.pools() == []
    assert [p.name for p in backend.durable.root.iterdir()] == []  # no weights files either


def test_put_module_stores_a_copy_not_a_view(embedded: Backend) -> None:
    torch.manual_seed(0)
    net = build_net(SPEC.arch, SPEC.hparams, SPEC.obs_shape, SPEC.num_actions)
    expected = serialize_weights(net.state_dict())
    sha = embedded.pool.put_module(net, SPEC, POOL, meta={"step": 0})
    with torch.no_grad():  # the learner keeps training after the snapshot
        for p in net.parameters():
            p.add_(1.0)
    weights, _ = embedded.pool.get(sha)
    assert weights == expected and hashlib.sha256(weights).hexdigest() == sha
    policy = SnapshotCache(embedded.pool).get(sha)
    obs = torch.rand(5, *SPEC.obs_shape).numpy()
    with torch.no_grad():
        live = net(torch.as_tensor(obs)).numpy()
    assert not (abs(policy.logits(obs) - live) < 1e-3).all()  # the snapshot did not move


def test_cache_is_lru_and_counts(embedded: Backend) -> None:
    a, b, c = (embedded.pool.put(tiny_weights(i), SPEC, POOL) for i in range(3))
    cache = SnapshotCache(embedded.pool, capacity=2)
    first = cache.get(a)
    cache.get(b)
    assert cache.get(a) is first  # a hit returns the same loaded policy
    cache.get(c)  # evicts b, the least recently used
    assert a in cache and c in cache and b not in cache
    stats = cache.stats
    assert (stats.hits, stats.misses, stats.evictions, stats.size) == (1, 3, 1, 2)
    with pytest.raises(ValueError, match="at least 1"):
        SnapshotCache(embedded.pool, capacity=0)


def test_cache_refuses_bytes_that_do_not_match_the_key(embedded: Backend) -> None:
    """The pool itself never serves mismatched bytes, so this source swaps them on purpose
    (a fault the real pool cannot produce): the cache's own hash check must catch it."""
    a, b = (embedded.pool.put(tiny_weights(i), SPEC, POOL) for i in (6, 7))

    class SwappingSource:
        def get(self, sha256: str) -> tuple[bytes, CheckpointSpec]:
            return embedded.pool.get(b if sha256 == a else a)

    cache = SnapshotCache(SwappingSource(), capacity=4)
    with pytest.raises(SnapshotCorrupt, match="refusing to load it"):
        cache.get(a)
    assert len(cache) == 0
    policy = load_snapshot_policy(embedded.pool, b, "cpu")
    assert policy.weights_hash == b


@pytest.mark.slow
def test_cache_memory_does_not_grow_with_pool_size(embedded: Backend) -> None:
    n, capacity = 1000, 32
    shas = [embedded.pool.put(tiny_weights(i), SPEC, "league:big") for i in range(n)]
    assert embedded.pool.count("league:big") == n
    cache = SnapshotCache(embedded.pool, capacity=capacity)
    alive: list[weakref.ref] = []
    for sha in embedded.pool.list("league:big"):
        policy = cache.get(sha)
        assert policy.weights_hash == sha
        alive.append(weakref.ref(policy))
        assert len(cache) <= capacity
    del policy
    stats = cache.stats
    assert (stats.size, stats.misses, stats.hits, stats.evictions) == (32, n, 0, n - capacity)
    gc.collect()
    assert sum(ref() is not None for ref in alive) == capacity  # evicted policies are freed
    for sha in shas[:capacity]:  # the oldest snapshots were fetched last: all cached
        cache.get(sha)
    assert cache.stats.hits == capacity and cache.stats.misses == n


def test_a_worker_reads_durable_copies_while_redis_is_down(embedded: Backend, tmp_path: Path) -> None:
    """A worker (re)started during a Redis outage still loads its policies."""
    from arena.storage.redis_server import free_port, redis_client

    weights = tiny_weights(7)
    sha = embedded.pool.put(weights, SPEC, POOL)
    # A client for a port nothing listens on: every Redis call fails to connect.
    down = redis_client(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5)
    pool = RedisSnapshotPool(down, embedded.durable, keys=embedded.keys)
    got, spec = pool.get(sha)
    assert got == weights and spec == SPEC
    cache = SnapshotCache(pool, capacity=2)
    assert cache.get(sha) is cache.get(sha)
    with pytest.raises(SnapshotNotFound):
        pool.get("0" * 64)
