"""Redis between the engine and the API process that holds a connected agent's socket.

The engine's side (any process: the service's thread, a Ray worker) pushes a decision
batch onto the agent's request list and blocks on the batch's own reply list; the API
process holding the agent's WebSocket pops the request, forwards it, and pushes the
answer back (:mod:`arena.connected.gateway`). Redis is the broker the project already
runs, so this works across several API processes and several workers: whichever API
process holds the socket serves the agent (one connection per agent, claimed with
``SET NX``), and every reply goes to the request that asked.

Presence is a key with a short expiry that the holding API process refreshes: when it
dies, the agent goes offline by itself within :data:`PRESENCE_TTL_S`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import msgpack
import redis

from arena.snapshots.keys import RedisKeys

PRESENCE_TTL_S = 10.0
"""An agent's presence expires this long after its API process last refreshed it."""
REPLY_TTL_S = 30.0
"""A reply nobody collected is dropped after this long."""
REQUESTS_TTL_S = 3600
"""A request list nobody served is dropped this long after its last renewal."""


@dataclass(frozen=True)
class Presence:
    """A live connection, as its API process announced it.

    Attributes:
        conn: The connection's id.
        since: Unix seconds it connected.
        text: The client asked for text renderings.
        fence: Its fencing token (each connection of the agent gets a larger one).
    """

    conn: str
    since: float
    text: bool
    fence: int = 0

    @classmethod
    def from_json(cls, raw: bytes | str) -> Presence:
        data = json.loads(raw)
        return cls(str(data["conn"]), float(data["since"]), bool(data.get("text", False)), int(data.get("fence", 0)))


class ConnectedBroker:
    """The engine's side of the broker (synchronous; one per process is plenty).

    Args:
        client: Redis client.
        keys: Key namespace (the service's; tests use their own prefix).
    """

    def __init__(self, client: redis.Redis, keys: RedisKeys | None = None) -> None:
        self.client = client
        self.keys = keys or RedisKeys()
        self._expiry_set: dict[int, float] = {}

    def presence(self, agent_id: int) -> Presence | None:
        """The agent's live connection, or ``None`` when it is offline."""
        raw = self.client.get(self.keys.connected_online(agent_id))
        return None if raw is None else Presence.from_json(raw)

    def presence_seen(self, agent_id: int) -> tuple[Presence | None, float | None]:
        """The agent's live connection (``None``: offline) and the unix seconds its last
        connection was released (``None``: never), in one round trip."""
        raw, seen = self.client.mget([self.keys.connected_online(agent_id), self.keys.connected_seen(agent_id)])
        return (None if raw is None else Presence.from_json(raw)), (None if seen is None else float(seen))

    def presences(self, agent_ids: list[int]) -> dict[int, Presence | None]:
        """Presence of many agents in one round trip."""
        if not agent_ids:
            return {}
        raws = self.client.mget([self.keys.connected_online(a) for a in agent_ids])
        return {a: None if r is None else Presence.from_json(r) for a, r in zip(agent_ids, raws)}

    def last_seen(self, agent_ids: list[int]) -> dict[int, float | None]:
        """Unix seconds each agent was last connected (``None``: never)."""
        if not agent_ids:
            return {}
        raws = self.client.mget([self.keys.connected_seen(a) for a in agent_ids])
        return {a: None if r is None else float(r) for a, r in zip(agent_ids, raws)}

    def send(self, agent_id: int, request_id: str, frame: bytes, rows: int, expires_at: float) -> None:
        """Queue a decision batch (``frame``: the client's msgpack ``request`` message)."""
        envelope = msgpack.packb({"id": request_id, "rows": rows, "expires": expires_at, "frame": frame},
                                 use_bin_type=True)
        key = self.keys.connected_requests(agent_id)
        self.client.rpush(key, envelope)
        # The list must not outlive an agent that never comes back: an expiry, renewed now
        # and then rather than on every request (one round trip less on the hot path).
        now = time.monotonic()
        if self._expiry_set.get(agent_id, 0.0) < now - 10.0:
            self.client.expire(key, REQUESTS_TTL_S)
            self._expiry_set[agent_id] = now

    def wait_reply(self, request_id: str, timeout_s: float) -> dict[str, Any] | None:
        """The answer to ``request_id`` if it arrives within ``timeout_s``, else ``None``."""
        if timeout_s <= 0:
            raw = self.client.lpop(self.keys.connected_reply(request_id))
        else:
            got = self.client.blpop([self.keys.connected_reply(request_id)], timeout=max(timeout_s, 0.001))
            raw = None if got is None else got[1]
        return None if raw is None else msgpack.unpackb(raw, raw=False)

    def cancel(self, request_id: str) -> None:
        """Forget a reply that is no longer awaited (it may still arrive; it expires)."""
        self.client.delete(self.keys.connected_reply(request_id))

    def publish_results(self, agent_id: int, messages: list[dict[str, Any]]) -> None:
        """Finished-match ``result`` messages for the agent's connection (dropped if nobody
        reads them within a minute)."""
        if not messages:
            return
        key = self.keys.connected_events(agent_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(key, *[msgpack.packb(m, use_bin_type=True) for m in messages])
        pipe.ltrim(key, -1000, -1)
        pipe.expire(key, 60)
        pipe.execute()


def reply_envelope(request_id: str, *, actions: list[int | None] | None = None, error: str | None = None) -> bytes:
    """What the API process pushes to a request's reply list."""
    body: dict[str, Any] = {"id": request_id}
    if error is not None:
        body["error"] = error
    else:
        body["actions"] = actions
    return msgpack.packb(body, use_bin_type=True)
