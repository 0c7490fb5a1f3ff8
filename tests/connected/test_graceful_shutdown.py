"""A clean stop of an API process (SIGTERM, as a deploy restarts it) gives back everything
its connected agents' sockets held in Redis before it exits, not after their TTLs: the
agent's presence, the sockets' slots per user and per address, and the requests its client
had not answered (back on the agent's queue, for its next connection).

The real ``arena serve --no-service`` in a subprocess, clients connected to it, and the Redis
keys read before and after the process exits: the project's own client, thinking about a
request; and a client that stopped reading (frozen, or its network gone), whose socket's
buffers are full and whose last ``ping`` the server cannot answer. uvicorn cancels the handlers
still running when its graceful shutdown times out (10 s; 1 s here, ``ARENA_SHUTDOWN_GRACE_S``: the frozen
client's socket never closes, so the stop always waits it out), and ends the event loop at once: before
the app's shutdown waited for the releases, the loop's end cancelled them (the presence and the
unanswered requests outlived the process). Since every send is bounded (``SEND_TIMEOUT_S``), that
socket is released earlier, when its send gives up (``test_unresponsive_client.py``; 1 s here, through
``ARENA_CONNECTED_SEND_TIMEOUT_S``).

After the releases the app's shutdown closes the gateway's Redis client. That one runs in process
(Starlette's test client, on asyncio's own event loop): uvloop, uvicorn's loop, closes every socket
left open when the loop ends, asyncio's leaves them open for as long as the process lives.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import msgpack
import pytest
import redis
from fastapi.testclient import TestClient

from arena.client.connected.client import AgentClient
from arena.connected.gateway import redis_client
from arena.core.settings import Settings
from arena.storage.wiring import open_services
from tests.api.helpers import API, RAISED_LIMITS, auth, new_user
from tests.connected.api_process import RawClient, filling_padding, held, processing, queue_request, still_held
from tests.connected.test_gateway_races import _named
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis]


def test_sigterm_gives_back_a_clients_presence_slots_and_open_request(api_process):
    api = api_process
    user, agent = api.agent("dee", "thinker")
    thinking, answer = threading.Event(), threading.Event()

    def think(request: dict) -> list[int]:
        """Hold the request until the test is done (it stays open on the server)."""
        thinking.set()
        answer.wait(60)
        return [0]

    client = AgentClient(api.url, user["token"], agent["id"], request_act=think)
    thread = threading.Thread(target=client.run, daemon=True)
    thread.start()
    try:
        wait_for("the agent's presence and its socket's slots", lambda: held(api, user, agent), timeout_s=30)
        request_id = queue_request(api, agent)
        assert thinking.wait(30), f"the client never got the request\n{api.output()}"
        assert len(processing(api, agent)) == 1
        api.stop()
        left = still_held(api, user, agent, [request_id])
        assert not left, f"outlived the process: {'; '.join(left)}\n{api.output()}"
    finally:
        answer.set()
        client.stop()
        thread.join(10)


@pytest.mark.skipif(not Path("/proc/sys/net/ipv4/tcp_wmem").exists(), reason="reads Linux's TCP buffer sizes")
@pytest.mark.parametrize("api_process_settings",
                         [{"ARENA_CONNECTED_SEND_TIMEOUT_S": "1", "ARENA_SHUTDOWN_GRACE_S": "1"}],
                         ids=["send-timeout-and-grace-1s"])
def test_sigterm_gives_back_what_a_client_that_stopped_reading_held(api_process):
    api = api_process
    user, agent = api.agent("eve", "frozen")
    client = RawClient(api, agent, user["token"])
    try:
        wait_for("the agent's presence and its socket's slots", lambda: held(api, user, agent), timeout_s=30)
        # From here on the client reads nothing. A request larger than the sockets' buffers fills
        # them: once the pump took the next one, the first was written and the server's transport
        # is paused for good.
        requests = [queue_request(api, agent, filling_padding()) for _ in range(3)]
        wait_for("the pump to fill the socket's buffers",
                 lambda: sum(api.store.llen(k) for k in processing(api, agent)) == 2, timeout_s=30)
        client.ping()  # its pong waits for room: the reader is stuck
        api.stop()
        left = still_held(api, user, agent, requests)
        assert not left, f"outlived the process: {'; '.join(left)}\n{api.output()}"
    finally:
        client.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here
def test_the_app_closes_the_gateways_redis_client_after_the_releases(tmp_path, migrated_db_url, redis_url,
                                                                      monkeypatch):
    """The app's shutdown waits for its sockets' releases, then closes the gateway's Redis client.
    It was never closed: on asyncio's loop its connections stayed open in Redis after the app stopped."""
    from arena.api.app import create_app

    name = f"gateway-{uuid.uuid4().hex}"  # the gateway's connections, told from any other in CLIENT LIST
    monkeypatch.setattr("arena.api.routes.connected.redis_client", lambda url: redis_client(_named(url, name)))
    store = redis.Redis.from_url(redis_url)

    def gateway_connections() -> int:
        return sum(c["name"] == name for c in store.client_list())

    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=migrated_db_url,
                        redis_url=redis_url, **RAISED_LIMITS)
    with open_services(settings) as services:
        with TestClient(create_app(services)) as client:
            token = new_user(client, "stopper")
            agent = client.post(f"{API}/agents/connected", json={"env": "connect_four-v3", "name": "stopper"},
                                headers=auth(token)).json()
            with client.websocket_connect(f"{API}/agents/{agent['id']}/connect") as ws:
                ws.send_bytes(msgpack.packb({"type": "hello", "protocol": 1, "token": token}))
                assert msgpack.unpackb(ws.receive_bytes())["type"] == "welcome"
                wait_for("the connection's tasks to block in Redis", lambda: gateway_connections() >= 2, timeout_s=30)
        assert services.connected_policies().broker.presence(agent["id"]) is None  # released, as before
    wait_for("the gateway's connections to Redis to close", lambda: gateway_connections() == 0, timeout_s=30,
             explain=lambda: f"{gateway_connections()} still open")
    store.close()
