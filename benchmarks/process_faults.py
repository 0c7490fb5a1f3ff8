"""Across processes nothing is lost: two API processes and the background service, killed under load.

The deployment of ``arena serve`` split into processes, all on this machine and all
real: an embedded Valkey and a SQLite database (owned by this script), two API processes
(``arena serve --no-service``, ports A and B) and one background service
(``arena serve --no-api``), each in its own process group. For ``--seconds`` (default
60) load runs against both API processes:

* **people's games**: scripted people, each a signed-in user, open a game against the
  ``heuristic`` agent (``POST /agents/{id}/play``) and play it as the play page does
  (arena/web/static/play.js): WebSocket to ``ws_path``, ``hello`` with the play token
  (msgpack), one answer per ``request`` for their match's row, ``ping`` when idle, the
  socket reopened (on either API) when it drops, until the ``result`` of their match;
* **challenges**: ``POST /challenges`` (4 unrated matches), then ``GET`` until done;
* **connected agents**: two ``arena.client.connected`` clients (one per API process)
  playing the ladder with the batched heuristic;
* **uploads**: small MLP ``.safetensors`` submissions, validated by the service;
* readers of the leaderboard and the match list.

Meanwhile API A and the background service are each SIGKILLed (the whole process group)
and restarted, alternately, every ``--kill-every`` seconds. Then the load stops, every
process is up, and the run drains: it waits (at most ``--drain-s``) until no person's
game or challenge is open, no upload waits for validation and every person has their
result. Counted, from the database and Redis themselves:

* ``requests``: HTTP requests answered (any status), ``responses_5xx`` those >= 500;
* ``lost``: accepted work never done: a challenge or person's game whose record is not
  ``done``/``failed`` (or is gone), one ``done`` with a match missing from the log, an
  upload still ``queued``/``validating``;
* ``duplicated``: a match id recorded twice, participants not one per seat, rating
  events beyond one per seat (:mod:`benchmarks.support.match_log`);
* ``slots_stuck``: open-game and in-flight counters still held, live play tokens,
  connection slots (``conn:slots:*``) and presence keys still held once every socket is
  closed and the dead processes' leases had time to lapse;
* ``rebuild_equals_live``: the ratings rebuilt from the match log equal the live ones.

Queued work outlives its dead owner by the durable queue's ``STALE_S`` (30 s) plus a
sweep, so the drain takes up to a minute after the last service kill.

    python benchmarks/process_faults.py [--seconds 60] [--kill-every 8] [--smoke] [--postgres]

Prints a table, then one JSON line with ``requests``, ``lost``, ``duplicated``,
``slots_stuck``, ``responses_5xx``, ``rebuild_equals_live``, ``seconds``, ``kills``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)

import msgpack
import numpy as np
from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import connect

from benchmarks.connected import ENV, free_port, start_client, wait_http
from benchmarks.support.databases import (
    POSTGRES_URL,
    create_database,
    database_url,
    drop_database,
    migrate,
    open_services,
)
from benchmarks.support.fleet import Fleet, Http
from benchmarks.support.match_log import duplicated_records, rebuild_equals_live
from benchmarks.support.smoke import parse_with_smoke, print_rows

log = logging.getLogger("process_faults")

BUILTINS = ["heuristic", "heuristic:epsilon=0.3", "heuristic:epsilon=0.6", "random"]
FINAL = ("done", "failed")
FATAL_CLOSES = {4400, 4401, 4403, 4404}
"""Close codes after which the play page stops reconnecting (a 4409 takeover is ours: reopen)."""
LIMITS = {"ARENA_SIGNUPS_PER_HOUR": "10000", "ARENA_WRITES_PER_MINUTE": "1000000",
          "ARENA_CLIENT_WRITES_PER_MINUTE": "1000000", "ARENA_SUBMISSIONS_PER_DAY": "100000",
          "ARENA_CHALLENGE_MATCHES_PER_HOUR": "1000000", "ARENA_CHALLENGES_IN_FLIGHT": "1000",
          "ARENA_CONNECTED_SOCKETS_PER_ADDRESS": "1000", "ARENA_CONNECTED_PER_USER": "100"}
"""Abuse limits far above what this load asks (every client is 127.0.0.1)."""


# -- the load --------------------------------------------------------------------------
class Load:
    """The load threads. ``stop`` ends new work; ``done`` (later) ends the people's waits."""

    def __init__(self, http: Http, ws_urls: list[str], owner: str, agents: dict[str, int]) -> None:
        self.http, self.ws_urls, self.owner, self.agents = http, ws_urls, owner, agents
        self.stop = threading.Event()
        self.done = threading.Event()
        self.tickets: list[dict] = []
        self.results: dict[str, str] = {}  # match id -> how the person's page saw it end
        self.challenges: list[str] = []
        self.uploads: list[int] = []
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()

    def start(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def join(self, timeout: float) -> int:
        """Wait for every thread (at most ``timeout`` in all); returns how many are still running."""
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return sum(t.is_alive() for t in self.threads)

    # people ---------------------------------------------------------------------------
    def person(self, token: str, index: int) -> None:
        while not self.stop.is_set():
            response = self.http.call("POST", f"/api/v1/agents/{self.agents['heuristic']}/play", token, json={})
            if response is None or response.status_code != 202:
                self.stop.wait(1.0)  # 429: the last game's slot is not given back yet
                continue
            ticket = response.json()
            with self.lock:
                self.tickets.append(ticket)
            self.results[ticket["match_id"]] = self.play(ticket, index)

    def play(self, ticket: dict, index: int) -> str:
        """The play page's loop for one game: how it ended for the page."""
        match_id, attempts = ticket["match_id"], 0
        while not self.done.is_set() and attempts < 200:
            url = self.ws_urls[(index + attempts) % len(self.ws_urls)]
            attempts += 1
            try:
                with connect(f"{url}{ticket['ws_path']}", open_timeout=5, max_size=2**20) as ws:
                    ws.send(msgpack.packb({"type": "hello", "protocol": 1, "token": ticket["play_token"],
                                           "encoding": "msgpack", "text": False}))
                    ended = self._converse(ws, match_id)
                    if ended is not None:
                        return ended
            except InvalidStatus:
                pass
            except (OSError, TimeoutError, WebSocketException) as exc:
                code = getattr(getattr(exc, "rcvd", None), "code", None)
                if code in FATAL_CLOSES:
                    return f"closed {code}"
            self.done.wait(0.5)
        return "gave up"

    def _converse(self, ws, match_id: str) -> str | None:
        """Answer the match's requests until its result (returns ``"result"``) or the socket drops."""
        last = time.monotonic()
        while not self.done.is_set():
            try:
                frame = ws.recv(timeout=1.0)
            except TimeoutError:
                if time.monotonic() - last > 10:
                    ws.send(msgpack.packb({"type": "ping"}))
                    last = time.monotonic()
                continue
            message = json.loads(frame) if isinstance(frame, str) else msgpack.unpackb(frame)
            last = time.monotonic()
            if message.get("type") == "result" and message.get("match") == match_id:
                return "result"
            if message.get("type") == "request" and match_id in message["matches"]:
                row = message["matches"].index(match_id)
                mask = _unpack(message["mask"])[row]
                actions: list[int | None] = [None] * len(message["matches"])
                legal = np.flatnonzero(mask)
                actions[row] = int(legal[len(legal) // 2])
                ws.send(msgpack.packb({"type": "answer", "id": message["id"], "actions": actions}))
        return None

    # challenges, uploads, readers -------------------------------------------------------
    def challenger(self) -> None:
        lineup = [self.agents["heuristic:epsilon=0.3"], self.agents["random"]]
        while not self.stop.is_set():
            response = self.http.call("POST", "/api/v1/challenges", self.owner,
                                      json={"env": ENV, "agents": lineup, "matches": 4})
            if response is None or response.status_code != 202:
                self.stop.wait(1.0)
                continue
            challenge_id = response.json()["id"]
            with self.lock:
                self.challenges.append(challenge_id)
            while not self.stop.wait(0.5):
                polled = self.http.call("GET", f"/api/v1/challenges/{challenge_id}")
                if polled is not None and polled.status_code == 200 and polled.json()["status"] in FINAL:
                    break

    def uploader(self, every_s: float) -> None:
        from agents.checkpoint import serialize_weights
        from agents.neural import random_init_checkpoint

        for seed in itertools.count():
            if self.stop.wait(every_s):
                return
            state, spec = random_init_checkpoint(ENV, "mlp", {"hidden": [8]}, seed=seed, name=f"upload-{seed}")
            files = {"weights": ("agent.safetensors", serialize_weights(state), "application/octet-stream")}
            form = {"spec": json.dumps(spec.to_json()), "env": ENV, "name": f"upload-{seed}"}
            response = self.http.call("POST", "/api/v1/agents", self.owner, files=files, data=form)
            if response is not None and response.status_code in (201, 202):
                with self.lock:
                    self.uploads.append(response.json()["id"])

    def reader(self) -> None:
        paths = ["/api/v1/leaderboard?env=" + ENV, "/api/v1/matches?env=" + ENV, "/api/v1/health"]
        for i in itertools.count():
            if self.stop.wait(0.3):
                return
            self.http.call("GET", paths[i % len(paths)])


def _unpack(value) -> np.ndarray:
    from arena.client.connected.client import unpack_array

    return unpack_array(value)


class Killer(threading.Thread):
    """SIGKILLs API A and the background service in turn, restarting each after ``down_s``."""

    def __init__(self, fleet: Fleet, every_s: float, down_s: float, until: float) -> None:
        super().__init__(name="killer", daemon=True)
        self.fleet, self.every_s, self.down_s, self.until = fleet, every_s, down_s, until
        self.stop = threading.Event()
        self.events: list[str] = []
        self.t0 = time.monotonic()

    def run(self) -> None:
        for victim in itertools.cycle(("api_a", "service")):
            if self.stop.wait(self.every_s) or time.monotonic() + self.down_s > self.until:
                return
            self.fleet.kill(victim)
            self.events.append(f"{time.monotonic() - self.t0:6.1f}s  {victim} SIGKILLed")
            self.stop.wait(self.down_s)
            self.fleet.start(victim)
            self.events.append(f"{time.monotonic() - self.t0:6.1f}s  {victim} restarted")


# -- the checks -------------------------------------------------------------------------
def open_work(services) -> dict[str, int]:
    """What is still waiting: people's games and challenges open, uploads not validated."""
    from arena.core.agent_status import WAITING
    from arena.storage.db import repositories as repo

    keys = services.pool.keys
    with services.sessions() as session:
        waiting = len(repo.list_agents(session, ENV, statuses=tuple(WAITING)))
    return {"people_open": services.redis.scard(keys.work_queue("people").open_set),
            "challenges_open": services.redis.scard(keys.work_queue("challenges").open_set), "uploads_waiting": waiting}


def drain(services, load: Load, timeout_s: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = open_work(services)
        people_playing = len(load.tickets) - len(load.results)
        if (not any(left.values()) and people_playing == 0) or time.monotonic() > deadline:
            return left | {"people_playing": people_playing}
        time.sleep(0.1)


def lost_work(services, load: Load) -> dict[str, int]:
    """Accepted work without a final state, or done without its matches in the log."""
    from arena.core.agent_status import WAITING
    from arena.ladder.challenges import load_challenge
    from arena.ladder.people import people_queue
    from arena.storage.db import repositories as repo

    keys = services.pool.keys
    people = people_queue(services.redis, keys)
    records = {t["match_id"]: people.fields(t["match_id"]) for t in load.tickets}
    # Every record in Redis too: a request accepted while its answer was lost counts as well.
    for raw in services.redis.scan_iter(match=keys.work_queue("people").records + ":*"):
        match_id = raw.decode().rsplit(":", 1)[-1]
        records.setdefault(match_id, people.fields(match_id))
    challenges = {c: load_challenge(services.redis, keys, c) for c in load.challenges}
    for raw in services.redis.scan_iter(match=keys.work_queue("challenges").records + ":*"):
        challenge_id = raw.decode().rsplit(":", 1)[-1]
        if challenge_id not in challenges and services.redis.type(raw) == b"hash":
            challenges[challenge_id] = load_challenge(services.redis, keys, challenge_id)
    wanted = [m for m, r in records.items() if r.get("status") == "done"]
    wanted += [m for c in challenges.values() if c is not None and c.status == "done" for m in c.request.match_ids]
    with services.sessions() as session:
        stored = repo.existing_match_ids(session, wanted)
        waiting = repo.list_agents(session, ENV, statuses=tuple(WAITING))
    return {
        "people": sum(1 for r in records.values() if r.get("status") not in FINAL),
        "people_done_unrecorded": sum(1 for m, r in records.items() if r.get("status") == "done" and m not in stored),
        "challenges": sum(1 for c in challenges.values() if c is None or c.status not in FINAL),
        "challenge_matches_unrecorded": sum(1 for c in challenges.values() if c is not None and c.status == "done"
                                            for m in c.request.match_ids if m not in stored),
        "uploads": len(waiting),  # every upload (connected agents never wait for validation)
    }


STUCK: dict[str, int] = {}
"""The counters found held at the last look (key -> count), for the report."""


def held_slots(services) -> dict[str, int]:
    """Counters, tokens, connection slots and presences still held (everything is closed now)."""
    keys, client = services.pool.keys, services.redis
    now_s, now_us = client.time()
    now_ms = now_s * 1000 + now_us // 1000  # a slot's score is when it lapses, in ms (arena.connected.slots)
    STUCK.clear()
    counters = {k.decode(): int(client.get(k) or 0) for k in client.scan_iter(match=keys.busy("x", "x")[:-3] + "*")}
    busy = sum(max(0, n) for n in counters.values())
    STUCK.update({k: n for k, n in counters.items() if n > 0})
    tokens = sum(1 for _ in client.scan_iter(match=keys.play_token("0" * 64)[:-64] + "*"))
    slot_keys = client.scan_iter(match=keys.connection_slots("x", "x")[:-3] + "*")
    slots = sum(client.zcount(k, f"({now_ms}", "+inf") for k in slot_keys)
    online = sum(1 for _ in client.scan_iter(match=keys.connected_online(0)[:-1] + "*"))
    return {"busy_counters": busy, "play_tokens": tokens, "connection_slots": slots, "presences": online}


def wait_slots(services, timeout_s: float) -> dict[str, int]:
    """Held slots, once a dead process's leases had ``timeout_s`` to lapse."""
    deadline = time.monotonic() + timeout_s
    while True:
        held = held_slots(services)
        if not any(held.values()) or time.monotonic() > deadline:
            return held
        time.sleep(0.1)


# -- the run -----------------------------------------------------------------------------
def setup(services, fleet: Fleet, http: Http) -> tuple[str, dict[str, int], list[int]]:
    """Builtins on the board, the API processes (started by the caller) up; the owner's token,
    the builtins' ids and the owner's two connected agents' ids."""
    from arena.ladder.registration import register_builtin_agents

    agents = services.sessions.write_transaction(
        lambda s: register_builtin_agents(s, ENV, BUILTINS), what="builtins")
    for name in ("api_a", "api_b"):
        wait_http(fleet.url(name), timeout=120)
    owner = http.call("POST", "/api/v1/users", json={"name": "owner"}).json()["token"]
    connected = [http.call("POST", "/api/v1/agents/connected", owner, json={"env": ENV, "name": f"remote-{i}"})
                 .json()["id"] for i in range(2)]
    return owner, agents, connected


def run(args) -> dict:
    from arena.core.settings import Settings
    from arena.storage.redis_server import EmbeddedRedis

    tmp = Path(tempfile.mkdtemp(prefix="arena-process-faults-"))
    database = create_database(args.postgres_url, "arena_faults") if args.postgres else None
    with EmbeddedRedis(tmp / "redis") as redis_server:
        settings = Settings(data_dir=tmp / "data", redis_url=redis_server.url,
                            database_url=database_url(args.postgres_url, database) if database
                            else f"sqlite:///{tmp}/arena.db")
        env = {**os.environ, "PYTHONPATH": str(_ROOT), "ARENA_DATA_DIR": str(settings.data_dir),
               "ARENA_DATABASE_URL": settings.database_url, "ARENA_REDIS_URL": redis_server.url,
               "ARENA_ENVS": ENV, "ARENA_PROBE_CONCURRENCY": "0", "ARENA_PROBE_AUTO": "false",
               "ARENA_LOG_LEVEL": "WARNING", "ARENA_WORK_STALE_S": str(args.lease_s),
               "ARENA_CONNECTED_SLOT_TTL_S": str(max(5.0, args.lease_s)), **LIMITS}
        fleet = Fleet(tmp, env, {"api_a": free_port(), "api_b": free_port()}, args.max_rate)
        clients: list[subprocess.Popen] = []
        migrate(settings)  # the API processes boot while this one imports the rest (torch: seconds)
        with fleet.up("api_a", "api_b"), open_services(settings) as services:
            http = Http([fleet.url("api_a"), fleet.url("api_b")])
            try:
                owner, agents, connected = setup(services, fleet, http)
                people = [http.call("POST", "/api/v1/users", json={"name": f"person-{i}"}).json()["token"]
                          for i in range(args.people)]
                fleet.start("service")
                clients = [start_client(fleet.url(name), owner, [agent_id])
                           for name, agent_id in zip(("api_a", "api_b"), connected, strict=True)]
                load = Load(http, [fleet.url("api_a").replace("http", "ws"), fleet.url("api_b").replace("http", "ws")],
                            owner, agents)
                for i, token in enumerate(people):
                    load.start(load.person, token, i)
                load.start(load.challenger)
                load.start(load.uploader, args.upload_every)
                load.start(load.reader)
                start = time.monotonic()
                killer = Killer(fleet, args.kill_every, args.down_s, start + args.seconds)
                killer.start()
                time.sleep(args.seconds)
                load.stop.set()
                killer.stop.set()
                killer.join(60)
                elapsed = time.monotonic() - start
                left = drain(services, load, args.drain_s)
                load.done.set()
                still = load.join(30)
                for c in clients:  # the connected agents leave; their slots must be given back
                    c.terminate()
                for c in clients:
                    c.wait(30)
                fleet.stop_all()
                slots = wait_slots(services, args.slots_s)
                lost = lost_work(services, load)
                result = {
                    "requests": sum(http.status.values()), "lost": sum(lost.values()),
                    "duplicated": duplicated_records(services.sessions),
                    "slots_stuck": sum(slots.values()),
                    "responses_5xx": sum(n for code, n in http.status.items() if code >= 500),
                    "rebuild_equals_live": rebuild_equals_live(services.sessions, [ENV]),
                    "seconds": round(elapsed, 1), "kills": {name: fleet.kills[name] for name in ("api_a", "service")},
                    "people_games": len(load.tickets), "people_results": Counter(load.results.values()),
                    "challenges": len(load.challenges), "uploads": len(load.uploads),
                    "lost_detail": lost, "slots_detail": slots, "stuck_counters": dict(STUCK), "open_after_drain": left,
                    "threads_left": still, "refused": http.refused, "broken": http.broken,
                    "http_statuses": {str(k): v for k, v in sorted(http.status.items())},
                    "matches": _matches(services), "smoke": args.smoke, "_events": killer.events,
                }
            finally:
                for c in clients:
                    with contextlib.suppress(ProcessLookupError):
                        c.kill()
                fleet.stop_all()
                http.close()
    result["database"] = "postgresql" if database else "sqlite"
    if result["lost"] or result["duplicated"] or result["slots_stuck"] or not result["rebuild_equals_live"]:
        result["kept"] = str(tmp)  # the database, Redis's AOF and each process's log, to find the cause
        if database:
            result["kept_database"] = database
    else:
        shutil.rmtree(tmp, ignore_errors=True)
        if database:
            drop_database(args.postgres_url, database)
    return result


def _matches(services) -> int:
    from sqlalchemy import func, select

    from arena.storage.db import models

    with services.sessions() as session:
        return session.scalar(select(func.count()).select_from(models.Match))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the load")
    parser.add_argument("--kill-every", type=float, default=8.0, help="seconds between kills (API A, service, ...)")
    parser.add_argument("--down-s", type=float, default=1.0, help="how long a killed process stays down")
    parser.add_argument("--people", type=int, default=4, help="scripted people, each a user")
    parser.add_argument("--upload-every", type=float, default=2.0)
    parser.add_argument("--max-rate", type=float, default=200.0, help="the service's rated matches/s")
    parser.add_argument("--drain-s", type=float, default=150.0, help="longest wait for the work to drain")
    parser.add_argument("--slots-s", type=float, default=45.0, help="longest wait for dead processes' leases")
    parser.add_argument("--lease-s", type=float, default=30.0,
                        help="a dead process's claims and sockets lapse after this (ARENA_WORK_STALE_S and "
                             "ARENA_CONNECTED_SLOT_TTL_S)")
    parser.add_argument("--postgres", action="store_true", help="on a scratch PostgreSQL database, not SQLite")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="the PostgreSQL server (any database on it)")
    args = parse_with_smoke(parser, "seconds, tiny sizes (the suite runs this)",
                            seconds=8.0, kill_every=2.5, people=2, upload_every=2.0, lease_s=6.0)  # each killed once
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    out = run(args)
    events = out.pop("_events")
    print("fault timeline:")
    for line in events:
        print(f"  {line}")
    counts = ("requests", "responses_5xx", "refused", "broken", "people_games", "challenges", "uploads",
              "matches", "lost", "duplicated", "slots_stuck", "rebuild_equals_live", "seconds")
    print_rows(24, [*((key, f"{out[key]!s:>10}") for key in counts), ("kills", out["kills"]),
                    ("lost, by kind", out["lost_detail"]), ("slots, by kind", out["slots_detail"]),
                    ("open after drain", out["open_after_drain"]), ("counters held", out["stuck_counters"])])
    print(json.dumps(out))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
