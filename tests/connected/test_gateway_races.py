"""The gateway's races, provoked for real (issue 29, item 3): the newest connection of an agent
takes it over with a fencing token (the old one is closed, its late answers are ignored), a pump
cancelled while Redis moves a request to it gives the request back, the presence is released by
compare-and-delete, and the connection limits hold across two API processes sharing one Redis."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import redis
import redis.asyncio as aredis
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from arena.api.routes.connected import receive_hello
from arena.connected.broker import ConnectedBroker
from arena.connected.gateway import Connection, redis_client
from arena.connected.lease import ANSWERED, TAKEN_OVER, Lease
from arena.connected.slots import ConnectionSlots
from arena.core.settings import Settings
from arena.snapshots.keys import RedisKeys
from arena.storage.wiring import open_services
from tests.api.helpers import RAISED_LIMITS
from tests.client.live import LiveServer
from tests.connected.conftest import Live
from tests.connected.test_hostile_clients import open_raw, ws_url
from tests.connected.test_live_protocol import wait_online
from tests.waiting import wait_for, wait_for_async

AGENT = 7


def _request(broker: ConnectedBroker, agent_id: int, rows: int = 1, ttl_s: float = 30.0) -> str:
    """Queue a decision batch as the engine does; returns its id."""
    request_id = uuid.uuid4().hex
    frame = msgpack.packb({"type": "request", "id": request_id, "rows": rows}, use_bin_type=True)
    broker.send(agent_id, request_id, frame, rows, time.time() + ttl_s)
    return request_id


def _named(redis_url: str, name: str) -> str:
    """``redis_url`` for a client that names its connections ``name`` (``CLIENT SETNAME``): the
    server's ``CLIENT LIST`` then tells this test's connections from any other test's."""
    return f"{redis_url}{'&' if '?' in redis_url else '?'}client_name={name}"


def _blocked_in(sync: redis.Redis, name: str, command: str) -> bool:
    """Whether a connection named ``name`` is blocked in ``command`` now."""
    return any(c["name"] == name and c["cmd"] == command for c in sync.client_list())


@pytest.fixture
def engine_side(redis_url: str) -> tuple[redis.Redis, RedisKeys, ConnectedBroker]:
    """A synchronous client, the key namespace and the engine's broker over it."""
    sync = redis.Redis.from_url(redis_url)
    keys = RedisKeys("gw")
    return sync, keys, ConnectedBroker(sync, keys)


def test_a_pump_cancelled_while_redis_moves_a_request_gives_it_back(redis_url, engine_side):
    """The pump blocks in BLMOVE; Redis hands it a request; the pump is cancelled before it reads
    the reply (the socket closed). With BLPOP the request was gone: here it waits in the
    connection's processing list, goes back to the front of the queue on release, and the next
    connection is sent it."""
    sync, keys, broker = engine_side

    async def scenario() -> None:
        name = f"pump-{uuid.uuid4().hex}"
        client = aredis.Redis.from_url(_named(redis_url, name))
        lease = Lease(client, keys, AGENT, uuid.uuid4().hex, text=False)
        await lease.claim()
        pump = asyncio.create_task(lease.take(30))
        await wait_for_async("the pump to block in BLMOVE", lambda: _blocked_in(sync, name, "blmove"))
        # From here until the cancel, nothing yields to the event loop: the pump cannot read
        # Redis's reply, exactly as a cancel that lands between the move and the read.
        request_id = _request(broker, AGENT)
        wait_for("Redis to move the request", lambda: sync.llen(lease.processing) == 1, timeout_s=10, every_s=0.01)
        assert sync.llen(keys.connected_requests(AGENT)) == 0
        pump.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pump
        assert await lease.release() == 1
        assert sync.llen(lease.processing) == 0
        again = Lease(client, keys, AGENT, uuid.uuid4().hex, text=False)  # the client reconnects
        await again.claim()
        envelope = await again.take(5)
        assert envelope is not None and msgpack.unpackb(envelope)["id"] == request_id
        await client.aclose()

    asyncio.run(scenario())


def test_a_newer_connection_takes_over_and_the_olds_late_answer_is_fenced(redis_url, engine_side):
    """Two connections of one agent: the newer claim gets a larger fencing token and the older
    one's unanswered request; the older one's late answer pushes nothing; releasing the older
    one leaves the newer one's presence (compare-and-delete)."""
    sync, keys, broker = engine_side

    async def scenario() -> None:
        client = aredis.Redis.from_url(redis_url)
        old = Lease(client, keys, AGENT, uuid.uuid4().hex, text=False)
        assert await old.claim() == 1
        request_id = _request(broker, AGENT)
        taken = await old.take(5)
        assert taken is not None
        new = Lease(client, keys, AGENT, uuid.uuid4().hex, text=True)
        assert await new.claim() == 2
        assert sync.llen(old.processing) == 0 and sync.lrange(old.control, 0, -1) == [b"2"]  # told to close
        presence = broker.presence(AGENT)
        assert presence is not None and (presence.conn, presence.fence, presence.text) == (new.conn_id, 2, True)
        assert await new.take(5) == taken  # the request went back to the queue, to the newer one

        reply_key = keys.connected_reply(request_id)
        late = msgpack.packb({"id": request_id, "actions": [1]})
        assert await old.answer(reply_key, taken, late, time.time() + 30) == TAKEN_OVER
        assert sync.llen(reply_key) == 0
        assert await old.refresh() == TAKEN_OVER
        assert await new.answer(reply_key, taken, msgpack.packb({"id": request_id, "actions": [2]}),
                                time.time() + 30) == ANSWERED
        assert broker.wait_reply(request_id, 1.0) == {"id": request_id, "actions": [2]}

        await old.release()
        assert broker.presence(AGENT).conn == new.conn_id  # not the older one's to delete
        await new.release()
        assert broker.presence(AGENT) is None
        await client.aclose()

    asyncio.run(scenario())


def test_over_the_socket_the_newest_connection_wins_and_the_old_ones_answer_is_ignored(live):
    token = live.user("ines")
    agent = live.connected_agent(token, "twice")
    broker = live.services.connected_policies().broker
    old = open_raw(live, token, agent["id"])
    new = None
    try:
        request_id = _request(broker, agent["id"])
        request = msgpack.unpackb(old.recv(timeout=5))
        assert (request["type"], request["id"]) == ("request", request_id)
        new = open_raw(live, token, agent["id"])  # the client's reconnection after a half-open drop
        assert msgpack.unpackb(new.recv(timeout=5))["id"] == request_id  # given back, sent again
        try:  # the old socket answers late, if it can still send at all
            old.send(msgpack.packb({"type": "answer", "id": request_id, "actions": [0]}))
        except ConnectionClosed:
            pass
        messages = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                messages.append(msgpack.unpackb(old.recv(timeout=5)))
        assert closed.value.rcvd.code == 4409
        assert any("connected again elsewhere" in m.get("detail", "") for m in messages)
        new.send(msgpack.packb({"type": "answer", "id": request_id, "actions": [3]}))
        assert broker.wait_reply(request_id, 5.0)["actions"] == [3]
        assert live.services.redis.llen(live.services.pool.keys.connected_reply(request_id)) == 0  # one reply
        assert broker.presence(agent["id"]).fence == 2
    finally:
        old.close()
        if new is not None:
            new.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here
def test_an_idle_connection_is_not_dropped_by_redis_pys_5s_socket_timeout(live, caplog):
    """redis-py 8 gives a client a 5 s socket timeout unless told otherwise: the events task's
    5 s BLPOP then failed with TimeoutError on every connection that had no result for 5 s, and
    the gateway dropped it (no close frame) with a warning. A pinging client stays connected."""
    token = live.user("idle")
    agent = live.connected_agent(token, "idle")
    broker = live.services.connected_policies().broker
    with caplog.at_level(logging.WARNING):
        ws = open_raw(live, token, agent["id"])
        try:
            fence = broker.presence(agent["id"]).fence
            for _ in range(7):
                time.sleep(1.0)
                ws.send(msgpack.packb({"type": "ping"}))
                assert msgpack.unpackb(ws.recv(timeout=5))["type"] == "pong"
            assert broker.presence(agent["id"]).fence == fence  # the same connection all along
        finally:
            ws.close()
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("arena.connected")]


def test_a_cancelled_redis_call_of_the_gateway_ends_at_once(redis_url):
    """With a socket timeout, redis-py sends each command through asyncio.wait_for, which on
    Python 3.11 swallows a cancellation that lands as the send finishes: the cancelled BLPOP
    then blocked for its whole timeout and returned its empty result. The gateway's client
    honours every cancellation: the call ends cancelled, never with BLPOP's own answer. The
    cancel is tried at each step of the call in turn."""

    async def scenario() -> None:
        client = redis_client(redis_url)
        await client.ping()
        for steps in range(40):
            call = asyncio.create_task(client.blpop([f"nothing:{uuid.uuid4().hex}"], timeout=3))
            for _ in range(steps):
                await asyncio.sleep(0)
            call.cancel()
            done, _ = await asyncio.wait({call}, timeout=30)  # a hang guard: a lost cancel ends in 3 s too
            assert done, f"a call cancelled {steps} steps in never ended"
            assert call.cancelled(), f"a cancel {steps} steps in was lost: the call ran on and answered {call.result()}"
        await client.aclose()

    asyncio.run(scenario())


class _FakeSocket:
    """Enough of starlette's WebSocket for a Connection: frames sent are kept; the client
    leaves when told."""

    def __init__(self) -> None:
        self.incoming: asyncio.Queue = asyncio.Queue()
        self.sent: list = []

    async def receive(self) -> dict:
        return await self.incoming.get()

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)

    async def send_text(self, data: str) -> None:
        self.sent.append(data)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})


class _RedisProxy:
    """A Redis client that passes every call on to ``client``, but those a subclass overrides to
    count or disturb them."""

    def __init__(self, client: aredis.Redis) -> None:
        self._client = client

    def __getattr__(self, name: str):
        return getattr(self._client, name)


class _LosesCancels(_RedisProxy):
    """A Redis client whose BLPOP loses one cancellation, as Python 3.11's wait_for does; it
    counts the BLPOPs called (``calls``) and the cancellations lost (``lost``)."""

    calls = lost = 0

    async def blpop(self, keys, timeout):
        self.calls += 1
        call = asyncio.ensure_future(self._client.blpop(keys, timeout=timeout))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            self.lost += 1
            return await call


def test_the_presence_goes_with_the_socket_even_when_a_cancellation_is_lost(redis_url, engine_side):
    """The client leaves while the events task's cancellation is lost in Redis (above): the
    connection used to wait for that task, which looped on for good, so its presence outlived
    the socket (the fuzz test's 'presence still there 5 s after the close'). Now every task
    stops at its next turn once the connection closes: the events task, its cancellation lost
    in a BLPOP, calls no other BLPOP after that one, and the release follows."""
    sync, keys, broker = engine_side

    async def scenario() -> None:
        name = f"events-{uuid.uuid4().hex}"
        client = _LosesCancels(redis_client(_named(redis_url, name)))
        socket = _FakeSocket()
        connection = Connection(socket, client, keys, AGENT, "msgpack")  # type: ignore[arg-type]
        run = asyncio.create_task(connection.run({"type": "welcome"}))
        await wait_for_async("the connection to come online and block in BLPOP",
                             lambda: broker.presence(AGENT) is not None and _blocked_in(sync, name, "blpop"))
        calls = client.calls
        await socket.close()
        done, _ = await asyncio.wait({run}, timeout=30)  # a hang guard: the events task looped on for good
        assert done, "the connection never ended"
        assert client.lost == 1, "the events task's cancellation was not lost: this test tried nothing"
        assert client.calls == calls, f"the events task ran {client.calls - calls} more BLPOPs after the close"
        assert broker.presence(AGENT) is None
        await client.aclose()

    asyncio.run(scenario())


class _CountsReads(_FakeSocket):
    """A :class:`_FakeSocket` that counts the reader's waits for a frame (``reads``)."""

    reads = 0

    async def receive(self) -> dict:
        self.reads += 1  # the same step then blocks in the queue until a frame comes
        return await super().receive()


def test_the_readers_idle_wait_honours_a_cancellation(redis_url):
    """The reader is cancelled in the very turn its frame arrives. Bounded by ``asyncio.wait_for``
    (Python 3.11), the frame won and the cancellation was swallowed: the reader answered the ping
    and waited for the next frame, as long as the idle limit. Bounded by ``asyncio.timeout``, it
    ends cancelled, the frame unread."""

    async def scenario() -> None:
        client = redis_client(redis_url)
        socket = _CountsReads()
        connection = Connection(socket, client, RedisKeys("gw"), AGENT, "msgpack")  # type: ignore[arg-type]
        reader = asyncio.create_task(connection._read())
        await wait_for_async("the reader to wait for a frame", lambda: socket.reads == 1)
        # Nothing yields to the event loop between the frame and the cancel.
        socket.incoming.put_nowait({"type": "websocket.receive", "bytes": msgpack.packb({"type": "ping"})})
        reader.cancel()
        await wait_for_async("the reader to end, or to wait for another frame",
                             lambda: reader.done() or socket.reads > 1)
        assert reader.cancelled(), (f"the cancellation was swallowed: the reader sent {len(socket.sent)} "
                                    f"frame(s) and waited for another ({socket.reads} waits)")
        assert socket.sent == [] and socket.incoming.qsize() == 1  # the ping was left unread
        reader.cancel()  # a reader that read on (the bug) stops here
        await asyncio.gather(reader, return_exceptions=True)
        await client.aclose()

    asyncio.run(scenario())


def test_the_hello_wait_honours_a_cancellation():
    """As the reader's idle wait: a socket's wait for its ``hello`` cancelled in the very turn the
    hello arrives ends cancelled (``asyncio.wait_for`` on Python 3.11 returned the hello, and the
    cancelled handler went on to serve the connection)."""

    async def scenario() -> None:
        socket = _CountsReads()
        waiting = asyncio.create_task(receive_hello(socket))  # type: ignore[arg-type]
        await wait_for_async("the wait for the hello", lambda: socket.reads == 1)
        socket.incoming.put_nowait({"type": "websocket.receive", "bytes": msgpack.packb({"type": "hello"})})
        waiting.cancel()  # nothing yields to the event loop between the hello and the cancel
        await asyncio.gather(waiting, return_exceptions=True)
        assert waiting.cancelled(), "the cancellation was swallowed: the hello was returned"
        assert socket.incoming.qsize() == 1  # the hello was left unread

    asyncio.run(scenario())


def test_a_claim_whose_reply_was_lost_still_releases_the_presence(redis_url, engine_side):
    """The heartbeat claims again when the presence expired; cancelled after Redis ran that claim
    but before its reply was read, the connection keeps its old token. Its release compares the
    connection's id, so the presence still goes with it; a newer connection's stays."""
    sync, keys, broker = engine_side

    async def scenario() -> None:
        client = aredis.Redis.from_url(redis_url)
        lease = Lease(client, keys, AGENT, uuid.uuid4().hex, text=False)
        first = await lease.claim()
        sync.delete(keys.connected_online(AGENT))  # expired (a long stall, Redis restarted)
        assert await lease.refresh() == 0
        assert await lease.claim() == first + 1
        lease.fence = first  # that claim's reply never reached it
        await lease.release()
        assert broker.presence(AGENT) is None

        newer = Lease(client, keys, AGENT, uuid.uuid4().hex, text=False)
        await lease.claim()
        await newer.claim()
        await lease.release()
        assert broker.presence(AGENT).conn == newer.conn_id
        await client.aclose()

    asyncio.run(scenario())


LIMITED = {**RAISED_LIMITS, "connected_per_user": 2, "connected_sockets_per_address": 3}


@pytest.fixture
def two_api_processes(tmp_path: Path, migrated_db_url: str, redis_url: str) -> Iterator[tuple[Live, Live]]:
    """Two API servers on one database and one Redis, at most 2 connections per user and 3
    sockets per address."""
    from arena.api.app import create_app

    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=migrated_db_url,
                        redis_url=redis_url, **LIMITED)
    with open_services(settings) as services:
        servers = [LiveServer(create_app(services)) for _ in range(2)]
        try:
            yield Live(servers[0].url, services), Live(servers[1].url, services)
        finally:
            for server in servers:
                server.stop()


def test_connection_limits_hold_across_two_api_processes(two_api_processes):
    a, b = two_api_processes
    token = a.user("june")
    agents = [a.connected_agent(token, f"agent-{i}")["id"] for i in range(3)]
    keys = a.services.pool.keys
    assert a.services.redis.keys(f"{keys.prefix}:conn:slots:user:*") == []
    first, second = open_raw(a, token, agents[0]), open_raw(b, token, agents[1])  # one on each server
    opened = [first, second]
    try:
        [user_slots] = a.services.redis.keys(f"{keys.prefix}:conn:slots:user:*")
        assert a.services.redis.zcard(user_slots) == 2
        with connect(ws_url(a, agents[2])) as third:  # a third live connection, on either server
            third.send(msgpack.packb({"type": "hello", "protocol": 1, "token": token}))
            assert "at most 2 live connections per user" in msgpack.unpackb(third.recv(timeout=5))["detail"]
            with pytest.raises(ConnectionClosed) as closed:
                third.recv(timeout=5)
            assert closed.value.rcvd.code == 4429
        # Sockets per address count before any hello: 2 live + 1 silent = 3, the limit.
        wait_for("the refused socket's slot to be given back",
                 lambda: a.services.redis.zcard(f"{keys.prefix}:conn:slots:address:127.0.0.1") == 2, timeout_s=10)
        silent = connect(ws_url(b, agents[2]))
        opened.append(silent)
        wait_for("the silent socket to count",
                 lambda: a.services.redis.zcard(f"{keys.prefix}:conn:slots:address:127.0.0.1") == 3, timeout_s=10)
        with connect(ws_url(a, agents[2])) as fourth:
            with pytest.raises(ConnectionClosed) as closed:
                fourth.recv(timeout=5)
            assert closed.value.rcvd.code == 4429 and "address" in closed.value.rcvd.reason
        silent.close()
        second.close()  # on server b: its slots are given back, and server a sees it
        wait_for("the closed connection to stop counting", lambda: a.services.redis.zcard(user_slots) == 1,
                 timeout_s=10)
        wait_for("the closed sockets to stop counting",
                 lambda: a.services.redis.zcard(f"{keys.prefix}:conn:slots:address:127.0.0.1") == 1, timeout_s=10)
        opened.append(open_raw(a, token, agents[2]))
        wait_online(a, agents[2])
    finally:
        for ws in opened:
            ws.close()


def test_the_sockets_of_a_process_that_died_stop_counting(redis_url):
    """A process that took slots and died never gives them back nor renews them: they stop
    counting after the slot's lifetime, and the limit is free again."""

    async def scenario() -> None:
        client = aredis.Redis.from_url(redis_url)
        dead = ConnectionSlots(client, RedisKeys("gw"), ttl_s=0.3)
        assert await dead.take("user", "user.1", 2) and await dead.take("user", "user.1", 2)
        alive = ConnectionSlots(client, RedisKeys("gw"))
        assert await alive.take("user", "user.1", 2) is None
        slot = await wait_for_async("a dead process's slots to stop counting",
                                    lambda: alive.take("user", "user.1", 2), every_s=0.05)
        assert await alive.count("user", "user.1") == 1
        await alive.renew([slot])
        await alive.give(slot)
        assert await alive.count("user", "user.1") == 0
        await client.aclose()

    asyncio.run(scenario())


def test_a_take_cancelled_after_redis_added_its_slot_gives_it_back(redis_url, engine_side):
    """A socket's take is cancelled (its client left, the server stops) after Redis ran the take's
    script but before the take read its reply: the slot used to count until its lifetime ran out,
    holding the limit for a socket that never existed. The take gives it back and stays cancelled."""
    sync, keys, _ = engine_side

    async def scenario() -> None:
        name = f"slots-{uuid.uuid4().hex}"
        client = aredis.Redis.from_url(_named(redis_url, name))
        slots = ConnectionSlots(client, keys)
        await slots.give(await slots.take("user", "warm", 1))  # the script is loaded, the connection open
        key = keys.connection_slots("user", "user.1")
        sync.client_pause(30_000, all=False)  # writes (scripts included) wait until the unpause
        try:
            taking = asyncio.create_task(slots.take("user", "user.1", 2))
            await wait_for_async("the take to wait in Redis", lambda: _blocked_in(sync, name, "evalsha"))
        finally:
            sync.client_unpause()
        # From here until the cancel, nothing yields to the event loop: the take cannot read
        # Redis's reply, exactly as a cancel that lands between the add and the read.
        wait_for("Redis to add the slot", lambda: sync.zcard(key) == 1, timeout_s=10, every_s=0.01)
        taking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await taking
        assert await slots.count("user", "user.1") == 0, "the cancelled take's slot still counts"
        await client.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here
def test_answers_do_not_count_as_a_flood(live, monkeypatch):
    """A fast agent answers as many requests a second as the engine sends; only frames that
    answer no open request count against the flood limit (pings: the hostile clients' test)."""
    monkeypatch.setattr("arena.connected.gateway.MAX_FRAMES_PER_S", 5)
    token = live.user("fast")
    agent = live.connected_agent(token, "fast")
    broker = live.services.connected_policies().broker
    ws = open_raw(live, token, agent["id"])
    try:
        fence = broker.presence(agent["id"]).fence
        ids = [_request(broker, agent["id"]) for _ in range(40)]
        for _ in ids:  # 40 answers, well within a second: eight times the limit
            request = msgpack.unpackb(ws.recv(timeout=5))
            ws.send(msgpack.packb({"type": "answer", "id": request["id"], "actions": [1]}))
        assert [broker.wait_reply(i, 5.0)["actions"] for i in ids] == [[1]] * 40
        assert broker.presence(agent["id"]).fence == fence  # the same connection, still open
        ws.send(msgpack.packb({"type": "ping"}))
        assert msgpack.unpackb(ws.recv(timeout=5))["type"] == "pong"
    finally:
        ws.close()
