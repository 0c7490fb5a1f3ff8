"""The API process's side of a connected agent: one WebSocket, bridged to Redis.

:class:`Connection` runs while a client is connected: it takes the agent over (the
newest connection of an agent wins, across every API process: :mod:`arena.connected.lease`
holds the Redis side, fencing tokens included), forwards the decision batches the engine
queued for the agent and the results of its finished matches, and pushes every answer
to the reply list of the request it answers. Four tasks share it:

* the **pump** moves requests from the agent's queue to this connection's processing
  list (``BLMOVE``) and writes them to the socket;
* the **events** task writes the results of finished matches, and closes the connection
  (4409) when a newer connection of the agent took over;
* the **reader** checks every client frame (:mod:`arena.connected.protocol`): size,
  type, that an answer names a request this connection was sent and has one action
  per row. A malformed answer to a known request is passed on as refused, so its
  matches forfeit with ``invalid_output`` at once instead of waiting for the deadline;
* the **heartbeat** keeps the presence and the connection's slots (limits per user and
  per address, :mod:`arena.connected.slots`) alive and notes when it was last seen.

When the socket closes (or the pump is cancelled in the middle of a move), the requests
in the processing list go back to the front of the agent's queue: a client that
reconnects within the grace gets them again; otherwise the engine forfeits them with
``disconnected``.

The release waits for the four tasks to end, so nothing renews or re-claims the presence
after it. Two things keep that wait short. The gateway's Redis client
(:func:`redis_client`) has no socket timeout: redis-py 8 defaults to 5 s, which ends
every blocking read at 5 s (an idle connection's ``BLPOP`` of the same length failed
with ``TimeoutError`` and dropped the connection) and wraps every command's send in
``asyncio.wait_for``, which on Python 3.11 can swallow a cancellation (the send finished
in the same turn): the cancelled task then sat in its ``BLPOP`` for its whole timeout,
and the presence outlived the socket by as long. The gateway's own waits are bounded with
``asyncio.timeout`` for the same reason, never ``wait_for``: the sends (:data:`SEND_TIMEOUT_S`)
and the reader's idle wait (``wait_for`` let a frame that arrived in the turn of the cancel win,
and the cancelled reader read on until the idle limit). And every task stops at its next turn
once the connection is closing, so a cancellation lost anyway costs at most one blocking
wait (:data:`BLOCK_S`).

No send to the client waits for long either (:data:`SEND_TIMEOUT_S`). A client that stops
reading (a frozen process, or its network gone half-open) lets its socket's buffers fill, and
then a frame to it (the reader's pong, the pump's next request, a result, an error, a close)
waits for room that never comes. Unbounded, the reader never returned (so its idle timeout
never fired) and the heartbeat kept the agent online while every request sent to it timed
out. Past :data:`SEND_TIMEOUT_S` the client is closed as unresponsive
(:data:`~arena.connected.protocol.CLOSE_IDLE`, when the close frame finds room) through the
same release, once all four tasks have ended.

A clean stop of the process releases every connection too (:class:`Releases`): uvicorn
cancels the handlers of the sockets still open when its graceful shutdown times out, then
ends the event loop, and ``asyncio.run`` cancels every task left, a shielded release among
them. The app's shutdown waits for the releases first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import msgpack
import redis.asyncio as aredis
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected

from arena.connected.broker import reply_envelope
from arena.connected.lease import TAKEN_OVER, Lease
from arena.connected.protocol import (
    CLOSE_IDLE,
    CLOSE_PROTOCOL,
    CLOSE_TAKEN_OVER,
    CLOSE_TOO_MANY,
    RESULTS_PER_FRAME,
    ProtocolError,
    decode_frame,
    encode,
    parse_answer,
    results_frame,
)
from arena.connected.slots import ConnectionSlots, Slot
from arena.snapshots.keys import RedisKeys

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
SEND_TIMEOUT_S = 5.0
"""How long one frame to a client (a request, a result, a pong, an error, a close) may wait for room
in its socket's buffers, by default (``ARENA_CONNECTED_SEND_TIMEOUT_S``). A client that stops reading
fills them; past this it is closed as unresponsive (:data:`~arena.connected.protocol.CLOSE_IDLE`) and
its connection released."""
BLOCK_S = 1.0
"""How long the pump and the events task block in Redis at a time."""
EVENTS_AT_ONCE = 1000
"""Most results the events task takes from Redis in one round trip (the list keeps 1,000)."""
MAX_OUTSTANDING = 64
"""Requests sent to one client and not yet answered; the pump waits beyond this."""
MAX_ERRORS = 20
"""Protocol errors a connection may make before it is closed."""
MAX_FRAMES_PER_S = 500
"""Frames other than answers to open requests (pings, errors, unknown ids) a client may
send in one second before it is closed (a flood). Answers are not counted: the server
paces them (a fast agent in a big batch answers far more than 500 a second)."""


RELEASE_WAIT_S = 5.0
"""How long a stopping app waits for its connections' releases (each takes one or two
round trips to Redis once its tasks stopped, at most :data:`BLOCK_S` after)."""


class Releases:
    """The connections of one app (API process) still open or giving back what they held, so
    that the app's shutdown waits for them (:meth:`wait`) before the event loop ends.

    A socket's handler runs inside :meth:`handler`, and every release (the presence and the
    processing list, the slots) through :meth:`settle`: it runs to its end even when its
    handler is cancelled meanwhile, as uvicorn cancels those still running when its graceful
    shutdown times out.
    """

    def __init__(self) -> None:
        self._running: set[asyncio.Future] = set()

    def _track(self, running: asyncio.Future) -> None:
        self._running.add(running)
        running.add_done_callback(self._running.discard)

    @contextmanager
    def handler(self) -> Iterator[None]:
        """Around a socket's handler: the app's shutdown waits until it has returned."""
        task = asyncio.current_task()
        if task is not None:
            self._track(task)
        yield

    async def settle(self, release: Awaitable[Any]) -> None:
        """Run ``release`` to its end, even if the caller is cancelled meanwhile."""
        running = asyncio.ensure_future(release)
        self._track(running)
        await asyncio.shield(running)

    async def wait(self, timeout_s: float = RELEASE_WAIT_S) -> None:
        """Until every handler has returned and every release has run (at most ``timeout_s``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while running := self._running - {asyncio.current_task()}:
            left = deadline - loop.time()
            if left <= 0:
                log.warning("stopping with %d connected-agent sockets not released", len(running))
                return
            await asyncio.wait(running, timeout=left)


def redis_client(url: str) -> aredis.Redis:
    """The asyncio Redis client of a process's gateway (one pool for all its connections).

    No socket timeout (redis-py 8 defaults to 5 s; see the module's docstring): every
    blocking command here bounds its own wait, well below any socket timeout.
    """
    return aredis.Redis.from_url(url, max_connections=10_000, health_check_interval=30,
                                 socket_timeout=None, socket_connect_timeout=10.0)


class Unresponsive(ConnectionError):
    """A frame to the client waited :data:`SEND_TIMEOUT_S` for room in its socket's buffers: the
    client stopped reading."""


GONE = (WebSocketDisconnect, WebSocketDisconnected, ConnectionError)
"""How a task ends when the socket is gone (the client left, stopped reading, or a task here closed
it): the first send after a close fails with WebSocketDisconnect, another task's next one with
WebSocketDisconnected. None is an error of the server's."""


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
        batch_results: It asked for results that finish together in one ``results`` frame.
        slots: Its sockets' slots (per user, per address), renewed by its heartbeat.
        limits: Where the slots are counted.
        idle_s: A client that sends nothing (not even a ``ping``) for this long is disconnected
            (``ARENA_CONNECTED_IDLE_S``).
        send_timeout_s: How long one frame to the client may wait for room in its socket's buffers
            before the client is closed as unresponsive (``ARENA_CONNECTED_SEND_TIMEOUT_S``).
        releases: The app's :class:`Releases`, which its shutdown waits for.
    """

    websocket: WebSocket
    client: aredis.Redis
    keys: RedisKeys
    agent_id: int
    encoding: str
    text: bool = False
    batch_results: bool = False
    slots: list[Slot] = field(default_factory=list)
    limits: ConnectionSlots | None = None
    idle_s: float = 60.0
    send_timeout_s: float = SEND_TIMEOUT_S
    releases: Releases = field(default_factory=Releases)
    conn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    sent: dict[str, _Sent] = field(default_factory=dict)
    errors: int = 0
    answered: int = 0
    ignored: int = 0
    """Answers not passed on: a newer connection had taken the agent over."""
    closing: bool = False
    """Set when the connection ends: every task stops at its next turn (even one whose
    cancellation was lost)."""
    unresponsive: bool = False
    """A send waited ``send_timeout_s`` in vain: the client stopped reading."""
    lease: Lease = field(init=False)

    def __post_init__(self) -> None:
        self.lease = Lease(self.client, self.keys, self.agent_id, self.conn_id, self.text)

    async def send(self, message: dict[str, Any]) -> None:
        await self._write(encode(message, self.encoding))

    async def _write(self, frame: bytes | str) -> None:
        """One frame to the client, or :class:`Unresponsive` after ``send_timeout_s``."""
        await self._bounded(self.websocket.send_bytes(frame) if isinstance(frame, bytes)
                            else self.websocket.send_text(frame))

    async def _shut(self, code: int, reason: str = "") -> None:
        """Close the socket with ``code`` (the close frame waits for room like any frame)."""
        await self._bounded(self.websocket.close(code, reason))

    async def _bounded(self, sending: Awaitable[None]) -> None:
        """Every wait for the socket's buffers ends: a client that stopped reading keeps them full.
        ``asyncio.timeout``, not ``wait_for``: on Python 3.11 the latter can swallow a cancellation."""
        try:
            async with asyncio.timeout(self.send_timeout_s):
                await sending
        except TimeoutError:
            self.closing = self.unresponsive = True
            raise Unresponsive(f"a frame to agent {self.agent_id}'s client waited {self.send_timeout_s:g}s for room "
                               "in its socket's buffers: it stopped reading") from None

    async def run(self, welcome: dict[str, Any]) -> None:
        """Serve the client until it leaves, breaks the protocol or is taken over; always cleans up."""
        tasks: list[asyncio.Task] = []
        try:
            await self.lease.claim()
            await self.send(welcome)
            tasks = [asyncio.create_task(t) for t in (self._pump(), self._events(), self._read(), self._heartbeat())]
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task.exception() and not isinstance(task.exception(), GONE):
                    log.warning("connection of agent %d ended: %r", self.agent_id, task.exception())
        except Unresponsive:
            pass  # the welcome found no room: closed below, like any other send
        finally:
            # Also when run() itself is cancelled (the server stops): asyncio.wait leaves its
            # tasks running, and a heartbeat left behind would keep renewing the presence.
            self.closing = True
            for task in tasks:
                task.cancel()
            await self.releases.settle(self._close(tasks))
        if self.unresponsive:
            log.info("agent %d's client stopped reading (a frame waited %gs for room): closed (%d)", self.agent_id,
                     self.send_timeout_s, CLOSE_IDLE, extra={"agent_id": self.agent_id})
            # Its last word, after the release: it reaches the client only if the client reads again
            # within send_timeout_s; otherwise the socket just closes once this handler returns.
            with contextlib.suppress(*GONE, RuntimeError):
                await self._shut(CLOSE_IDLE, "not reading: the server's frames found no room")

    async def _close(self, tasks: list[asyncio.Task]) -> None:
        """Wait until no task can touch the lease any more, then release it."""
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._release()

    async def _release(self) -> None:
        """Give the presence back (if still ours) and the unanswered requests back to the queue."""
        try:
            await self.lease.release()
        except Exception:
            log.warning("could not release agent %d's connection cleanly", self.agent_id, exc_info=True)

    async def _taken_over(self) -> None:
        await self.send({"type": "error", "detail": f"agent {self.agent_id} connected again elsewhere: the newest "
                                                    "connection plays it and this one is closed"})
        await self._shut(CLOSE_TAKEN_OVER, "a newer connection took over this agent")

    async def _heartbeat(self) -> None:
        while not self.closing:
            await asyncio.sleep(HEARTBEAT_S)
            if self.closing:
                return
            held = await self.lease.refresh()
            if held == TAKEN_OVER:  # its control message was lost: the presence says it too
                await self._taken_over()
                return
            if held == 0:  # lost (Redis restarted, or a long stall): take it back
                await self.lease.claim()
            await self.client.set(self.keys.connected_seen(self.agent_id), str(time.time()))
            if self.limits is not None:
                await self.limits.renew(self.slots)

    async def _pump(self) -> None:
        while not self.closing:
            while len(self.sent) >= MAX_OUTSTANDING and not self.closing:
                await self._forget_expired()
                await asyncio.sleep(0.01)
            raw = await self.lease.take(BLOCK_S)
            if self.closing:
                return  # a request just taken stays in the processing list: the release gives it back
            if raw is None:
                await self._forget_expired()
                continue
            envelope = msgpack.unpackb(raw, raw=False)
            if envelope["expires"] <= time.time():
                await self.lease.drop([raw])  # its engine stopped waiting
                continue
            self.sent[envelope["id"]] = _Sent(raw, int(envelope["rows"]), float(envelope["expires"]))
            await self._forward(envelope["frame"])

    async def _events(self) -> None:
        """Results of finished matches, and the word that a newer connection took over.

        A batch's results come together (one per match: 256 at once from a ladder batch), so
        the rest of a burst is taken in one more round trip, and a msgpack client gets each
        result as the engine packed it (no decoding and encoding again), in one frame for
        many where it asked for ``batch_results``."""
        control, events = self.lease.control, self.keys.connected_events(self.agent_id)
        while not self.closing:
            got = await self.client.blpop([control, events], timeout=BLOCK_S)
            if got is None or self.closing:
                continue
            key, raw = got
            if key.decode() == control:
                await self._taken_over()
                return
            await self._deliver([raw, *(await self.client.lpop(events, EVENTS_AT_ONCE) or [])])

    async def _deliver(self, burst: list[bytes]) -> None:
        """A burst of results (each msgpack, as the engine packed it): a frame each, or, to a
        client that asked for ``batch_results``, ``results`` frames of up to
        :data:`RESULTS_PER_FRAME`."""
        if not self.batch_results:
            for raw in burst:
                await self._forward(raw)
            return
        for i in range(0, len(burst), RESULTS_PER_FRAME):
            await self._forward(results_frame(burst[i:i + RESULTS_PER_FRAME]))

    async def _forward(self, packed: bytes) -> None:
        """A message the engine packed as msgpack: as it is to a msgpack client, decoded and
        written as JSON to a JSON one."""
        if self.encoding == "msgpack":
            await self._write(packed)
        else:
            await self.send(msgpack.unpackb(packed, raw=False))

    async def _forget_expired(self) -> None:
        now = time.time()
        gone = [rid for rid, s in self.sent.items() if s.expires <= now]
        await self.lease.drop([self.sent.pop(rid).envelope for rid in gone])

    async def _read(self) -> None:
        window, frames = int(time.monotonic()), 0
        while not self.closing:
            try:  # asyncio.timeout, not wait_for (the module's docstring): a cancellation is never lost here
                async with asyncio.timeout(self.idle_s):
                    message = await self.websocket.receive()
            except TimeoutError:
                await self.send({"type": "error", "detail": f"nothing received for {self.idle_s:g}s; "
                                                            "send a 'ping' at least every 20s"})
                await self._shut(CLOSE_IDLE)
                return
            if message["type"] == "websocket.disconnect":
                return
            raw = message.get("bytes") if message.get("bytes") is not None else message.get("text")
            try:
                answered = await self._handle(decode_frame(raw if raw is not None else b""))
            except ProtocolError as exc:
                answered = False
                self.errors += 1
                await self.send({"type": "error", "detail": str(exc)})
                if self.errors >= MAX_ERRORS:
                    await self._shut(CLOSE_PROTOCOL, "too many protocol errors")
                    return
            if answered:  # the server's own pace (at most MAX_OUTSTANDING open), never a flood
                continue
            now = int(time.monotonic())
            window, frames = (now, 1) if now != window else (window, frames + 1)
            if frames > MAX_FRAMES_PER_S:
                await self._shut(CLOSE_TOO_MANY, "too many frames")
                return

    async def _handle(self, message: dict[str, Any]) -> bool:
        """Act on one frame of the client's; ``True`` when it answered an open request."""
        kind = message["type"]
        if kind == "ping":
            await self.send({"type": "pong", "time": time.time()})
            return False
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
            await self._push(reply_key, sent, reply_envelope(request_id, error=str(exc)))
            raise
        if await self._push(reply_key, sent, envelope):
            self.answered += 1
        return True

    async def _push(self, key: str, sent: _Sent, envelope: bytes) -> bool:
        """Hand the reply to the engine that waits for it, unless a newer connection took the
        agent over (then the request is its to answer; this late answer is ignored)."""
        done = await self.lease.answer(key, sent.envelope, envelope, sent.expires)
        if done == TAKEN_OVER:
            self.ignored += 1
            await self._taken_over()
        return done > 0
