"""Connection limits counted in Redis, so every API process counts the same sockets.

A user may hold ``ARENA_CONNECTED_PER_USER`` live connections and an address
``ARENA_CONNECTED_SOCKETS_PER_ADDRESS`` sockets, whichever API process each one reached.
Each socket is a member of a sorted set per user or per address, scored with the time it
stops counting: its API process renews it with the connection's heartbeat, so the sockets
of a process that died stop counting within :data:`SLOT_TTL_S` and never hold a limit for
good. Taking a slot (drop the expired members, count, add) is one Lua script, so two
processes cannot both take the last one; times are Redis's own clock, so the processes'
clocks do not matter. A take that ends in an error or a cancellation gives its slot back:
Redis may have added it before the take could read the reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass

import redis.asyncio as aredis

from arena.snapshots.keys import RedisKeys

SLOT_TTL_S = 30.0
"""A socket whose process stops renewing it (the process died) stops counting after this."""

# KEYS: the set. ARGV: member, limit, ttl ms.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

# KEYS: the sets. ARGV: ttl ms, then one member per set.
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', now + tonumber(ARGV[1]), ARGV[i + 1])
  redis.call('PEXPIRE', key, ARGV[1])
end
return 1
"""


@dataclass(frozen=True)
class Slot:
    """One socket counted against one limit."""

    key: str
    member: str


class ConnectionSlots:
    """Takes, renews and gives back sockets' slots (one per API process; coroutine-safe).

    Args:
        client: An asyncio Redis client.
        keys: The service's key namespace.
        ttl_s: How long a slot counts unless renewed.
    """

    def __init__(self, client: aredis.Redis, keys: RedisKeys, ttl_s: float = SLOT_TTL_S) -> None:
        self.client, self.keys, self.ttl_ms = client, keys, int(ttl_s * 1000)
        self._take = client.register_script(_TAKE)
        self._renew = client.register_script(_RENEW)

    async def take(self, kind: str, subject: str, limit: int) -> Slot | None:
        """A slot of ``subject``'s (``kind``: ``user`` or ``address``), or ``None`` at the limit."""
        slot = Slot(self.keys.connection_slots(kind, subject), uuid.uuid4().hex)
        try:
            taken = await self._take(keys=[slot.key], args=[slot.member, int(limit), self.ttl_ms])
        except BaseException:
            # Redis may have added it already (a cancellation, or a lost connection, as its reply came
            # back): nobody else knows the member, so it would count until its TTL. Giving back a slot
            # never added removes nothing; a second cancellation leaves the give running.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.give(slot))
            raise
        return slot if int(taken) else None

    async def count(self, kind: str, subject: str) -> int:
        """Sockets counting against ``subject`` now (across every API process)."""
        key = self.keys.connection_slots(kind, subject)
        now_s, now_us = await self.client.time()
        return int(await self.client.zcount(key, f"({now_s * 1000 + now_us // 1000}", "+inf"))

    async def renew(self, slots: list[Slot]) -> None:
        """Keep ``slots`` counting for another ``ttl_s`` (the connection's heartbeat)."""
        if slots:
            await self._renew(keys=[s.key for s in slots], args=[self.ttl_ms, *[s.member for s in slots]])

    async def give(self, slot: Slot) -> None:
        """The socket closed: it no longer counts."""
        await self.client.zrem(slot.key, slot.member)
