"""A connected agent end to end: registered over HTTP, played by the engine through Redis."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agents.baselines import HEURISTICS
from agents.catalog import make_policy
from arena.engine import MatchEngine
from arena.engine.plan import plan_matches
from arena.runners import AgentSource
from envs.registry import get_spec
from tests.waiting import wait_for

ENV = "connect_four-v3"


def wait_online(live, agent_id: int, timeout: float = 10.0) -> None:
    broker = live.services.connected_policies().broker
    wait_for(f"agent {agent_id}'s client to come online", lambda: broker.presence(agent_id) is not None,
             timeout_s=timeout, every_s=0.05)


def first_legal(obs: np.ndarray, mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def play(live, agent: dict, opponent: str, n: int, seed: int = 1):
    spec = get_spec(ENV)
    source = AgentSource(key=agent["key"], connected=agent["id"])
    policies = {agent["key"]: live.services.connected_policies().get(ENV, source),
                opponent: make_policy(opponent, ENV)}
    jobs = plan_matches([agent["key"], opponent], spec, n, seed=seed)
    with MatchEngine() as engine:
        return engine.play(ENV, jobs, policies), jobs


def test_connected_agent_plays_like_the_same_policy_in_process(live, run_client):
    token = live.user("alice")
    agent = live.connected_agent(token, "heuristic-over-the-wire")
    assert agent["kind"] == "connected" and agent["status"] == "placement"
    heuristic = HEURISTICS[ENV]()
    client = run_client(live.url, token, agent["id"],
                        lambda obs, mask: heuristic.act(obs, mask, _rng(len(mask))), batched=True)
    wait_online(live, agent["id"])
    records, _ = play(live, agent, "random", 24)
    assert [r.termination for r in records] == ["normal"] * 24
    assert client.progress.requests > 0 and client.progress.rows >= 24 * 3
    # the same name reuses the agent
    again = live.connected_agent(token, "heuristic-over-the-wire")
    assert again["id"] == agent["id"]


def _rng(k: int):
    from agents.policy import MatchRng

    return MatchRng(np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64), np.arange(k))


def test_offline_agent_forfeits_disconnected(live):
    token = live.user("bob")
    agent = live.connected_agent(token, "never-connects")
    source = AgentSource(key=agent["key"], connected=agent["id"])
    policies = live.services.connected_policies()
    policy = policies.get(ENV, source)
    object.__setattr__(policy, "clock", type(policy.clock)(act_timeout_s=0.5, overage_s=0.0, grace_s=0.2))
    spec = get_spec(ENV)
    jobs = plan_matches([agent["key"], "random"], spec, 2, seed=3)
    with MatchEngine() as engine:
        records = engine.play(ENV, jobs, {agent["key"]: policy, "random": make_policy("random", ENV)})
    assert [r.termination for r in records] == ["disconnected", "disconnected"]
    assert all(r.seats[r.forfeit_seat] == agent["key"] for r in records)


@pytest.mark.ray
@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here
def test_a_ray_worker_asks_a_connected_agent_like_the_service_does(live, run_client, ray_cluster):
    from arena.runners import InProcessRunner, MatchBatch
    from arena.runners.on_ray import RayMatchRunner

    token = live.user("ray-user")
    agent = live.connected_agent(token, "over-ray")
    run_client(live.url, token, agent["id"], first_legal)
    wait_online(live, agent["id"])
    jobs = plan_matches([agent["key"], "random"], get_spec(ENV), 16, seed=4)
    sources = {agent["key"]: AgentSource(agent["key"], connected=agent["id"]),
               "random": AgentSource("random", builtin="random")}
    batch = MatchBatch(ENV, jobs, sources)
    runner = RayMatchRunner(num_workers=1, connected=live.services.connected_policies())
    try:
        [(_, on_ray)] = list(runner.run([batch]))
    finally:
        runner.close()
    [(_, local)] = list(InProcessRunner(None, live.services.connected_policies()).run([batch]))
    assert {r.termination for r in on_ray} == {"normal"}
    assert [(r.match_id, r.actions) for r in on_ray] == [(r.match_id, r.actions) for r in local]


def test_two_api_processes_share_the_agent_and_the_newest_connection_wins(live):
    """A second API server on the same database and Redis: the agent connected to it is
    played like any other, and a newer connection through the other server takes it over
    (the first is closed with 4409, and its client stops for good instead of taking it back)."""
    import threading

    from websockets.sync.client import connect

    from arena.api.app import create_app
    from arena.client.connected.client import AgentClient, ConnectionRefused
    from tests.client.live import LiveServer

    other = LiveServer(create_app(live.services))
    ended: list[BaseException | None] = []
    first = None
    try:
        token = live.user("frank")
        agent = live.connected_agent(token, "on-the-other-server")
        first = AgentClient(other.url, token, agent["id"], first_legal)

        def play_first() -> None:
            try:
                first.run()
                ended.append(None)
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                ended.append(exc)

        thread = threading.Thread(target=play_first, daemon=True)
        thread.start()
        wait_online(live, agent["id"])
        records, _ = play(live, agent, "random", 6)
        assert {r.termination for r in records} == {"normal"}
        url = live.url.replace("http://", "ws://") + f"/api/v1/agents/{agent['id']}/connect"
        with connect(url) as ws:
            ws.send(json.dumps({"type": "hello", "protocol": 1, "token": token, "encoding": "json"}))
            assert json.loads(ws.recv(timeout=5))["type"] == "welcome"
            thread.join(15)
            assert not thread.is_alive(), "the older connection was not closed"
            [error] = ended
            assert isinstance(error, ConnectionRefused) and "newer connection" in str(error)
            presence = live.services.connected_policies().broker.presence(agent["id"])
            assert presence is not None and presence.fence == 2  # the newer one's token
    finally:
        if first is not None:
            first.stop()
        other.stop()