"""End to end, as a user does it: `arena serve` with its demo board, then a search agent
connected with `arena connect` climbs to first place on the connect-four leaderboard.

The real commands in subprocesses (SQLite and the embedded Redis under a temporary data
dir). The example's bitboard negamax beats every demo agent (scripted heuristics and
small networks), so once its sigma has come down it ranks first by mu - 3 sigma; the
ratings then rebuild from the match log exactly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from arena.ladder.recorder import rebuild_ratings
from arena.storage.db import make_engine, session_factory
from arena.storage.redis_server import free_port
from envs.registry import get_spec
from tests.client.live import popen_taking_ctrl_c
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]
ENV = "connect_four-v3"


def tails(logs: list[Path]) -> str:
    """The last lines of each log, for a failure's message."""
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in logs)


def top_agent(http: httpx.Client) -> int | None:
    try:
        rows = http.get("/api/v1/leaderboard", params={"env": ENV, "limit": 3}).json()["data"]
    except (httpx.HTTPError, KeyError, ValueError):
        return None
    return rows[0]["agent_id"] if rows else None


def test_a_connected_negamax_takes_first_place_on_the_demo_board(tmp_path):
    data_dir = tmp_path / "data"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ARENA_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT), "COLUMNS": "200",
           "ARENA_ENVS": ENV, "ARENA_PROBE_AUTO": "false"}
    env.pop("ARENA_DATABASE_URL", None)
    env.pop("ARENA_REDIS_URL", None)
    serve_log, connect_log = tmp_path / "serve.log", tmp_path / "connect.log"
    logs = [serve_log, connect_log]
    with serve_log.open("wb") as out:
        serve = subprocess.Popen([sys.executable, "-m", "arena.cli", "serve", "--workers", "0", "--port", str(port)],
                                 env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    connect = None
    http = httpx.Client(base_url=url, timeout=10)  # one client for the polling: httpx.get builds a TLS context each
    try:
        wait_for("the demo board", lambda: top_agent(http), 240.0, 0.25, lambda: tails(logs))
        token = http.post("/api/v1/users", json={"name": "searcher"}).json()["token"]
        with connect_log.open("wb") as out:
            connect = popen_taking_ctrl_c(
                [sys.executable, "-m", "arena.cli", "connect", "examples/connect_four_negamax.py:act", "--env", ENV,
                 "--name", "negamax", "--server", url, "--token", token],
                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        agents = wait_for("the agent's registration",
                          lambda: http.get("/api/v1/agents", params={"owner": "searcher"}).json()["data"],
                          240.0, 0.25, lambda: tails(logs))
        negamax = agents[0]["id"]
        wait_for("negamax in first place", lambda: top_agent(http) == negamax, 420.0, 0.25, lambda: tails(logs))
        agent = http.get(f"/api/v1/agents/{negamax}").json()
        assert agent["kind"] == "connected" and agent["ratings"][0]["games"] > 0
    finally:
        http.close()
        if connect is not None:
            connect.send_signal(signal.SIGINT)
            connect.wait(30)
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(90) == 0, serve_log.read_text(errors="replace")[-3000:]
    sessions = session_factory(make_engine(f"sqlite:///{data_dir}/arena.db"))
    report = rebuild_ratings(sessions, get_spec(ENV))
    assert report.equal, report.mismatches
