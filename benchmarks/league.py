"""League throughput end to end: scheduled -> played -> rated -> committed.

50 agents on ``connect_four-v3``: scripted heuristics of graded epsilon plus small MLP
snapshots held in the Redis snapshot pool (embedded Valkey); 2 Ray MatchWorker
actors; SQLite. In the same run, the naive service loop a competent person writes:
one PettingZoo match at a time (one policy call per move), ``trueskill.rate_1vs1``,
one ORM commit per match.

Then recording alone (``benchmarks/support/ingest.py``), on SQLite and on the
PostgreSQL at 127.0.0.1:5432 (db ``test``; skipped if it does not answer): match rows/s
of SQLAlchemy executemany, of the JSON-document insert Arena used before, and of
Arena's COPY / prepared-executemany path; the whole recorder; and the rating pass one
match at a time against waves of independent matches.

    python benchmarks/league.py [--matches 40960] [--workers 2] [--naive-seconds 15] [--smoke]
    python benchmarks/league.py --ingest-only [--ingest-matches 40000] [--ingest-batch 8192]

Prints tables, then one JSON line: ``naive_mps``, ``league_mps``, ``ratio``,
``scheduled``, ``recorded``, ``lost``, ``duplicated`` and the recording numbers
(``sqlite_executemany_rows_per_s``, ``sqlite_arena_rows_per_s``,
``sqlite_ingest_ratio``, ``rating_50_agents_waves_mps``, ...; ``postgresql_*`` when
PostgreSQL answers); ``--ingest-only`` prints only those. ``--smoke``: 512 league
matches on one Ray worker, half a second of the naive loop, 256 recorded matches (the
suite's check that it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

# This file is named like the ``league`` package: run as a script, its folder would
# shadow the package on sys.path, so put the repository root there instead.
_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)

import numpy as np

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from agents.catalog import make_policy
from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from agents.policy import MatchRng, derive_seed
from arena.core.agent_status import AgentStatus
from arena.core.settings import Settings
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.ladder.registration import register_env, register_snapshot_agent
from arena.runners import AgentSource
from arena.runners.on_ray import RayMatchRunner, init_ray
from arena.storage.db import make_engine, models, session_factory, upgrade
from arena.storage.db import repositories as repo
from arena.storage.wiring import open_services
from envs.registry import make_env

ENV = "connect_four-v3"


def league_agents(services, n_scripted: int = 27, n_mlp: int = 23) -> list[AgentSource]:
    """Heuristics with epsilon 0..1 plus MLP snapshots stored in the pool."""
    sources = [AgentSource(key=k, builtin=k) for k in
               (make_policy(f"heuristic:epsilon={e:.3f}", ENV).agent_id
                for e in np.linspace(0.0, 1.0, n_scripted))]
    for i in range(n_mlp):
        state, spec = random_init_checkpoint(ENV, "mlp", {"hidden": [64, 64]}, seed=1000 + i)
        with services.sessions.begin() as session:
            agent = register_snapshot_agent(session, services.pool, serialize_weights(state), spec,
                                            pool_name=f"bench.{ENV}", name=f"mlp-{i}",
                                            status=AgentStatus.PLACEMENT)
        sources.append(AgentSource(key=agent.key, snapshot=agent.sha256))
    return sources


def run_league(services, sources, matches: int, workers: int, batch_size: int = 8192) -> dict:
    ladder = open_ladder(services.sessions, LadderConfig(ENV, batch_size=batch_size, seed=1))
    ladder.add_agents(sources)
    init_ray(services.settings, num_cpus=workers)
    runner = RayMatchRunner(workers, snapshots_factory=services.snapshot_cache_factory(),
                            gpus_per_worker=services.settings.ray_gpus_per_worker)
    ladder.run(runner, 2 * batch_size)  # warm-up: actors start, snapshots load
    with services.sessions() as session:
        before = repo.count_matches(session, ENV)
    start = time.perf_counter()
    progress = ladder.run(runner, matches)
    elapsed = time.perf_counter() - start
    runner.close()
    with services.sessions() as session:
        stored = repo.count_matches(session, ENV) - before
    return {"mps": progress.recorded / elapsed, "scheduled": progress.scheduled,
            "recorded": stored, "lost": progress.scheduled - stored,
            "duplicated": max(0, stored - progress.recorded)}


def run_naive(sources, services, seconds: float, db_path: Path) -> float:
    """One match at a time, one policy call per move, trueskill, one commit per match."""
    import trueskill

    from arena.snapshots.cache import SnapshotCache

    url = f"sqlite:///{db_path}"
    upgrade(url)
    sessions = session_factory(make_engine(url))
    cache = SnapshotCache(services.pool, capacity=64)
    policies = {s.key: make_policy(s.builtin, ENV) if s.builtin else cache.get(s.snapshot) for s in sources}
    keys = sorted(policies)
    ts = trueskill.TrueSkill()
    ratings = {k: ts.create_rating() for k in keys}
    env = make_env(ENV)
    rng = np.random.default_rng(0)
    with sessions.begin() as s:
        register_env(s, ENV)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a, b = rng.choice(len(keys), size=2, replace=False)
        seats = [keys[a], keys[b]]
        seed = derive_seed(2, done)
        env.reset(seed=seed % 2**31)
        actions = []
        for agent in env.agent_iter():
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                env.step(None)
                continue
            seat = env.agents.index(agent)
            mask = obs["action_mask"].astype(bool)[None]
            act = int(policies[seats[seat]].act(obs["observation"][None], mask,
                                                MatchRng(np.array([seed]), np.array([seat]),
                                                         np.array([len(actions)])))[0])
            actions.append([seat, act])
            env.step(act)
        r0 = env.rewards[env.possible_agents[0]] if env.rewards else 0
        winner = None if r0 == 0 else (0 if r0 > 0 else 1)
        if winner is None:
            ratings[seats[0]], ratings[seats[1]] = trueskill.rate_1vs1(ratings[seats[0]], ratings[seats[1]],
                                                                       drawn=True, env=ts)
        else:
            w, l = seats[winner], seats[1 - winner]
            ratings[w], ratings[l] = trueskill.rate_1vs1(ratings[w], ratings[l], env=ts)
        with sessions() as s:
            s.add(models.Match(id=f"naive-{done}", env_id=ENV, seed=seed, seats=seats, weights=[None, None],
                               actions=actions, scores=[float(r0), float(-r0)], winner=winner,
                               termination="normal", detail="", rated=True))
            s.commit()
        done += 1
    return done / (time.perf_counter() - start)


def run_ingest(matches: int, batch: int, tmp: Path) -> dict:
    """Recording throughput per backend (rows/s), and the rating pass (matches/s)."""
    from benchmarks.support.ingest import measure_rating, measure_writes, synthetic_records

    keys = ["random", *(f"heuristic:epsilon={e / 50:.2f}" for e in range(49))]
    records = synthetic_records(keys, matches, seed=1)
    batches = [records[i:i + batch] for i in range(0, matches, batch)]
    out: dict = {}
    for backend in ("sqlite", "postgresql"):
        try:
            out[backend] = measure_writes(backend, tmp, batches, keys)
        except Exception as exc:  # noqa: BLE001 - no PostgreSQL here: say so, measure the rest
            print(f"{backend}: not measured ({type(exc).__name__}: {str(exc).splitlines()[0]})")
    wide = synthetic_records([f"a{i}" for i in range(2000)], matches, seed=2)
    out["rating"] = {"50 agents": measure_rating(batches),
                     "2000 agents": measure_rating([wide[i:i + batch] for i in range(0, matches, batch)])}
    print(f"\n{'recording (match rows/s, +4 dependent rows each)':<52}{'sqlite':>12}{'postgresql':>12}")
    for path in ("executemany", "json document", "arena", "recorder"):
        cells = "".join(f"{out[b][path]:>12,.0f}" if b in out else f"{'-':>12}" for b in ("sqlite", "postgresql"))
        print(f"{path:<52}{cells}")
    print(f"\n{'rating pass (matches/s)':<52}{'one at a time':>14}{'waves':>12}")
    for label, rates in out["rating"].items():
        print(f"{label:<52}{rates['one_at_a_time']:>14,.0f}{rates['waves']:>12,.0f}")
    return out


def _ingest_json(ingest: dict) -> dict:
    flat = {}
    for backend in ("sqlite", "postgresql"):
        for path, rate in ingest.get(backend, {}).items():
            flat[f"{backend}_{path.replace(' ', '_')}_rows_per_s"] = round(rate)
        if backend in ingest:
            flat[f"{backend}_ingest_ratio"] = round(ingest[backend]["arena"] / ingest[backend]["executemany"], 2)
    for label, rates in ingest["rating"].items():
        name = label.replace(" ", "_")
        flat[f"rating_{name}_one_at_a_time_mps"] = round(rates["one_at_a_time"])
        flat[f"rating_{name}_waves_mps"] = round(rates["waves"])
    return flat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=40960)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--naive-seconds", type=float, default=15.0)
    parser.add_argument("--ingest-only", action="store_true", help="measure recording alone")
    parser.add_argument("--ingest-matches", type=int, default=40000)
    parser.add_argument("--ingest-batch", type=int, default=8192, help="matches per recorded batch")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    args = parser.parse_args()
    args.batch_size = 8192
    if args.smoke:
        args.matches, args.workers, args.naive_seconds, args.batch_size = 512, 1, 0.5, 256
        args.ingest_matches, args.ingest_batch = 256, 128
    if args.ingest_only:
        with tempfile.TemporaryDirectory() as tmp:
            ingest = run_ingest(args.ingest_matches, args.ingest_batch, Path(tmp))
        print(json.dumps(_ingest_json(ingest)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        ingest = run_ingest(args.ingest_matches, args.ingest_batch, Path(tmp))
        settings = Settings(data_dir=Path(tmp))
        with open_services(settings) as services:
            sources = league_agents(services)
            league = run_league(services, sources, args.matches, args.workers, args.batch_size)
            naive_mps = run_naive(sources, services, args.naive_seconds, Path(tmp) / "naive.db")
    print(f"{'method':<60}{'matches/s':>12}")
    print(f"{'naive service loop (1 match, trueskill, 1 commit/match)':<60}{naive_mps:>12,.1f}")
    print(f"{f'arena league ({len(sources)} agents, {args.workers} Ray workers, SQLite)':<60}{league['mps']:>12,.1f}")
    print(json.dumps({
        "naive_mps": round(naive_mps, 1), "league_mps": round(league["mps"], 1),
        "ratio": round(league["mps"] / naive_mps, 1), "scheduled": league["scheduled"],
        "recorded": league["recorded"], "lost": league["lost"], "duplicated": league["duplicated"],
        **_ingest_json(ingest),
    }))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
