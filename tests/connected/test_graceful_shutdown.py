"""A clean stop of an API process (SIGTERM, as a deploy restarts it) gives back everything
its connected agents' sockets held in Redis before it exits, not after their TTLs: the
agent's presence, the sockets' slots per user and per address, and the requests its client
had not answered (back on the agent's queue, for its next connection).

The real ``arena serve --no-service`` in a subprocess, clients connected to it, and the Redis
keys read before and after the process exits: the project's own client, thinking about a
request; and a client that stopped reading (frozen, or its network gone), whose socket's
buffers are full and whose last ``ping`` the server cannot answer. uvicorn cancels the handlers
still running when its graceful shutdown times out (10 s), and ends the event loop at once: before
the app's shutdown waited for the releases, the loop's end cancelled them (the presence and the
unanswered requests outlived the process). Since every send is bounded (``SEND_TIMEOUT_S``), that
socket is released earlier, when its send gives up (``test_unresponsive_client.py``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from arena.client.connected.client import AgentClient
from tests.connected.api_process import RawClient, filling_padding, held, processing, queue_request, still_held
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
