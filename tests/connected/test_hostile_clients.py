"""Hostile and broken clients: every misbehaviour costs only the matches it concerns.

Each test drives a raw WebSocket (not the SDK) against a live server and plays
matches through the engine as the ladder does, with a short clock.
"""

from __future__ import annotations

import json
import threading
import time

import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agents.catalog import make_policy
from arena.connected.time_controls import TimeControl
from arena.engine import MatchEngine
from arena.engine.plan import plan_matches
from arena.runners import AgentSource
from envs.registry import get_spec
from tests.connected.test_live_protocol import wait_online
from tests.waiting import wait_for

ENV = "connect_four-v3"


def ws_url(live, agent_id: int) -> str:
    return live.url.replace("http://", "ws://") + f"/api/v1/agents/{agent_id}/connect"


def open_raw(live, token: str, agent_id: int):
    ws = connect(ws_url(live, agent_id), max_size=2**24)
    ws.send(msgpack.packb({"type": "hello", "protocol": 1, "token": token}))
    welcome = msgpack.unpackb(ws.recv(timeout=10))
    assert welcome["type"] == "welcome", welcome
    return ws


def play(live, agent: dict, n: int, clock: TimeControl, seed: int = 5):
    policy = live.services.connected_policies().get(ENV, AgentSource(key=agent["key"], connected=agent["id"]))
    policy.clock = clock
    jobs = plan_matches([agent["key"], "random"], get_spec(ENV), n, seed=seed)
    with MatchEngine() as engine:
        return engine.play(ENV, jobs, {agent["key"]: policy, "random": make_policy("random", ENV)})


def serve(ws, answer, stop: threading.Event) -> threading.Thread:
    """Answer requests on ``ws`` with ``answer(request) -> frame | None`` until ``stop``."""
    def loop() -> None:
        while not stop.is_set():
            try:
                message = msgpack.unpackb(ws.recv(timeout=0.2))
            except TimeoutError:
                continue
            except ConnectionClosed:
                return
            if message["type"] == "request":
                frame = answer(message)
                if frame is None:
                    continue
                try:
                    ws.send(frame)
                except ConnectionClosed:  # the test closed the socket while a slow answer was made
                    return

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def first_legal(request: dict) -> list[int]:
    mask = np.frombuffer(request["mask"]["data"], dtype=np.uint8).reshape(request["mask"]["shape"])
    return [int(np.flatnonzero(row)[0]) for row in mask]


CLOCK = TimeControl(act_timeout_s=2.0, overage_s=2.0, grace_s=0.5)


@pytest.fixture
def agent_and_token(live):
    token = live.user("mallory")
    return live.connected_agent(token, "hostile"), token


def test_a_malformed_answer_forfeits_its_rows_with_invalid_output_and_an_illegal_one_only_its_match(
        live, agent_and_token):
    agent, token = agent_and_token
    ws = open_raw(live, token, agent["id"])
    stop = threading.Event()
    calls = {"n": 0}

    def answer(request: dict) -> bytes:
        calls["n"] += 1
        actions = first_legal(request)
        if calls["n"] == 1:  # one action too few: the whole request is refused
            return msgpack.packb({"type": "answer", "id": request["id"], "actions": actions[:-1]})
        return msgpack.packb({"type": "answer", "id": request["id"], "actions": actions})

    serve(ws, answer, stop)
    wait_online(live, agent["id"])
    try:
        records = play(live, agent, 4, CLOCK)
    finally:
        stop.set()
        ws.close()
    mine = [r for r in records if r.seats[0] == agent["key"]]  # the agent moves first there: refused at once
    assert {r.termination for r in mine} == {"invalid_output"}
    assert all(r.seats[r.forfeit_seat] == agent["key"] for r in mine)

    ws = open_raw(live, token, agent["id"])
    stop = threading.Event()

    illegal = {"sent": False}

    def one_illegal(request: dict) -> bytes:
        actions = first_legal(request)
        if not illegal["sent"]:
            illegal["sent"] = True
            actions[0] = 99  # out of range: that row's match alone
        return msgpack.packb({"type": "answer", "id": request["id"], "actions": actions})

    serve(ws, one_illegal, stop)
    wait_online(live, agent["id"])
    try:
        records = play(live, agent, 6, CLOCK, seed=9)
    finally:
        stop.set()
        ws.close()
    terminations = sorted(r.termination for r in records)
    assert terminations == ["illegal_action"] + ["normal"] * 5


def test_a_slow_client_spends_its_overage_then_times_out(live, agent_and_token):
    agent, token = agent_and_token
    ws = open_raw(live, token, agent["id"])
    stop = threading.Event()

    def slow(request: dict) -> bytes:
        time.sleep(1.0)
        return msgpack.packb({"type": "answer", "id": request["id"], "actions": first_legal(request)})

    serve(ws, slow, stop)
    wait_online(live, agent["id"])
    try:
        [record] = play(live, agent, 1, TimeControl(act_timeout_s=0.5, overage_s=0.8, grace_s=0.5))
    finally:
        stop.set()
        ws.close()
    assert record.termination == "timeout" and record.seats[record.forfeit_seat] == agent["key"]
    assert len([a for a in record.actions if a[0] == 0]) >= 1  # the first, within its overage, was played


def test_a_dropped_client_forfeits_disconnected_unless_it_comes_back_within_the_grace(live, agent_and_token):
    agent, token = agent_and_token
    ws = open_raw(live, token, agent["id"])
    stop = threading.Event()

    def drop(request: dict) -> None:
        ws.close()  # gone mid-batch, without answering

    serve(ws, drop, stop)
    wait_online(live, agent["id"])
    records = play(live, agent, 2, TimeControl(act_timeout_s=5.0, overage_s=0.0, grace_s=0.5))
    stop.set()
    assert {r.termination for r in records} == {"disconnected"}

    # back within the grace: the unanswered request is sent again to the new connection
    ws = open_raw(live, token, agent["id"])
    state = {"dropped": False, "ws": ws}
    stop = threading.Event()

    def drop_once(request: dict):
        if not state["dropped"]:
            state["dropped"] = True
            state["ws"].close()
            state["ws"] = open_raw(live, token, agent["id"])
            serve(state["ws"], drop_once, stop)
            return None
        return msgpack.packb({"type": "answer", "id": request["id"], "actions": first_legal(request)})

    serve(ws, drop_once, stop)
    wait_online(live, agent["id"])
    try:
        records = play(live, agent, 2, TimeControl(act_timeout_s=5.0, overage_s=0.0, grace_s=3.0), seed=11)
    finally:
        stop.set()
        state["ws"].close()
    assert state["dropped"] and {r.termination for r in records} <= {"normal", "step_limit"}


def test_frames_are_checked_and_answers_must_match_their_request(live, agent_and_token):
    agent, token = agent_and_token
    ws = open_raw(live, token, agent["id"])
    try:
        ws.send(b"\x00" * (70 * 1024))
        assert "limit" in msgpack.unpackb(ws.recv(timeout=5))["detail"]
        ws.send(msgpack.packb({"type": "answer", "id": "nope", "actions": [0]}))
        assert "no open request" in msgpack.unpackb(ws.recv(timeout=5))["detail"]
        ws.send(b"\xc1garbage")
        assert "not valid msgpack" in msgpack.unpackb(ws.recv(timeout=5))["detail"]
        ws.send(msgpack.packb({"type": "ping"}))
        assert msgpack.unpackb(ws.recv(timeout=5))["type"] == "pong"
    finally:
        ws.close()


def test_one_connection_per_agent_bad_tokens_and_other_peoples_agents_are_refused(live, agent_and_token):
    agent, token = agent_and_token
    first = open_raw(live, token, agent["id"])
    second = open_raw(live, token, agent["id"])  # the newest connection wins: the first is closed
    try:
        assert "connected again elsewhere" in msgpack.unpackb(first.recv(timeout=5))["detail"]
        with pytest.raises(ConnectionClosed) as closed:
            first.recv(timeout=5)
        assert closed.value.rcvd.code == 4409
    finally:
        first.close()
        second.close()
    other = live.user("trent")
    for bad, code in ((other, 4403), ("not-a-token", 4401)):
        with connect(ws_url(live, agent["id"])) as ws:
            ws.send(msgpack.packb({"type": "hello", "protocol": 1, "token": bad}))
            ws.recv(timeout=5)
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=5)
            assert closed.value.rcvd.code == code
    with connect(ws_url(live, agent["id"])) as ws:
        ws.send(msgpack.packb({"type": "hello", "protocol": 2, "token": token}))
        assert "protocol 1" in json.loads(ws.recv(timeout=5))["detail"]  # before the hello: JSON


@pytest.mark.parametrize("live_settings", [{"connected_idle_s": 0.5}])  # ARENA_CONNECTED_IDLE_S
def test_silent_clients_are_cut_after_the_idle_limit_and_floods_are_closed(live, agent_and_token):
    agent, token = agent_and_token
    ws = open_raw(live, token, agent["id"])
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=5)
    assert closed.value.rcvd.code == 4408
    ws = open_raw(live, token, agent["id"])
    with pytest.raises(ConnectionClosed) as closed:
        for _ in range(2000):
            ws.send(msgpack.packb({"type": "ping"}))
        while True:
            ws.recv(timeout=5)
    assert closed.value.rcvd.code == 4429
    wait_for("the presence to be released on close",  # a hang guard: how soon is test_gateway_races's
             lambda: live.services.connected_policies().broker.presence(agent["id"]) is None, timeout_s=30,
             every_s=0.05)
