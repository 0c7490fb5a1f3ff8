"""Connected agents on the live ladder: scheduled while online, played in the lane, rated once."""

from __future__ import annotations

import time

import numpy as np

from agents.baselines import HEURISTICS
from agents.policy import MatchRng
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.recorder import rebuild_ratings
from arena.ladder.registration import register_builtin_agents
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from envs.registry import get_spec
from tests.connected.test_live_protocol import wait_online
from tests.waiting import wait_for

ENV = "connect_four-v3"


def heuristic_batch(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    k = len(mask)
    return HEURISTICS[ENV]().act(obs, mask, MatchRng(np.arange(k), np.zeros(k, dtype=np.int64), np.zeros(k)))


def agent_row(live, agent_id: int) -> repo.AgentInfo:
    with live.services.sessions() as session:
        return repo.get_agent(session, agent_id)


def rated_games(live, agent_id: int) -> int:
    with live.services.sessions() as session:
        return sum(r.games for r in repo.load_ratings(session, [agent_id]).values())


def test_connected_agent_is_rated_on_the_ladder_while_online(live, run_client):
    services = live.services
    services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, ["random", "heuristic:epsilon=0.5"]),
                                        what="builtins")
    token = live.user("carol")
    agent = live.connected_agent(token, "lane-heuristic")
    service = BackgroundService(services, InProcessRunner(), ServiceConfig(envs=(ENV,), seed=7, batch_size=64))
    try:
        service.step()  # offline: not scheduled, and says why
        assert agent_row(live, agent["id"]).status_reason.startswith("offline")
        assert rated_games(live, agent["id"]) == 0
        client = run_client(live.url, token, agent["id"], heuristic_batch, batched=True)
        wait_online(live, agent["id"])
        deadline = time.monotonic() + 60
        while rated_games(live, agent["id"]) < 20:
            assert time.monotonic() < deadline, "the connected agent was not rated"
            service.step()
            time.sleep(0.05)
        assert agent_row(live, agent["id"]).status_reason == ""
        # The results reach the client after the batch is recorded: wait for them, then read.
        wait_for("the client to hear its results", lambda: client.progress.matches >= 20, timeout_s=30)
        assert client.progress.wins > client.progress.losses
        deadline = time.monotonic() + 30
        while service.lane.busy(ENV):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with services.sessions() as session:
            assert repo.queue_depth(session, ENV) == 0
        report = rebuild_ratings(services.sessions, get_spec(ENV))
        assert report.equal, report.mismatches
        with services.sessions() as session:
            page = repo.match_history(session, env_id=ENV, agent_id=agent["id"], limit=500)
        assert all(m.termination == "normal" for m in page.matches if m.rated)
    finally:
        service.stop()
