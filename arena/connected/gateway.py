"""The API process's side of a connected agent: one WebSocket, bridged to Redis.

:class:`Connection` runs while a client is connected: it claims the agent's presence
(one live connection per agent, across every API process), forwards the decision
batches the engine queued for the agent and the results of its finished matches, and
pushes every answer to the reply list of the request it answers. Three tasks share it:

* the **pump** pops requests and results from Redis and writes them to the socket;
* the **reader** checks every client frame (:mod:`arena.connected.protocol`): size,
  type, that an answer names a request this connection was sent and has one action
  per row. A malformed answer to a known request is passed on as refused, so its
  matches forfeit with ``invalid_output`` at once instead of waiting for the deadline;
* the **heartbeat** keeps the presence key alive and notes when it was last seen.

When the socket closes, requests sent but not answered go back to the front of the
agent's queue: a client that reconnects within the grace gets them again; otherwise
the engine forfeits them with ``disconnected``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import msgpack
import redis.asyncio as aredis
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected

from arena.connected.broker import PRESENCE_TTL_S, REPLY_TTL_S, Presence, reply_envelope
from arena.connected.protocol import (
    CLOSE_ALREADY_CONNECTED,
    CLOSE_IDLE,
    CLOSE_PROTOCOL,
    CLOSE_TOO_MANY,
    ProtocolError,
    decode_frame,
    encode,
    parse_answer,
)
from arena.snapshots.keys import RedisKeys

log = logging.getLogger(__name__)

IDLE_S = 60.0
"""A client that sends nothing (not even a ``ping``) for this long is disconnected."""
HEARTBEAT_S = 2.0
MAX_OUTSTANDING = 64
"""Requests sent to one client and not yet answered; the pump waits beyond this."""
MAX_ERRORS = 20
"""Protocol errors a connection may make before it is closed."""
MAX_FRAMES_PER_S = 500
"""Frames a client may send in one second before it is closed (a flood)."""


@dataclass
class _Sent:
    envelope: bytes
    rows: int
    expires: float


@dataclass
class Connection:
    """One connected client of agent ``agent_id``.

    Args:
        websocket: The accepted socket (the ``hello`` already read).
        client: An asyncio Redis client.
        keys: The service's key namespace.
        agent_id: The agent it plays for.
        encoding: How to write to it (``msgpack`` or ``json``).
        text: It asked for text renderings (read by the engine from the presence).
    """

    websocket: WebSocket
    client: aredis.Redis
    keys: RedisKeys
    agent_id: int
    encoding: str
    text: bool = False
    conn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    sent: dict[str, _Sent] = field(default_factory=dict)
    errors: int = 0
    answered: int = 0

    async def claim(self) -> bool:
        """Take the agent's presence; ``False`` if another connection holds it."""
        presence = Presence(self.conn_id, time.time(), self.text)
        return bool(await self.client.set(self.keys.connected_online(self.agent_id), presence.to_json(),
                                          nx=True, px=int(PRESENCE_TTL_S * 1000)))

    async def send(self, message: dict[str, Any]) -> None:
        frame = encode(message, self.encoding)
        if isinstance(frame, bytes):
            await self.websocket.send_bytes(frame)
        else:
            await self.websocket.send_text(frame)

    async def run(self, welcome: dict[str, Any]) -> None:
        """Serve the client until it leaves (or breaks the protocol); always cleans up."""
        if not await self.claim():
            await self.send({"type": "error", "detail": "this agent is already connected elsewhere; "
                                                        "one live connection per agent"})
            await self.websocket.close(CLOSE_ALREADY_CONNECTED)
            return
        try:
            await self.send(welcome)
            tasks = [asyncio.create_task(t) for t in (self._pump(), self._read(), self._heartbeat())]
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task in done:
                # The socket is gone (the client left, or a task here closed it): the first send
                # after that fails with WebSocketDisconnect, another task's next one with
                # WebSocketDisconnected. Neither is an error of the server's.
                gone = WebSocketDisconnect | WebSocketDisconnected | ConnectionError
                if task.exception() and not isinstance(task.exception(), gone):
                    log.warning("connection of agent %d ended: %r", self.agent_id, task.exception())
        finally:
            await asyncio.shield(self._release())

    async def _release(self) -> None:
        """Give the presence back, and unanswered live requests back to the queue."""
        now = time.time()
        live = [s.envelope for s in self.sent.values() if s.expires > now]
        try:
            pipe = self.client.pipeline(transaction=False)
            if live:
                pipe.lpush(self.keys.connected_requests(self.agent_id), *reversed(live))
            pipe.set(self.keys.connected_seen(self.agent_id), str(now))
            await pipe.execute()
            key = self.keys.connected_online(self.agent_id)
            raw = await self.client.get(key)
            if raw is not None and Presence.from_json(raw).conn == self.conn_id:
                await self.client.delete(key)
        except Exception:
            log.warning("could not release agent %d's connection cleanly", self.agent_id, exc_info=True)

    async def _heartbeat(self) -> None:
        key = self.keys.connected_online(self.agent_id)
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            raw = await self.client.get(key)
            if raw is None or Presence.from_json(raw).conn != self.conn_id:
                # Lost (Redis restarted, or a long stall): take it back if nobody else has.
                if not await self.claim():
                    await self.send({"type": "error", "detail": "another connection took over this agent"})
                    await self.websocket.close(CLOSE_ALREADY_CONNECTED)
                    return
            else:
                await self.client.pexpire(key, int(PRESENCE_TTL_S * 1000))
            await self.client.set(self.keys.connected_seen(self.agent_id), str(time.time()))

    async def _pump(self) -> None:
        requests = self.keys.connected_requests(self.agent_id)
        events = self.keys.connected_events(self.agent_id)
        while True:
            while len(self.sent) >= MAX_OUTSTANDING:
                self._forget_expired()
                await asyncio.sleep(0.01)
            got = await self.client.blpop([requests, events], timeout=1)
            if got is None:
                self._forget_expired()
                continue
            key, raw = got
            if key.decode() == events:
                await self.send(msgpack.unpackb(raw, raw=False))
                continue
            envelope = msgpack.unpackb(raw, raw=False)
            if envelope["expires"] <= time.time():
                continue  # its engine stopped waiting
            self.sent[envelope["id"]] = _Sent(raw, int(envelope["rows"]), float(envelope["expires"]))
            if self.encoding == "msgpack":
                await self.websocket.send_bytes(envelope["frame"])
            else:
                await self.send(msgpack.unpackb(envelope["frame"], raw=False))

    def _forget_expired(self) -> None:
        now = time.time()
        for rid in [rid for rid, s in self.sent.items() if s.expires <= now]:
            del self.sent[rid]

    async def _read(self) -> None:
        window, frames = int(time.monotonic()), 0
        while True:
            try:
                message = await asyncio.wait_for(self.websocket.receive(), IDLE_S)
            except TimeoutError:
                await self.send({"type": "error", "detail": f"nothing received for {IDLE_S:.0f}s; "
                                                            "send a 'ping' at least every 20s"})
                await self.websocket.close(CLOSE_IDLE)
                return
            if message["type"] == "websocket.disconnect":
                return
            now = int(time.monotonic())
            window, frames = (now, 1) if now != window else (window, frames + 1)
            if frames > MAX_FRAMES_PER_S:
                await self.websocket.close(CLOSE_TOO_MANY, "too many frames")
                return
            raw = message.get("bytes") if message.get("bytes") is not None else message.get("text")
            try:
                await self._handle(decode_frame(raw if raw is not None else b""))
            except ProtocolError as exc:
                self.errors += 1
                await self.send({"type": "error", "detail": str(exc)})
                if self.errors >= MAX_ERRORS:
                    await self.websocket.close(CLOSE_PROTOCOL, "too many protocol errors")
                    return

    async def _handle(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "ping":
            await self.send({"type": "pong", "time": time.time()})
            return
        if kind != "answer":
            raise ProtocolError(f"unexpected message type {kind!r}; a client sends 'answer' or 'ping'")
        request_id = message.get("id")
        sent = self.sent.pop(request_id, None) if isinstance(request_id, str) else None
        if sent is None:
            raise ProtocolError(f"no open request {request_id!r} (answered already, expired, or never sent)")
        reply_key = self.keys.connected_reply(request_id)
        try:
            answer = parse_answer(message, sent.rows)
            envelope = reply_envelope(request_id, actions=answer.actions)
        except ProtocolError as exc:
            await self._push(reply_key, reply_envelope(request_id, error=str(exc)), sent.expires)
            raise
        await self._push(reply_key, envelope, sent.expires)
        self.answered += 1

    async def _push(self, key: str, envelope: bytes, expires: float) -> None:
        """Hand the reply to the engine that waits for it (a late one is dropped)."""
        left = expires - time.time()
        if left <= 0:
            return  # the engine stopped waiting: nobody would read it
        if left > 1.0:  # the engine is blocked on this list and pops it at once
            await self.client.rpush(key, envelope)
            return
        pipe = self.client.pipeline(transaction=False)  # it may give up first: let it expire
        pipe.rpush(key, envelope)
        pipe.expire(key, int(REPLY_TTL_S))
        await pipe.execute()
