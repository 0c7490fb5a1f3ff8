"""Headline: leaderboard and match-history latency over real HTTP at 10k agents / 1M matches.

A fresh SQLite database (in a temporary directory) is seeded through the repositories
with 10,000 neural agents on two envs (7,000 on connect_four-v3, 3,000 on
tictactoe-v3), 1,000,000 matches with realistic action lists, 2,000,000 participant
rows and a rating per agent. The real server (``create_app(services)`` under uvicorn,
``--workers`` processes, on uvloop and httptools as ``uvicorn[standard]`` installs
them) then runs on its own, and ``--clients`` concurrent HTTP clients hit it for
``--seconds`` after ``--warmup``, each with its own keep-alive connection and no think
time:

* ``GET /api/v1/leaderboard?env=..&limit=50&offset=..`` (random env, random page);
* ``GET /api/v1/matches?agent=..&limit=50`` (random agent, first page), then the page
  its ``next_cursor`` points to.

The clients are asyncio tasks in this process, on uvloop, each speaking HTTP/1.1 over
its own connection (:class:`HttpConnection`): a request writes its ``GET`` and reads
the status line, the headers and exactly ``Content-Length`` bytes of body; latency runs
from the write to the body's last byte; a status other than 200 is an error; a body is
parsed only where the plan needs a value from it (``next_cursor``). They are this lean
because they share the machine's cores with the server: ``httpx.AsyncClient`` spent
about 1.2 ms of CPU per request here (the lean client: 0.07 ms), more than a cached
page costs the server, so with it the load generator measured itself.

Latency includes queueing behind the other clients (a closed loop: mean latency ~=
clients / throughput). Cached pages are answered on the event loop while database
reads wait for the server's reader thread (see ``arena.api.state``), so leaderboard
pages do not queue behind match-history reads. To tell the handlers' cost from the
framework's and the machine's, the same clients also run against ``GET /api/v1/envs``
(no database: the floor of this stack on this machine), and one client alone runs the
mix (service time, no queue).

Before the HTTP runs, the queries are timed in-process at the repository level
against what a competent person writes without our indexes and cursors:
``ORDER BY mu - 3*sigma`` for the leaderboard and ``LIMIT/OFFSET`` history pages.

    python benchmarks/api.py [--agents 10000] [--matches 1000000] [--clients 32]
                             [--seconds 20] [--workers 1] [--data-dir DIR] [--smoke]

``--data-dir`` keeps the seeded database for later runs. ``--smoke`` runs every step on
tiny sizes in seconds (200 agents, 2,000 matches, 4 clients for 1 s; the suite's check
that the script still runs, no numbers). Prints tables, then one JSON line with
``leaderboard_p50_ms``, ``leaderboard_p99_ms``, ``matches_p50_ms``, ``matches_p99_ms``,
``rps``, ``solo_leaderboard_p50_ms``, ``solo_matches_p50_ms``, ``floor_p99_ms``,
``errors``, ``agents``, ``matches``, ``clients``, ``workers``, ``cpus``, ``seed_s``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

# Lets the script run from a checkout without installing the project.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

ENVS = {  # env -> (share of agents and matches, plies range, draw probability)
    "connect_four-v3": (0.7, (7, 42), 0.03),
    "tictactoe-v3": (0.3, (5, 9), 0.30),
}
ROLE = "player"
CHUNK = 25_000


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- seeding ------------------------------------------------------------------------------


def seed_database(url: str, n_agents: int, n_matches: int, seed: int = 0) -> dict[str, Any]:
    """Fills a migrated database with agents, matches, participants and ratings.

    Returns:
        ``{env: {"agent_ids": [...], "count": n}}`` and the seeding time.
    """
    from arena.ladder.registration import register_env
    from arena.storage.db import make_engine, session_factory, upgrade
    from arena.storage.db import repositories as repo

    upgrade(url)
    engine = make_engine(url)
    sessions = session_factory(engine)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    out: dict[str, Any] = {}
    for env_id, (share, plies, p_draw) in ENVS.items():
        n_a = round(n_agents * share)
        n_m = round(n_matches * share)
        keys = [f"mlp-{i:016x}" for i in rng.integers(0, 2**62, n_a)]
        keys = list(dict.fromkeys(keys))
        with sessions.begin() as session:
            register_env(session, env_id)  # its spec and the ladder's TrueSkill constants
            ids = repo.get_or_create_agents(
                session, env_id, keys, "neural", status="rated",
                names={k: f"bot {k[4:12]}" for k in keys},
            )
        agent_ids = np.array([ids[k] for k in keys])
        skill = rng.normal(0.0, 1.0, len(keys))
        tallies = _seed_matches(sessions, env_id, keys, agent_ids, skill, n_m, plies, p_draw, rng)
        _seed_ratings(sessions, env_id, agent_ids, skill, tallies, rng)
        out[env_id] = {"agent_ids": agent_ids.tolist(), "count": len(keys)}
        _log(f"  {env_id}: {len(keys):,} agents, {n_m:,} matches "
             f"({time.perf_counter() - start:.1f} s so far)")
    engine.dispose()
    return {"envs": out, "matches": n_matches, "seed_s": time.perf_counter() - start}


def _seed_matches(sessions, env_id: str, keys: list[str], agent_ids: np.ndarray, skill: np.ndarray,
                  n: int, plies: tuple[int, int], p_draw: float, rng: np.random.Generator) -> dict:
    """Inserts ``n`` matches between random pairs, ``CHUNK`` per transaction.

    Returns:
        Per-agent ``wins``, ``draws``, ``losses`` and ``last_seq`` arrays.
    """
    from arena.storage.db import repositories as repo

    k = len(keys)
    env_tag = list(ENVS).index(env_id) + 1  # match ids unique across envs
    # Action lists shared between rows: realistic JSON sizes without generating tens of
    # millions of Python ints.
    pool = [[[p % 2, int(a)] for p, a in enumerate(rng.integers(0, 7, int(length)))]
            for length in rng.integers(plies[0], plies[1] + 1, 2048)]
    t = {name: np.zeros(k, np.int64) for name in ("wins", "draws", "losses", "last_seq")}
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        a = rng.integers(0, k, m)
        b = (a + rng.integers(1, k, m)) % k
        draw = rng.random(m) < p_draw
        a_wins = ~draw & (rng.random(m) < 1.0 / (1.0 + np.exp(-(skill[a] - skill[b]) * 1.5)))
        winner = np.where(draw, -1, np.where(a_wins, 0, 1)).tolist()
        seeds, acts = rng.integers(0, 2**62, m).tolist(), rng.integers(0, len(pool), m).tolist()
        seat_keys = [[keys[x], keys[y]] for x, y in zip(a.tolist(), b.tolist())]
        rows = [
            {"id": f"{env_tag:08x}-0000-4000-8000-{lo + i:012x}", "env_id": env_id,
             "seed": seeds[i], "seats": seat_keys[i], "actions": pool[acts[i]],
             "scores": _SCORES[winner[i]], "winner": None if winner[i] < 0 else winner[i],
             "termination": "normal"}
            for i in range(m)
        ]
        with sessions.begin() as session:
            seqs_by_id = repo.insert_matches(session, rows)
            seqs = np.array([seqs_by_id[r["id"]] for r in rows])
            repo.insert_participants(session, _participants(seqs, agent_ids[a], agent_ids[b], winner))
        for x, y in ((a, b), (b, a)):
            x_wins = a_wins if x is a else ~draw & ~a_wins
            np.add.at(t["wins"], x, x_wins)
            np.add.at(t["losses"], y, x_wins)
            np.add.at(t["draws"], x, draw)
            np.maximum.at(t["last_seq"], x, seqs)
        if (lo // CHUNK) % 8 == 7 or lo + m == n:
            _log(f"    {env_id}: {lo + m:,}/{n:,} matches")
    return t


_SCORES = {-1: [0.0, 0.0], 0: [1.0, -1.0], 1: [-1.0, 1.0]}  # by winner (-1: draw)
_RESULTS = {-1: ("D", "D"), 0: ("W", "L"), 1: ("L", "W")}


def _participants(seqs: np.ndarray, seat0: np.ndarray, seat1: np.ndarray, winner: list[int]) -> list[dict]:
    """Two ``insert_participants`` rows per match."""
    rows = []
    for s, x, y, w in zip(seqs.tolist(), seat0.tolist(), seat1.tolist(), winner):
        (rx, ry), (sx, sy) = _RESULTS[w], _SCORES[w]
        rows.append({"match_seq": s, "seat": 0, "agent_id": x, "team": 0, "role": ROLE, "score": sx,
                     "result": rx})
        rows.append({"match_seq": s, "seat": 1, "agent_id": y, "team": 1, "role": ROLE, "score": sy,
                     "result": ry})
    return rows


def _seed_ratings(sessions, env_id: str, agent_ids: np.ndarray, skill: np.ndarray, t: dict,
                  rng: np.random.Generator) -> None:
    """One rating per agent: mu follows the hidden skill, sigma shrinks with games."""
    from arena.storage.db import repositories as repo

    games = t["wins"] + t["draws"] + t["losses"]
    mu = 25.0 + 4.0 * skill + rng.normal(0, 0.5, len(skill))
    sigma = np.maximum(0.8, 8.333 / np.sqrt(1.0 + games / 10.0))
    rows = [
        {"agent_id": int(agent_ids[i]), "role": ROLE, "env_id": env_id, "mu": float(mu[i]),
         "sigma": float(sigma[i]), "games": int(games[i]), "wins": int(t["wins"][i]),
         "draws": int(t["draws"][i]), "losses": int(t["losses"][i]),
         "last_match_seq": int(t["last_seq"][i]) or None}
        for i in range(len(agent_ids))
    ]
    with sessions.begin() as session:
        for lo in range(0, len(rows), 5000):
            repo.upsert_ratings(session, rows[lo : lo + 5000])


# -- repository level: ours vs naive --------------------------------------------------------


def _median_ms(sessions, fn: Callable[[Any], Any], repeats: int) -> float:
    samples = []
    with sessions() as session:
        fn(session)  # warm
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(session)
            samples.append(time.perf_counter() - t0)
    return float(np.median(samples) * 1000)


def query_baselines(url: str, seeded: dict[str, Any], repeats: int = 200, seed: int = 1) -> list[tuple]:
    """Median in-process time of our queries and of the naive ones, on the same pages.

    Both sides select through SQLAlchemy with the same row decoding; only the access
    path differs: the stored, indexed ``conservative`` vs ``ORDER BY mu - 3 * sigma``,
    and ``seq < cursor`` keyset pages vs ``OFFSET``.
    """
    from sqlalchemy import select

    from arena.read.boards import read_board
    from arena.storage.db import make_engine, session_factory
    from arena.storage.db import repositories as repo
    from arena.storage.db.models import Agent, AgentRating, Match, MatchParticipant

    engine = make_engine(url)
    sessions = session_factory(engine)
    rnd = random.Random(seed)
    env = "connect_four-v3"
    pages = max(1, seeded["envs"][env]["count"] // 50)
    agents = seeded["envs"][env]["agent_ids"]
    match_columns = [getattr(Match, f) for f in repo.StoredMatch.__dataclass_fields__]

    def naive_board(s) -> list:
        stmt = (select(AgentRating.agent_id, Agent.key, Agent.name, Agent.kind, Agent.status,
                       AgentRating.mu, AgentRating.sigma, AgentRating.conservative, AgentRating.games,
                       AgentRating.wins, AgentRating.draws, AgentRating.losses)
                .join(Agent, Agent.id == AgentRating.agent_id)
                .where(AgentRating.env_id == env, AgentRating.role == ROLE)
                .order_by((AgentRating.mu - 3 * AgentRating.sigma).desc(), AgentRating.agent_id)
                .limit(50).offset(50 * rnd.randrange(pages)))
        return s.execute(stmt).all()

    def naive_page(s, offset: int, agent: int | None = None) -> list:
        stmt = select(*match_columns).order_by(Match.seq.desc()).limit(50).offset(offset)
        if agent is None:
            stmt = stmt.where(Match.env_id == env)
        else:
            stmt = stmt.join(MatchParticipant, MatchParticipant.match_seq == Match.seq).where(
                MatchParticipant.agent_id == agent)
        return s.execute(stmt).all()

    def ours_agent(s) -> None:
        agent = rnd.choice(agents)
        page = repo.match_history(s, agent_id=agent, limit=50)
        if page.next_before_seq:
            repo.match_history(s, agent_id=agent, before_seq=page.next_before_seq, limit=50)

    def naive_agent(s) -> None:
        agent = rnd.choice(agents)
        naive_page(s, 0, agent)
        naive_page(s, 50, agent)

    # The env's log 200,000 matches deep: where a "next" button lands after 4,000 clicks.
    with sessions() as s:
        deep_seq = repo.match_history(s, env_id=env, limit=1).matches[0].seq - 200_000
    rows = [
        # Ours never queries per page: the whole board (ranks and rank ranges need it) is read
        # once per change and pages are sliced from memory; the column shows that read.
        ("leaderboard page (ours: whole board)", _median_ms(sessions, naive_board, repeats),
         _median_ms(sessions, lambda s: read_board(s, env, ROLE), repeats)),
        ("agent history, pages 1+2", _median_ms(sessions, naive_agent, repeats),
         _median_ms(sessions, ours_agent, repeats)),
        ("env history, 200k deep", _median_ms(sessions, lambda s: naive_page(s, 200_000), min(repeats, 5)),
         _median_ms(sessions, lambda s: repo.match_history(s, env_id=env, before_seq=deep_seq, limit=50),
                    repeats)),
    ]
    engine.dispose()
    return rows


# -- the server ---------------------------------------------------------------------------


def serve(data_dir: str, port: int, workers: int) -> None:
    """``--serve`` mode: the real app under uvicorn, in ``workers`` processes.

    One process serves ``create_app(services)`` as ``arena serve`` does. With several,
    this process opens the services (migrations, the embedded Redis) and each uvicorn
    worker runs ``create_app()``, which opens its own from the ``ARENA_*`` settings.
    """
    import logging

    import uvicorn

    from arena.api.app import create_app
    from arena.core.settings import Settings
    from arena.storage.wiring import open_services

    logging.basicConfig(level=logging.WARNING)
    options = {"host": "127.0.0.1", "port": port, "log_level": "warning", "access_log": False}
    with open_services(Settings(data_dir=Path(data_dir))) as services:
        if workers == 1:
            uvicorn.run(create_app(services), **options)
        else:
            os.environ.update(ARENA_DATA_DIR=data_dir, ARENA_REDIS_URL=services.redis_url)
            uvicorn.run("arena.api.app:create_app", factory=True, workers=workers, **options)


def start_server(data_dir: str, port: int, workers: int = 1, timeout: float = 90.0) -> subprocess.Popen:
    """Starts ``--serve`` in a subprocess and waits until it answers."""
    import httpx

    proc = subprocess.Popen([sys.executable, __file__, "--serve", data_dir, "--port", str(port),
                             "--workers", str(workers)], env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2).status_code < 500:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop_server(proc)
    raise RuntimeError("server did not start")


def stop_server(proc: subprocess.Popen) -> None:
    """Ctrl-C, not SIGTERM: uvicorn re-raises SIGTERM after its own shutdown, which kills
    the process before ``open_services`` can stop the embedded Redis server."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- load -----------------------------------------------------------------------------------

# (name, path, params) -> the body of a 200 response, or None. A plan parses a body only
# where it needs a value from it: parsing costs the load generator, which shares the
# cores with the server, more than sending the request and reading the response.
Fetch = Callable[[str, str, dict], Awaitable[bytes | None]]


def mixed_plan(seeded: dict[str, Any]) -> Callable[[random.Random, Fetch], Awaitable[None]]:
    """Half leaderboard pages, half match histories (first page + its cursor page)."""
    envs = list(seeded["envs"])
    weights = [seeded["envs"][e]["count"] for e in envs]

    async def step(rnd: random.Random, fetch: Fetch) -> None:
        env = rnd.choices(envs, weights)[0]
        if rnd.random() < 0.5:
            pages = max(1, seeded["envs"][env]["count"] // 50)
            await fetch("leaderboard", "/leaderboard",
                        {"env": env, "limit": 50, "offset": 50 * rnd.randrange(pages)})
            return
        agent = rnd.choice(seeded["envs"][env]["agent_ids"])
        page = await fetch("matches (first page)", "/matches", {"agent": agent, "limit": 50})
        cursor = page and json.loads(page)["next_cursor"]
        if cursor:
            await fetch("matches (cursor page)", "/matches", {"agent": agent, "limit": 50, "cursor": cursor})

    return step


async def floor_step(rnd: random.Random, fetch: Fetch) -> None:
    await fetch("envs (no database)", "/envs", {})


class HttpConnection:
    """One HTTP/1.1 keep-alive connection that sends GETs and reads whole responses:
    the status line, the headers and exactly ``Content-Length`` bytes of body (why not
    ``httpx``: see the module docstring)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self._reader, self._writer = reader, writer
        self._host = host.encode()

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConnection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, f"{host}:{port}")

    async def get(self, target: str) -> tuple[int, bytes]:
        """``(status, body)`` of ``GET target`` (a path with its query string)."""
        self._writer.write(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), self._host))
        head = await self._reader.readuntil(b"\r\n\r\n")
        length = _CONTENT_LENGTH.search(head)
        if not head.startswith(b"HTTP/1.1 ") or length is None:
            raise RuntimeError(f"unexpected response head {head[:200]!r}")
        return int(head[9:12]), await self._reader.readexactly(int(length.group(1)))

    def close(self) -> None:
        self._writer.close()


_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length: *([0-9]+)\r\n", re.IGNORECASE)


async def load(base: str, step, clients: int, seconds: float, warmup: float,
               seed: int = 2) -> tuple[dict[str, list[float]], int]:
    """``clients`` closed loops of ``step`` for ``warmup + seconds``, one connection each.

    Returns:
        Latencies (ms) by request name of the measured part, and the error count.
    """
    url = urlsplit(base)
    lat: dict[str, list[float]] = {}
    errors = 0
    t_measure = time.perf_counter() + warmup
    t_end = t_measure + seconds

    async def worker(i: int) -> None:
        nonlocal errors
        rnd = random.Random(seed * 1000 + i)
        connection = await HttpConnection.open(url.hostname, url.port)

        async def fetch(name: str, path: str, params: dict) -> bytes | None:
            nonlocal errors
            target = f"/api/v1{path}?{urlencode(params)}" if params else f"/api/v1{path}"
            t0 = time.perf_counter()
            status, body = await connection.get(target)
            t1 = time.perf_counter()
            if status != 200:
                errors += 1
                if errors <= 3:
                    _log(f"  {path} {params} -> {status}: {body[:200]!r}")
                return None
            if t0 >= t_measure and t1 <= t_end:
                lat.setdefault(name, []).append((t1 - t0) * 1000)
            return body

        try:
            while time.perf_counter() < t_end:
                await step(rnd, fetch)
        finally:
            connection.close()

    await asyncio.gather(*(worker(i) for i in range(clients)))
    return lat, errors


def run_load(*args, **kwargs) -> tuple[dict[str, list[float]], int]:
    """:func:`load` on uvloop (uvicorn's standard extra installs it) when available."""
    # What seeding and the query timings left behind would otherwise be rescanned by
    # full collections in the middle of the run, pausing every request in flight.
    gc.collect()
    gc.freeze()
    try:
        import uvloop
    except ImportError:
        return asyncio.run(load(*args, **kwargs))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(load(*args, **kwargs))


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


# -- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--matches", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument("--data-dir", help="Keep (or reuse) the seeded database here.")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    parser.add_argument("--serve", metavar="DATA_DIR", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.side_s, args.repeats = 5.0, 200  # the solo and floor runs; query timings
    if args.smoke:
        args.agents, args.matches, args.clients, args.seconds, args.warmup = 200, 2000, 4, 1.0, 0.3
        args.side_s, args.repeats = 1.0, 3
    if args.serve:
        serve(args.serve, args.port, args.workers)
        return
    if args.data_dir:
        run(args, Path(args.data_dir))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            run(args, Path(tmp))


def run(args: argparse.Namespace, data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{data_dir / 'arena.db'}"
    meta = data_dir / "bench-seed.json"
    if meta.exists():
        from arena.storage.db import upgrade

        seeded = json.loads(meta.read_text())
        upgrade(url)  # a database seeded by an older revision: migrate it first, as the server does
        _log(f"reusing the seeded database in {data_dir}")
    else:
        _log(f"seeding {args.agents:,} agents and {args.matches:,} matches into {data_dir} ...")
        seeded = seed_database(url, args.agents, args.matches)
        meta.write_text(json.dumps(seeded))
        _log(f"seeded in {seeded['seed_s']:.1f} s")
    _log("timing the queries in-process ...")
    sql = query_baselines(url, seeded, repeats=args.repeats)
    from arena.storage.redis_server import free_port

    port = free_port()
    server = start_server(str(data_dir), port, args.workers)
    base = f"http://127.0.0.1:{port}"
    try:
        _log(f"HTTP: {args.clients} clients x {args.seconds:.0f} s, {args.workers} worker(s) ...")
        lat, errors = run_load(base, mixed_plan(seeded), args.clients, args.seconds, args.warmup)
        solo, solo_err = run_load(base, mixed_plan(seeded), 1, args.side_s, 1, seed=3)
        floor, floor_err = run_load(base, floor_step, args.clients, args.side_s, 1, seed=4)
    finally:
        stop_server(server)
    report(args, seeded, sql, lat, errors + solo_err + floor_err, solo, floor)


def report(args, seeded, sql, lat, errors, solo, floor) -> None:
    n_agents = sum(s["count"] for s in seeded["envs"].values())
    n_matches = seeded.get("matches", args.matches)
    print(f"{'in-process query, median ms':<34}{'naive':>10}{'ours':>10}")
    for name, naive, ours in sql:
        print(f"{name:<34}{naive:>10.2f}{ours:>10.2f}")
    print()
    total = sum(len(v) for v in lat.values())
    rps = total / args.seconds
    print(f"HTTP on 127.0.0.1: {n_agents:,} agents, {n_matches:,} matches, {args.workers} uvicorn "
          f"worker(s), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'endpoint':<28}{'clients':>8}{'requests':>10}{'p50 ms':>9}{'p99 ms':>9}")
    for clients, table in ((args.clients, lat), (1, solo), (args.clients, floor)):
        for name, values in table.items():
            print(f"{name:<28}{clients:>8}{len(values):>10,}{pct(values, 50):>9.1f}{pct(values, 99):>9.1f}")
    print(f"{args.clients} clients, mixed: {rps:,.0f} requests/s; floor (/envs): "
          f"{sum(len(v) for v in floor.values()) / args.side_s:,.0f} requests/s; {errors} errors")
    matches = lat.get("matches (first page)", []) + lat.get("matches (cursor page)", [])
    solo_matches = solo.get("matches (first page)", []) + solo.get("matches (cursor page)", [])
    print(json.dumps({
        "leaderboard_p50_ms": round(pct(lat.get("leaderboard", []), 50), 2),
        "leaderboard_p99_ms": round(pct(lat.get("leaderboard", []), 99), 2),
        "matches_p50_ms": round(pct(matches, 50), 2),
        "matches_p99_ms": round(pct(matches, 99), 2),
        "rps": round(rps, 1),
        "solo_leaderboard_p50_ms": round(pct(solo.get("leaderboard", []), 50), 2),
        "solo_matches_p50_ms": round(pct(solo_matches, 50), 2),
        "floor_p99_ms": round(pct(floor.get("envs (no database)", []), 99), 2),
        "errors": errors, "agents": n_agents, "matches": n_matches, "clients": args.clients,
        "workers": args.workers, "cpus": os.cpu_count(), "seed_s": round(seeded["seed_s"], 1),
    }))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
