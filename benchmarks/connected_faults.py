"""Connected agents under faults: the ladder keeps its pace, nothing is lost or counted twice.

The service as ``arena serve`` runs it, on this machine: an embedded Valkey, SQLite, the
API (uvicorn) in its own process, the background service (ladder, connected lane) in
this one, flat out on connect four and tictactoe with six scripted agents each (the
connected agents play connect four). First a baseline phase
with no connected agent online, then a fault phase of the same length with:

* two honest connected agents, each a client process, one of them SIGKILLed mid-batch
  and restarted every ``--kill-every`` seconds;
* a client that answers every request with garbage (wrong row counts, strings, unknown ids);
* a reconnect storm: one agent's client connecting, saying hello and dropping, 50 times a second;
* 200 idle sockets that never say hello (re-opened when the server closes them);
* HTTP readers and writers on the API the whole time, counting every 5xx.

Then the service stops; a second service starts and drains what the first left queued
(the connected lane's leftovers forfeit ``disconnected``). Checked from the database:
``lost`` (matches still queued), ``duplicated`` (participants or rating events beyond one
per seat), ``ratings_match_rebuild``, plus ``responses_5xx`` and ``pace_ratio``: the pace
of the service loop's own matches (those without a connected agent: matches recorded
per second it spent playing them) in the fault phase over the baseline's.

    python benchmarks/connected_faults.py [--seconds 30] [--smoke]

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import signal
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

import httpx
import msgpack
from sqlalchemy import func, select
from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import connect

from arena.storage.db import models
from benchmarks.connected import ENV, api_process, free_port, start_client, stop_api, wait_http, wait_online
from benchmarks.support.databases import open_services
from benchmarks.support.match_log import duplicated_records, rebuild_equals_live
from benchmarks.support.smoke import parse_with_smoke, print_rows

STORMS = ("storm-1", "storm-2", "storm-3", "storm-4")
OTHER_ENV = "tictactoe-v3"
"""A second board, of scripted agents only: the service loop's own matches, whose pace is measured."""
BUILTINS = ["heuristic", "heuristic:epsilon=0.2", "heuristic:epsilon=0.4", "heuristic:epsilon=0.6",
            "heuristic:epsilon=0.8", "random"]


class Faults:
    """The fault threads; ``stop`` ends them all."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.ws = url.replace("http://", "ws://")
        self.stop = threading.Event()
        self.status: Counter[int] = Counter()
        self.storms = 0
        self.threads: list[threading.Thread] = []

    def start(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)

    def _handshake(self, agent_id: int, hello: bool):
        try:
            ws = connect(f"{self.ws}/api/v1/agents/{agent_id}/connect", open_timeout=5)
        except InvalidStatus as exc:
            self.status[exc.response.status_code] += 1
            return None
        except (OSError, WebSocketException, TimeoutError):
            return None
        if hello:
            ws.send(msgpack.packb({"type": "hello", "protocol": 1, "token": self.token}))
        return ws

    def garbage(self, agent_id: int) -> None:
        junk = [lambda r: {"type": "answer", "id": r["id"], "actions": ["x"] * len(r["matches"])},
                lambda r: {"type": "answer", "id": r["id"], "actions": [0]},
                lambda r: {"type": "answer", "id": "no-such-request", "actions": [0]},
                lambda r: {"type": "nonsense"}]
        n = 0
        while not self.stop.is_set():
            ws = self._handshake(agent_id, hello=True)
            if ws is None:
                time.sleep(0.5)
                continue
            try:
                while not self.stop.is_set():
                    try:
                        message = msgpack.unpackb(ws.recv(timeout=0.5))
                    except TimeoutError:
                        continue
                    if message.get("type") == "request":
                        ws.send(msgpack.packb(junk[n % len(junk)](message)))
                        n += 1
            except WebSocketException:
                time.sleep(0.2)
            finally:
                ws.close()

    def storm(self, agent_id: int, per_s: float = 50.0) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            ws = self._handshake(agent_id, hello=True)
            if ws is not None:
                try:
                    ws.recv(timeout=2)
                except (WebSocketException, TimeoutError):
                    pass
                ws.close()
                self.storms += 1
            time.sleep(max(0.0, 1 / per_s - (time.monotonic() - start)))

    def idle(self, agent_id: int, sockets: int = 200) -> None:
        open_: list = []
        while not self.stop.is_set():
            open_ = [ws for ws in open_ if ws.state.name == "OPEN"]
            while len(open_) < sockets and not self.stop.is_set():
                ws = self._handshake(agent_id, hello=False)
                if ws is None:
                    break
                open_.append(ws)
            self.stop.wait(1.0)
        for ws in open_:
            ws.close()

    def http(self, agent_ids: list[int]) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.url, timeout=30) as client:
            calls = [lambda i: client.get("/api/v1/leaderboard", params={"env": ENV}),
                     lambda i: client.get(f"/api/v1/agents/{agent_ids[i % len(agent_ids)]}"),
                     lambda i: client.get("/api/v1/matches", params={"env": ENV}),
                     lambda i: client.post("/api/v1/agents/connected", headers=headers,
                                           json={"env": ENV, "name": "honest-a"})]
            i = 0
            while not self.stop.is_set():
                try:
                    self.status[calls[i % len(calls)](i).status_code] += 1
                except httpx.HTTPError:
                    self.status[-1] += 1
                i += 1
                self.stop.wait(0.05)

    def killer(self, procs: list, url: str, agent_id: int, every_s: float) -> None:
        while not self.stop.wait(every_s):
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait()
            procs[0] = start_client(url, self.token, [agent_id])


def loop_pace(service) -> tuple[int, float]:
    """Matches the service loop played itself (both boards) and the seconds it spent on them."""
    paces = list(service.pace.values())
    return sum(p[0] for p in paces), sum(p[1] for p in paces)


def rate(before: tuple[int, float], after: tuple[int, float]) -> float:
    """Matches per second of the service's own loop between two readings of ``service.pace``
    (the matches without a connected agent: the connected ones play in the lane)."""
    seconds = after[1] - before[1]
    return (after[0] - before[0]) / seconds if seconds > 0 else 0.0


def integrity(services) -> dict:
    from arena.storage.db import repositories as repo

    with services.sessions() as session:
        matches = session.scalar(select(func.count()).select_from(models.Match))
        queued = repo.queue_depth(session, ENV)
        terminations = Counter(session.execute(select(models.Match.termination)).scalars().all())
    return {"matches": matches, "lost": queued, "duplicated": duplicated_records(services.sessions),
            "ratings_match_rebuild": rebuild_equals_live(services.sessions, [ENV]),
            "terminations": dict(terminations)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
    parser.add_argument("--kill-every", type=float, default=3.0)
    args = parse_with_smoke(parser, "seconds, tiny sizes (the suite runs this)", seconds=2.0, kill_every=1.0)

    from arena.core.settings import Settings
    from arena.storage.redis_server import EmbeddedRedis

    tmp = Path(tempfile.mkdtemp(prefix="arena-connected-faults-"))
    with EmbeddedRedis(tmp / "redis") as redis_server:
        settings = Settings(data_dir=tmp / "data", database_url=f"sqlite:///{tmp}/arena.db",
                            redis_url=redis_server.url, signups_per_hour=1000, writes_per_minute=100_000,
                            client_writes_per_minute=100_000)
        port = free_port()
        # every socket comes from 127.0.0.1 here: room for the 200 idle ones
        with api_process(settings, port, ARENA_SIGNUPS_PER_HOUR="1000", ARENA_WRITES_PER_MINUTE="100000",
                         ARENA_CLIENT_WRITES_PER_MINUTE="100000", ARENA_CONNECTED_SOCKETS_PER_ADDRESS="1000") as api, \
                open_services(settings) as services:
            from arena.ladder.background import BackgroundService, ServiceConfig
            from arena.ladder.pacing import PacingConfig
            from arena.ladder.registration import register_builtin_agents
            from arena.runners import InProcessRunner

            config = ServiceConfig(envs=(ENV, OTHER_ENV), seed=3, batch_size=256, pacing=PacingConfig(settle=False),
                                   max_rate=1000)
            url = f"http://127.0.0.1:{port}"
            clients: list[subprocess.Popen] = []
            try:
                wait_http(url)
                token = httpx.post(f"{url}/api/v1/users", json={"name": "faults"}).json()["token"]
                headers = {"Authorization": f"Bearer {token}"}
                agents = {name: httpx.post(f"{url}/api/v1/agents/connected", headers=headers,
                                           json={"env": ENV, "name": name}).json()
                          for name in ("honest-a", "honest-b", "garbage", *STORMS)}
                for env_id in (ENV, OTHER_ENV):
                    services.sessions.write_transaction(
                        lambda s, env_id=env_id: register_builtin_agents(s, env_id, BUILTINS), what="builtins")
                service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                            config).start()
                time.sleep(1.0)
                before = loop_pace(service)
                time.sleep(args.seconds)
                baseline = rate(before, loop_pace(service))

                clients = [start_client(url, token, [agents["honest-a"]["id"]]),
                           start_client(url, token, [agents["honest-b"]["id"]])]
                wait_online(services, [agents["honest-a"]["id"], agents["honest-b"]["id"]])
                faults = Faults(url, token)
                faults.start(faults.garbage, agents["garbage"]["id"])
                for name in STORMS:  # 50 reconnects a second between them
                    faults.start(faults.storm, agents[name]["id"], 50.0 / len(STORMS))
                faults.start(faults.idle, agents[STORMS[0]]["id"])
                faults.start(faults.http, [a["id"] for a in agents.values()])
                faults.start(faults.killer, clients, url, agents["honest-a"]["id"], args.kill_every)
                before = loop_pace(service)
                time.sleep(args.seconds)
                during = rate(before, loop_pace(service))
                faults.join()
                service.stop()
                for c in clients:  # measured: its last connected batch forfeits after the grace
                    c.kill()
                while service.lane.busy(ENV):
                    time.sleep(0.2)
            finally:
                for c in clients:
                    c.kill()
            drain = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()), config)
            for _ in range(3):  # the lane resumes its leftovers; nobody is connected now
                drain.step()
                while any(drain.lane.busy(e) for e in config.envs):
                    time.sleep(0.2)
            drain.stop()
            stop_api(api)
            result = integrity(services)
    fivexx = sum(n for code, n in faults.status.items() if code >= 500)
    result.update({
        "env": ENV, "phase_s": args.seconds, "baseline_mps": round(baseline, 1), "faults_mps": round(during, 1),
        "pace_ratio": round(during / baseline, 3) if baseline else None, "responses_5xx": fivexx,
        "http_statuses": {str(k): v for k, v in sorted(faults.status.items())}, "reconnects": faults.storms,
        "reconnects_per_s": round(faults.storms / args.seconds, 1), "smoke": args.smoke,
    })
    print_rows(36, [
        ("service loop matches/s, baseline", f"{baseline:>10,.1f}"),
        ("service loop matches/s, under faults", f"{during:>10,.1f}   ratio {result['pace_ratio']}"),
        ("responses >= 500", f"{fivexx:>10}"),
        ("reconnects", f"{faults.storms:>10}   ({result['reconnects_per_s']}/s)"),
        ("lost / duplicated", f"{result['lost']:>6} / {result['duplicated']}"),
        ("rebuild == live", f"{result['ratings_match_rebuild']!s:>10}"),
    ])
    print(json.dumps(result))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
