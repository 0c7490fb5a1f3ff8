"""The gateway's events task forwards a batch's results in bursts: the rest of a burst in one
more Redis round trip (not one BLPOP per result), a msgpack client's results as the engine
packed them, in order, none lost or repeated; to a client that asked for ``batch_results``,
many in a ``results`` frame."""

from __future__ import annotations

import asyncio
import json
import uuid

import msgpack
import pytest
import redis

from arena.connected.broker import ConnectedBroker
from arena.connected.gateway import Connection, redis_client
from arena.connected.protocol import RESULTS_PER_FRAME, ProtocolError, decode_frame, encode, parse_hello, results_frame
from arena.snapshots.keys import RedisKeys
from tests.connected.test_gateway_races import _FakeSocket, _RedisProxy
from tests.waiting import wait_for_async

AGENT = 11


class _CountsCalls(_RedisProxy):
    """A Redis client that counts the events task's reads of the agent's results."""

    blpops = lpops = 0

    async def blpop(self, keys, timeout):
        self.blpops += 1
        return await self._client.blpop(keys, timeout=timeout)

    async def lpop(self, name, count=None):
        self.lpops += 1
        return await self._client.lpop(name, count)


def _results(n: int) -> list[dict]:
    return [{"type": "result", "match": f"m{i}", "seats": [i % 2], "winner": i % 3 - 1 if i % 3 else None,
             "scores": [1.0, -1.0], "termination": "normal", "forfeit_seat": None, "detail": ""} for i in range(n)]


@pytest.mark.parametrize("encoding", ["msgpack", "json"])
def test_a_batchs_results_reach_the_client_in_order_in_two_round_trips(redis_url, encoding):
    """300 results published at once (a batch's): the client gets all 300, in order, each frame
    what the protocol's ``encode`` writes for it; the events task read them with one BLPOP and one
    LPOP (one BLPOP per result before)."""
    keys = RedisKeys(f"res-{uuid.uuid4().hex[:8]}")
    broker = ConnectedBroker(redis.Redis.from_url(redis_url), keys)
    messages = _results(300)

    async def scenario() -> None:
        client = _CountsCalls(redis_client(redis_url))
        socket = _FakeSocket()
        connection = Connection(socket, client, keys, AGENT, encoding)  # type: ignore[arg-type]
        run = asyncio.create_task(connection.run({"type": "welcome"}))
        await wait_for_async("the connection to come online", lambda: broker.presence(AGENT) is not None)
        await wait_for_async("the welcome", lambda: len(socket.sent) == 1)
        blpops = client.blpops
        broker.publish_results(AGENT, messages)
        await wait_for_async("every result", lambda: len(socket.sent) == 1 + len(messages))
        assert socket.sent[1:] == [encode(m, encoding) for m in messages]
        if encoding == "json":
            assert [json.loads(f)["match"] for f in socket.sent[1:]] == [m["match"] for m in messages]
        else:
            assert [msgpack.unpackb(f)["match"] for f in socket.sent[1:]] == [m["match"] for m in messages]
        assert client.lpops == 1
        assert client.blpops - blpops <= 2  # the one that took the first result, and the idle one after
        await socket.close()
        await asyncio.wait({run}, timeout=30)  # a hang guard
        assert run.done()
        await client.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("encoding", ["msgpack", "json"])
def test_a_client_that_asked_for_batch_results_gets_them_in_results_frames(redis_url, encoding):
    """The same 300 results to a connection whose hello asked for ``batch_results``: two
    ``results`` frames (256, then 44: :data:`RESULTS_PER_FRAME` at most), the results in order,
    each frame what the protocol's ``encode`` writes for it (the msgpack one written around
    the engine's packed results)."""
    keys = RedisKeys(f"res-{uuid.uuid4().hex[:8]}")
    broker = ConnectedBroker(redis.Redis.from_url(redis_url), keys)
    messages = _results(300)

    async def scenario() -> None:
        client = redis_client(redis_url)
        socket = _FakeSocket()
        connection = Connection(socket, client, keys, AGENT, encoding, batch_results=True)  # type: ignore[arg-type]
        run = asyncio.create_task(connection.run({"type": "welcome"}))
        await wait_for_async("the connection to come online", lambda: broker.presence(AGENT) is not None)
        await wait_for_async("the welcome", lambda: len(socket.sent) == 1)
        broker.publish_results(AGENT, messages)
        await wait_for_async("every result", lambda: sum(
            len(decode_frame(f)["results"]) for f in socket.sent[1:]) == len(messages))
        chunks = [messages[:RESULTS_PER_FRAME], messages[RESULTS_PER_FRAME:]]
        assert socket.sent[1:] == [encode({"type": "results", "results": c}, encoding) for c in chunks]
        await socket.close()
        await asyncio.wait({run}, timeout=30)  # a hang guard
        assert run.done()
        await client.aclose()

    asyncio.run(scenario())


def test_batch_results_is_asked_for_in_the_hello_as_a_boolean():
    hello = {"type": "hello", "protocol": 1}
    assert parse_hello(hello).batch_results is False
    assert parse_hello({**hello, "batch_results": True}).batch_results is True
    with pytest.raises(ProtocolError, match="'batch_results' must be true or false"):
        parse_hello({**hello, "batch_results": "yes"})


@pytest.mark.parametrize("n", [0, 1, 15, 16, 300, 70_000])  # msgpack's fixarray, array 16 and array 32 headers
def test_results_frame_is_the_msgpack_of_the_results_message(n):
    results = _results(n)
    assert results_frame([msgpack.packb(r) for r in results]) == msgpack.packb({"type": "results", "results": results})
