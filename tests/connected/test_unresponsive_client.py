"""A client that stops reading (a frozen process, or its network gone half-open) is closed by the
server, which gives back what its socket held: the presence, the slots, and the requests it was sent
and did not answer (back at the front of the agent's queue, for its next connection).

Its socket's buffers fill, so a frame to it waits for room that never comes: the pong to its ping
(the reader's), or the next request (the pump's). Before every send was bounded (``SEND_TIMEOUT_S``
in ``arena/connected/gateway.py``) the reader never returned, so the idle timeout (the reader's)
never fired either, and the heartbeat kept renewing the presence: the agent looked online while every
request sent to it cost the engine a full deadline and then a forfeit.

The real ``arena serve --no-service`` in a subprocess, and a client on a raw socket that reads
nothing once it has said ``hello``. The process gives up on a send after 1 s
(``ARENA_CONNECTED_SEND_TIMEOUT_S``; 5 s by default), and says so in its log. One process serves
both cases, each with a user and an agent of its own (its start is most of a case's time). The release runs only
once the connection's four tasks (reader, pump, events, heartbeat) have ended, so a presence given
back also says that they all did.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from arena.connected.protocol import CLOSE_IDLE
from arena.storage.redis_server import EmbeddedRedis, connect_redis
from tests.connected.api_process import (
    ApiProcess,
    RawClient,
    api_process_serving,
    filling_padding,
    held,
    processing,
    queue_request,
    still_held,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis,
              pytest.mark.skipif(not Path("/proc/sys/net/ipv4/tcp_wmem").exists(),
                                 reason="reads Linux's TCP buffer sizes")]


@pytest.fixture(scope="module")
def api(embedded_redis: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiProcess]:
    """``arena serve --no-service`` for this module's tests, giving up on a send after 1 s."""
    url = embedded_redis.url.rsplit("/", 1)[0] + "/0"  # this module's while it runs, as tests/web's servers'
    store = connect_redis(url, timeout_s=5)
    store.flushdb()
    store.close()
    with api_process_serving(tmp_path_factory.mktemp("frozen-clients"), url,
                             {"ARENA_CONNECTED_SEND_TIMEOUT_S": "1"}) as api:
        yield api


@pytest.mark.parametrize("requests", [1, 3], ids=["the-pong-waits", "the-pump-waits-too"])
def test_a_client_that_stops_reading_and_pings_is_closed_and_its_requests_go_back(api, requests):
    user, agent = api.agent(f"fay-{requests}", f"frozen-{requests}")
    client = RawClient(api, agent, user["token"])
    try:
        assert client.welcome()["type"] == "welcome"
        wait_for("the agent's presence and its socket's slots", lambda: held(api, user, agent), timeout_s=30,
                 procs=[api.proc], explain=api.output)
        # From here on the client reads nothing. A request larger than the sockets' buffers fills them:
        # once any of it reached this client, it was written whole and the server's transport is paused
        # for good. With one request only the reader's pong waits; with more, the pump's next send too.
        sent = [queue_request(api, agent, filling_padding()) for _ in range(requests)]
        wait_for("the first request to fill the socket's buffers", client.has_bytes_waiting, timeout_s=30,
                 procs=[api.proc], explain=api.output)
        assert len(processing(api, agent)) == 1
        client.ping()
        wait_for("the server to give back what the socket held", lambda: not still_held(api, user, agent, sent),
                 timeout_s=60, procs=[api.proc],
                 explain=lambda: f"still held: {'; '.join(still_held(api, user, agent, sent))}\n{api.output()}")
        # The socket is closed: reading now gets what the server had written, then the end (with the
        # close frame when the server's last word found room, before it gave up on it).
        assert client.read_until_closed() in (None, CLOSE_IDLE)
        assert f"agent {agent['id']}'s client stopped reading (a frame waited 1s for room)" in api.output()
    finally:
        client.close()
