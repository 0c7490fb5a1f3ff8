"""Challenges are played by the background service, never in the request (issue 20, item 5):
a challenge of a connected agent whose program is holding its first move is answered
202 at once, stays unrecorded while the service plays it, and ends once the program moves."""

from __future__ import annotations

import threading

import httpx
import numpy as np

from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.registration import register_builtin_agents
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from tests.connected.test_live_protocol import wait_online
from tests.waiting import wait_for

ENV = "tictactoe-v3"
API = "/api/v1"


def _status(live, challenge_id: str) -> dict:
    found = httpx.get(f"{live.url}{API}/challenges/{challenge_id}")
    assert found.status_code == 200, found.text
    return found.json()


def _wait_for(live, challenge_id: str, statuses: set[str], timeout: float = 30.0) -> dict:
    return wait_for(f"challenge {challenge_id} to be {' or '.join(sorted(statuses))}",
                    lambda: (found := _status(live, challenge_id))["status"] in statuses and found,
                    timeout_s=timeout, every_s=0.05, explain=lambda: f"it is {_status(live, challenge_id)['status']}")


def test_a_connected_agents_challenge_is_answered_before_it_is_played_and_played_by_the_service(live, run_client):
    services = live.services
    rand = services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, ["random"]),
                                               what="builtins")["random"]
    token = live.user("dee")
    agent = live.connected_agent(token, "held", env=ENV)
    moving, asked = threading.Event(), threading.Event()

    def held_first_move(obs: np.ndarray, mask: np.ndarray) -> int:
        asked.set()
        moving.wait(20)  # the program thinks until the test lets it move
        return int(np.flatnonzero(mask)[0])

    client = run_client(live.url, token, agent["id"], held_first_move)
    wait_online(live, agent["id"])
    service = BackgroundService(services, InProcessRunner(), ServiceConfig(envs=(), seed=5)).start()
    try:
        body = {"env": ENV, "agents": [agent["id"], rand], "matches": 2}
        queued = httpx.post(f"{live.url}{API}/challenges", json=body, headers={"Authorization": f"Bearer {token}"})
        assert queued.status_code == 202, queued.text
        answer = queued.json()
        assert answer["status"] == "queued" and len(answer["match_ids"]) == 2
        assert queued.headers["Location"] == f"{API}/challenges/{answer['id']}"

        playing = _wait_for(live, answer["id"], {"playing"})  # the service took it ...
        assert asked.wait(20), "the service never asked the program for a move"  # ... and waits for the program
        assert playing["recorded"] == 0 and playing["results"] == []
        with services.sessions() as session:
            assert repo.existing_match_ids(session, answer["match_ids"]) == set()
        moving.set()
        done = _wait_for(live, answer["id"], {"done", "failed"})
    finally:
        moving.set()
        service.stop()
    assert done["status"] == "done", done
    assert [m["id"] for m in done["results"]] == answer["match_ids"]
    assert all(m["termination"] == "normal" and agent["id"] in m["agent_ids"] for m in done["results"])
    assert {tuple(m["agent_ids"]) for m in done["results"]} == {(agent["id"], rand), (rand, agent["id"])}
    wait_for("the program to hear both results over its socket", lambda: client.progress.matches >= 2,
             timeout_s=10, every_s=0.05, explain=lambda: str(client.progress))
