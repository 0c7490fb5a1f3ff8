"""Connected agents: the ladder's pace with an agent played over the wire, beside the same policy in process.

The setup is what ``arena serve`` runs, split into processes as a deployment would be:
an embedded Valkey, a SQLite database, the API (uvicorn, ``create_app``) in its own
process, and the agent's client (:class:`arena.client.connected.client.AgentClient`) in
another. This process plays the connect-four ladder (schedule -> play -> record ->
rate) with 256 matches at once: the agent (the scripted ``heuristic``, batched) against
a pool of scripted opponents, once as the builtin in process and once connected, and
again with a proxy that adds 20 ms to every round trip between the client and the
server (there with the service's batch of 1,024 matches at once: a request per ply
whatever the batch, so a far client plays as many matches per round trip as the
service gives it). Then 8 agents connected at once (a client process each, answering the first
legal move, so the protocol's cost is what is measured): the round trip of one decision
batch of 32 rows (request queued in Redis -> API process -> socket -> client -> answer
-> back), p50 and p99, the agents asked in turn as one engine asks them, and
(``rtt_concurrent_*``) all 8 asked at once from 8 threads.

    python benchmarks/connected.py [--matches 2048] [--rtt-batches 400] [--smoke]

Prints a table, then one JSON line with ``in_process_mps``, ``connected_mps``,
``ratio``, ``delayed_mps``, ``rtt_p50_ms``, ``rtt_p99_ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)

import httpx
import numpy as np

ENV = "connect_four-v3"
OPPONENTS = ["heuristic:epsilon=0.25", "heuristic:epsilon=0.5", "heuristic:epsilon=0.75", "random"]
BATCH = 256
DELAY_S = 0.010  # each way: 20 ms per round trip
DELAYED_BATCH = 1024
"""Matches at once behind the delaying proxy: the service's own batch size
(``ServiceConfig.batch_size``), which is what a connected agent far away gets."""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"server at {url} did not start")
        time.sleep(0.2)


def start_api(settings, port: int, **env: str) -> subprocess.Popen:
    """The API (uvicorn, ``create_app``) in a process of its own, on the database and Redis
    of ``settings``; ``env``: further ``ARENA_*`` variables (its abuse limits)."""
    env = {**os.environ, "PYTHONPATH": str(_ROOT), "ARENA_DATA_DIR": str(settings.data_dir),
           "ARENA_DATABASE_URL": settings.database_url, "ARENA_REDIS_URL": settings.redis_url, **env}
    return subprocess.Popen([sys.executable, "-m", "uvicorn", "--factory", "arena.api.app:create_app",
                             "--port", str(port), "--log-level", "warning", "--timeout-graceful-shutdown", "5"],
                            env=env)


def stop_api(api: subprocess.Popen) -> None:
    api.terminate()
    try:
        api.wait(30)
    except subprocess.TimeoutExpired:
        api.kill()


@contextlib.contextmanager
def api_process(settings, port: int, **env: str) -> Iterator[subprocess.Popen]:
    """:func:`start_api`'s process, stopped on exit. The database is migrated first
    (:func:`benchmarks.support.databases.migrate`, quick): the API boots while the caller goes
    on importing what it needs (``open_services``, torch: seconds) instead of after."""
    from benchmarks.support.databases import migrate

    migrate(settings)
    api = start_api(settings, port, **env)
    try:
        yield api
    finally:
        stop_api(api)


# -- the delaying proxy -------------------------------------------------------------------
async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy bytes, each chunk delivered ``delay`` after it arrived (order kept)."""
    queue: asyncio.Queue = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, chunk = await queue.get()
            if chunk is None:
                writer.close()
                return
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            writer.write(chunk)
            await writer.drain()

    task = asyncio.create_task(deliver())
    try:
        while chunk := await reader.read(65536):
            queue.put_nowait((time.monotonic() + delay, chunk))
    finally:
        queue.put_nowait((0.0, None))
        await task


def run_proxy(listen_port: int, target_port: int, delay: float, ready: threading.Event) -> None:
    async def handle(reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(_pipe(reader, up_writer, delay), _pipe(up_reader, writer, delay),
                             return_exceptions=True)

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# -- the client process -------------------------------------------------------------------
def client_main(url: str, token: str, agent_ids: list[int], trivial: bool = False) -> None:
    """Play every agent in ``agent_ids`` with the batched heuristic (or, ``trivial``, the
    first legal move: the round trips measure the protocol, not the agent) until killed."""
    from agents.baselines import HEURISTICS
    from agents.policy import MatchRng
    from arena.client.connected.client import AgentClient

    heuristic = HEURISTICS[ENV]()

    def act(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if trivial:
            return mask.argmax(axis=1)
        k = len(mask)
        return heuristic.act(obs, mask, MatchRng(np.arange(k), np.zeros(k, dtype=np.int64), np.zeros(k)))

    threads = []
    for agent_id in agent_ids:
        client = AgentClient(url, token, agent_id, act, batched=True)
        t = threading.Thread(target=client.run, daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


def start_client(url: str, token: str, agent_ids: list[int], trivial: bool = False) -> subprocess.Popen:
    mode = ["--trivial"] if trivial else []
    return subprocess.Popen([sys.executable, __file__, *mode, "--client", url, token, *map(str, agent_ids)],
                            env={**os.environ, "PYTHONPATH": str(_ROOT)})


# -- measurements -------------------------------------------------------------------------
def ladder_mps(services, agent_key: str, sources, matches: int, runner, batch: int = BATCH) -> float:
    from arena.ladder.dispatch import LadderConfig, open_ladder

    ladder = open_ladder(services.sessions, LadderConfig(ENV, batch_size=batch, seed=int(time.time())))
    ladder.add_agents(sources)
    rng = np.random.default_rng(0)
    lineups = []
    for i in range(matches):
        opponent = OPPONENTS[int(rng.integers(len(OPPONENTS)))]
        lineups.append((agent_key, opponent) if i % 2 == 0 else (opponent, agent_key))
    ladder.run(runner, batch, lineups=lineups[:batch])  # warm-up
    start = time.perf_counter()
    recorded = ladder.run(runner, len(lineups), lineups=lineups).recorded
    return recorded / (time.perf_counter() - start)


def round_trips(services, agents: list[dict], batches: int, rows: int = 32, concurrent: bool = False) -> list[float]:
    """Round trip of one decision batch with ``len(agents)`` agents connected: asked one
    after another, as one engine asks them (its batch groups rows by policy and asks each
    in turn), or ``concurrent``: every agent asked at once by a thread of its own."""
    from agents.policy import MatchRng
    from arena.runners import AgentSource
    from envs.registry import make_vector_core

    core = make_vector_core(ENV)
    board = core.new_batch(rows)
    obs, mask = core.observe(board, np.arange(rows))
    rng = MatchRng(np.arange(rows), np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=np.int64))
    times: list[float] = []
    lock = threading.Lock()

    policies = [services.connected_policies().get(ENV, AgentSource(key=a["key"], connected=a["id"])) for a in agents]

    def ask(asked: list) -> None:
        mine = []
        for i in range(batches * len(asked)):
            policy = asked[i % len(asked)]
            start = time.perf_counter()
            res = policy.act(obs, mask, rng)
            mine.append(time.perf_counter() - start)
            assert (res.codes == 0).all(), res.detail
        with lock:
            times.extend(mine)

    if not concurrent:
        ask(policies)
        return times
    threads = [threading.Thread(target=ask, args=([p],)) for p in policies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def wait_online(services, agent_ids: list[int], timeout: float = 30.0) -> None:
    broker = services.connected_policies().broker
    deadline = time.monotonic() + timeout
    while any(broker.presence(a) is None for a in agent_ids):
        if time.monotonic() > deadline:
            raise RuntimeError("clients did not connect")
        time.sleep(0.05)


def wait_offline(services, agent_ids: list[int], timeout: float = 30.0) -> None:
    broker = services.connected_policies().broker
    deadline = time.monotonic() + timeout
    while any(broker.presence(a) is not None for a in agent_ids) and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matches", type=int, default=2048)
    parser.add_argument("--rtt-batches", type=int, default=400)
    parser.add_argument("--smoke", action="store_true", help="seconds, tiny sizes (the suite runs this)")
    parser.add_argument("--rtt-only", action="store_true", help="only the round trips (1 agent, then 8)")
    parser.add_argument("--client", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--trivial", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args.client[0], args.client[1], [int(a) for a in args.client[2:]], args.trivial)
        return
    if args.smoke:
        args.matches, args.rtt_batches = BATCH, 20

    from arena.core.settings import Settings
    from arena.storage.redis_server import EmbeddedRedis
    from benchmarks.support.databases import open_services

    tmp = Path(tempfile.mkdtemp(prefix="arena-connected-bench-"))
    with EmbeddedRedis(tmp / "redis") as redis_server:
        settings = Settings(data_dir=tmp / "data", database_url=f"sqlite:///{tmp}/arena.db",
                            redis_url=redis_server.url, signups_per_hour=1000, writes_per_minute=10_000)
        port = free_port()
        with api_process(settings, port, ARENA_SIGNUPS_PER_HOUR="1000", ARENA_WRITES_PER_MINUTE="10000"), \
                open_services(settings) as services:
            from arena.ladder.registration import register_builtin_agents
            from arena.runners import AgentSource, InProcessRunner

            clients: list[subprocess.Popen] = []
            try:
                url = f"http://127.0.0.1:{port}"
                wait_http(url)
                token = httpx.post(f"{url}/api/v1/users", json={"name": "bench"}).json()["token"]
                headers = {"Authorization": f"Bearer {token}"}
                agents = [httpx.post(f"{url}/api/v1/agents/connected", headers=headers,
                                     json={"env": ENV, "name": f"bench-{i}"}).json() for i in range(8)]
                services.sessions.write_transaction(
                    lambda s: register_builtin_agents(s, ENV, ["heuristic", *OPPONENTS]), what="builtins")
                opponents = [AgentSource(key=k, builtin=k) for k in OPPONENTS]
                runner = InProcessRunner(None, services.connected_policies())

                if args.rtt_only:
                    clients.extend(start_client(url, token, [a["id"]], trivial=True) for a in agents)
                    wait_online(services, [a["id"] for a in agents])
                    for n, concurrent in ((1, False), (8, False), (8, True)):
                        t = np.array(round_trips(services, agents[:n], args.rtt_batches, concurrent=concurrent)) * 1000
                        print(f"{n} agents{' at once' if concurrent else ''}: p50 {np.percentile(t, 50):.2f} ms "
                              f"p99 {np.percentile(t, 99):.2f} ms")
                    return
                in_process = ladder_mps(services, "heuristic", [AgentSource(key="heuristic", builtin="heuristic"),
                                                                *opponents], args.matches, runner)
                first = agents[0]
                connected_source = AgentSource(key=first["key"], connected=first["id"])
                clients.append(start_client(url, token, [first["id"]]))
                wait_online(services, [first["id"]])
                connected = ladder_mps(services, first["key"], [connected_source, *opponents], args.matches, runner)
                clients.pop().kill()
                wait_offline(services, [first["id"]])

                proxy_port = free_port()
                ready = threading.Event()
                threading.Thread(target=run_proxy, args=(proxy_port, port, DELAY_S, ready), daemon=True).start()
                ready.wait(10)
                clients.append(start_client(f"http://127.0.0.1:{proxy_port}", token, [first["id"]]))
                wait_online(services, [first["id"]])
                delayed = ladder_mps(services, first["key"], [connected_source, *opponents],
                                     max(DELAYED_BATCH, args.matches), runner, batch=DELAYED_BATCH)
                clients.pop().kill()
                wait_offline(services, [first["id"]])

                # a process each, answering the first legal move: the protocol's cost alone
                clients.extend(start_client(url, token, [a["id"]], trivial=True) for a in agents)
                wait_online(services, [a["id"] for a in agents])
                round_trips(services, agents, 5)  # warm-up
                times = np.array(round_trips(services, agents, args.rtt_batches)) * 1000
                together = np.array(round_trips(services, agents, max(5, args.rtt_batches // 4),
                                                concurrent=True)) * 1000
            finally:
                for c in clients:
                    c.kill()
    result = {
        "env": ENV, "matches_at_once": BATCH, "matches": args.matches,
        "in_process_mps": round(in_process, 1), "connected_mps": round(connected, 1),
        "ratio": round(connected / in_process, 3), "delayed_mps": round(delayed, 1),
        "added_rtt_ms": 2 * DELAY_S * 1000, "delayed_matches_at_once": DELAYED_BATCH,
        "rtt_agents": len(agents), "rtt_rows": 32,
        "rtt_p50_ms": round(float(np.percentile(times, 50)), 3),
        "rtt_p99_ms": round(float(np.percentile(times, 99)), 3),
        "rtt_concurrent_p50_ms": round(float(np.percentile(together, 50)), 3),
        "rtt_concurrent_p99_ms": round(float(np.percentile(together, 99)), 3), "smoke": args.smoke,
    }
    print(f"{'ladder, 256 matches at once':<40}{'matches/s':>12}")
    print(f"{'heuristic in process':<40}{in_process:>12,.0f}")
    print(f"{'heuristic connected (localhost)':<40}{connected:>12,.0f}   ratio {result['ratio']:.2f}")
    print(f"{'connected, +20 ms per round trip':<40}{delayed:>12,.0f}   ({DELAYED_BATCH} matches at once)")
    print(f"decision batch round trip, 8 agents connected, asked in turn: p50 {result['rtt_p50_ms']:.2f} ms, "
          f"p99 {result['rtt_p99_ms']:.2f} ms")
    print(f"  ... all 8 asked at once (8 threads): p50 {result['rtt_concurrent_p50_ms']:.2f} ms, "
          f"p99 {result['rtt_concurrent_p99_ms']:.2f} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
