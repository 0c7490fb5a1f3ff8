"""Chaos: a rated ladder on a multi-node Ray cluster while its machinery is broken.

Set-up, all real and all on this machine: a Ray cluster of ``--nodes`` nodes started
with ``ray start`` (a head plus nodes joining it over loopback,
:class:`benchmarks.support.faults.LocalRayCluster`); a fresh PostgreSQL database on the server at
``--postgres-url``, reached through a TCP proxy we can cut (:class:`benchmarks.support.faults.TcpProxy`);
a Redis-compatible server (valkey, AOF ``everysec``) owned by this script so it can be
killed; the snapshot pool on it holding ``--neural`` MLP snapshots next to the
scripted heuristics; ``--workers`` MatchWorker actors spread over the nodes.

During a ``--matches`` ladder run (dispatch paced at ``--max-rate`` so the faults land
mid-run): a Ray worker process is SIGKILLed every ``--kill-every`` seconds, Redis is
``kill -9``-ed once at ``--redis-kill-at`` and restarted ``--redis-down-s`` later, and
the database is unreachable for ``--db-outage-s`` from ``--db-outage-at``.

Afterwards, checked from the database itself:

* ``lost``: scheduled match ids with no row; ``duplicated``: surplus rows, matches
  without exactly one participant row per seat, and rating events beyond one per seat
  (a result applied twice would show there);
* ``ratings_match_rebuild``: the live ratings equal a rebuild from the match log;
* ``pool_intact``: every snapshot reads back and hashes right, pool membership whole;
* ``ray_resources_leaked``: CPUs still held once the workers are gone;
* ``queue_left``: matches still in the persisted queue.

    python benchmarks/chaos.py [--matches 20000] [--nodes 2] [--workers 2] [--smoke]

Prints a table, then one JSON line: ``scheduled``, ``recorded``, ``lost``,
``duplicated``, ``worker_kills``, ``redis_restarts``, ``db_outage_s``,
``ratings_match_rebuild``, ``pool_intact``, ``ray_resources_leaked``, ``queue_left``,
``redispatched_batches``, ``nodes``, ``runs``, ``seconds``. ``--smoke``: 400 matches on
one node and one worker, every fault once within seconds (it needs the PostgreSQL
server). The suite runs it at 2,000 matches on two nodes with every fault instead
(tests/deploy/test_multinode.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)  # benchmarks/league.py would shadow the league package

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray
from sqlalchemy import func, make_url, select

from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from arena.core.agent_status import AgentStatus
from arena.core.settings import Settings
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.ladder.recorder import rebuild_ratings
from arena.ladder.registration import register_snapshot_agent
from arena.runners import AgentSource
from arena.runners.on_ray import RayMatchRunner
from arena.storage.db import models
from arena.storage.db import repositories as repo
from arena.storage.redis_server import EmbeddedRedis
from arena.storage.wiring import open_services
from benchmarks.support.databases import POSTGRES_URL, create_database, drop_database
from benchmarks.support.faults import LocalRayCluster, TcpProxy
from envs.errors import ArenaError

ENV = "connect_four-v3"
POOL = "chaos"
BUILTINS = ("heuristic", "heuristic:epsilon=0.2", "heuristic:epsilon=0.5", "heuristic:epsilon=0.8", "random")

log = logging.getLogger("chaos")


class Tap:
    """Passes batches to a runner and remembers every match id it dispatched."""

    def __init__(self, runner: RayMatchRunner) -> None:
        self.runner, self.ids = runner, set()

    def run(self, batches):
        def tapped():
            for batch in batches:
                self.ids.update(j.match_id for j in batch.jobs)
                yield batch

        return self.runner.run(tapped())


class Chaos(threading.Thread):
    """The fault schedule, on its own thread, relative to the start of the run."""

    def __init__(self, runner: RayMatchRunner, redis: EmbeddedRedis, proxy: TcpProxy, args) -> None:
        super().__init__(name="chaos", daemon=True)
        self.runner, self.redis, self.proxy, self.args = runner, redis, proxy, args
        self.stop = threading.Event()
        self.worker_kills = self.redis_restarts = 0
        self.db_outage_s = 0.0
        self.nodes: set[str] = set()
        self.events: list[str] = []

    def _note(self, t0: float, what: str) -> None:
        self.events.append(f"{time.monotonic() - t0:6.1f}s  {what}")
        log.warning(what)

    def run(self) -> None:
        a, t0 = self.args, time.monotonic()
        next_kill, redis_done, db_done = a.kill_every, a.redis_kill_at < 0, a.db_outage_at < 0
        while not self.stop.wait(0.1):
            t = time.monotonic() - t0
            if a.kill_every > 0 and t >= next_kill:
                next_kill += a.kill_every
                self._kill_worker(t0)
            if not redis_done and t >= a.redis_kill_at:
                redis_done = True
                pid = self.redis.kill()
                self._note(t0, f"redis (pid {pid}) killed with SIGKILL")
                stopped = self.stop.wait(a.redis_down_s)
                self.redis.start()
                self.redis_restarts += 1
                self._note(t0, f"redis restarted on port {self.redis.port} from its AOF")
                if stopped:
                    break
            if not db_done and t >= a.db_outage_at:
                db_done = True
                self.proxy.outage(a.db_outage_s)
                self.db_outage_s = a.db_outage_s
                self._note(t0, f"database unreachable for {a.db_outage_s:g}s")

    def _kill_worker(self, t0: float) -> None:
        stats = self.runner.stats(timeout_s=1.0)
        self.nodes.update(s["node_id"] for s in stats)
        if not stats:
            return
        victim = stats[self.worker_kills % len(stats)]
        try:
            os.kill(victim["pid"], signal.SIGKILL)
        except ProcessLookupError:
            return
        self.worker_kills += 1
        self._note(t0, f"ray worker pid {victim['pid']} on node {victim['node_id'][:8]} killed")


def duplicated(sessions) -> int:
    """Surplus match rows, matches without one participant per seat, surplus rating events."""
    M, P, E = models.Match, models.MatchParticipant, models.RatingEvent
    with sessions() as s:
        rows = s.scalar(select(func.count()).where(M.env_id == ENV))
        distinct = s.scalar(select(func.count(func.distinct(M.id))).where(M.env_id == ENV))
        per_match = select(P.match_seq, func.count().label("n")).group_by(P.match_seq).subquery()
        bad_participants = s.scalar(select(func.count()).select_from(M).join(
            per_match, per_match.c.match_seq == M.seq, isouter=True).where(
            M.env_id == ENV, func.coalesce(per_match.c.n, 0) != 2))
        events = s.scalar(select(func.count()).select_from(E).join(M, M.seq == E.match_seq)
                          .where(M.env_id == ENV))
        rated = s.scalar(select(func.count()).where(M.env_id == ENV, M.rated.is_(True)))
    return (rows - distinct) + bad_participants + max(0, events - 2 * rated)


def recorded_ids(sessions) -> set[str]:
    with sessions() as s:
        return set(s.scalars(select(models.Match.id).where(models.Match.env_id == ENV)))


def pool_intact(services, shas: list[str]) -> bool:
    """Every snapshot reads back with the right hash; the pool lists all of them."""
    for sha in shas:
        weights, _ = services.pool.get(sha)
        if hashlib.sha256(weights).hexdigest() != sha:
            return False
    return set(services.pool.list(POOL)) == set(shas)


def ray_leaked(timeout_s: float = 20.0) -> bool:
    """Whether CPUs are still held after the workers were killed (waits for release)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ray.available_resources().get("CPU", 0.0) >= ray.cluster_resources().get("CPU", 0.0):
            return False
        time.sleep(0.5)
    return True


def run(args) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix="arena-chaos-"))
    server = make_url(args.postgres_url)
    name = create_database(args.postgres_url, "arena_chaos")
    proxy = TcpProxy(server.host or "127.0.0.1", server.port or 5432).start()
    db_url = server.set(host="127.0.0.1", port=proxy.port, database=name).render_as_string(hide_password=False)
    redis = EmbeddedRedis(data_dir / "redis").start()
    cluster = LocalRayCluster(nodes=args.nodes, cpus_per_node=args.cpus_per_node)
    try:
        cluster.start()
        cluster.connect()
        settings = Settings(data_dir=data_dir, database_url=db_url, redis_url=redis.url)
        with open_services(settings) as services:
            neural = []
            for i in range(args.neural):
                state, spec = random_init_checkpoint(ENV, "mlp", {"hidden": [32]}, seed=i, name=f"mlp-{i}")
                with services.sessions.begin() as session:
                    agent = register_snapshot_agent(session, services.pool, serialize_weights(state), spec,
                                                    pool_name=POOL, name=f"mlp-{i}", status=AgentStatus.PLACEMENT)
                neural.append(AgentSource(key=agent.key, snapshot=agent.sha256))
            shas = [s.snapshot for s in neural]
            ladder = open_ladder(services.sessions, LadderConfig(ENV, batch_size=args.batch_size, seed=args.seed,
                                                                 max_rate=args.max_rate, db_retry_s=60.0))
            ladder.add_agents([AgentSource(key=b, builtin=b) for b in BUILTINS] + neural)
            runner = RayMatchRunner(args.workers, snapshots_factory=services.snapshot_cache_factory())
            tap = Tap(runner)
            chaos = Chaos(runner, redis, proxy, args)
            start = time.perf_counter()
            chaos.start()

            def report(p) -> None:
                if p.batches % 10 == 0:
                    log.info("recorded %d / %d (%d redispatched batches)", p.recorded, args.matches,
                             runner.redispatched)

            progress, attempts = None, 0
            while True:  # as the service does: a failed round leaves its matches queued
                attempts += 1
                try:
                    progress = ladder.run(tap, args.matches if progress is None else 0, on_progress=report)
                    break
                except ArenaError as exc:
                    if attempts >= 3:
                        raise
                    log.warning("ladder run failed (%s); resuming from the queue", exc)
            elapsed = time.perf_counter() - start
            chaos.stop.set()
            chaos.join()
            chaos.nodes.update(s["node_id"] for s in runner.stats(timeout_s=5.0))
            redispatched = runner.redispatched
            runner.close()
            leaked = ray_leaked()
            stored = recorded_ids(services.sessions)
            with services.sessions() as s:
                queue_left = repo.queue_depth(s)
            report_ = rebuild_ratings(services.sessions, ladder.spec)
            out = {
                "scheduled": len(tap.ids), "recorded": len(stored & tap.ids),
                "lost": len(tap.ids - stored), "duplicated": duplicated(services.sessions) + len(stored - tap.ids),
                "worker_kills": chaos.worker_kills, "redis_restarts": chaos.redis_restarts,
                "db_outage_s": chaos.db_outage_s, "ratings_match_rebuild": report_.equal,
                "pool_intact": pool_intact(services, shas), "ray_resources_leaked": leaked,
                "queue_left": queue_left, "redispatched_batches": redispatched, "nodes": len(chaos.nodes),
                "runs": attempts, "seconds": round(elapsed, 1),
            }
            return out | {"_events": chaos.events}
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
        redis.stop()
        proxy.stop()
        drop_database(args.postgres_url, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=250)
    parser.add_argument("--max-rate", type=float, default=400.0, help="dispatched matches/s (pacing)")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--cpus-per-node", type=float, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--neural", type=int, default=4, help="MLP snapshots in the pool")
    parser.add_argument("--kill-every", type=float, default=5.0, help="seconds between worker kills (0: none)")
    parser.add_argument("--redis-kill-at", type=float, default=12.0, help="seconds into the run (<0: never)")
    parser.add_argument("--redis-down-s", type=float, default=3.0)
    parser.add_argument("--db-outage-at", type=float, default=22.0, help="seconds into the run (<0: never)")
    parser.add_argument("--db-outage-s", type=float, default=10.0)
    parser.add_argument("--postgres-url", default=POSTGRES_URL)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.matches, args.batch_size, args.max_rate, args.nodes, args.workers, args.neural = 400, 50, 100.0, 1, 1, 1
        args.kill_every, args.redis_kill_at, args.redis_down_s, args.db_outage_at, args.db_outage_s = \
            3.0, 1.0, 0.5, 2.0, 1.0
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    log.setLevel(logging.INFO)
    out = run(args)
    events = out.pop("_events")
    print("fault timeline:")
    for line in events:
        print(f"  {line}")
    print(f"{'':<28}{'value':>10}")
    for key, value in out.items():
        print(f"{key:<28}{value!s:>10}")
    print(json.dumps(out))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
