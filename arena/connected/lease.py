"""A connection's hold on its agent, in Redis: claimed with a fencing token, released atomically.

One connected agent has one live connection, across every API process; the **newest**
connection wins. A client whose socket dropped half-open (its side gave up, the server's
side has not noticed yet) reconnects at once, and its new connection takes the agent over
instead of waiting for the old one to time out. Every transition is one Lua script, so
no two processes interleave inside one:

* **claim** (:meth:`Lease.claim`): the agent's fence counter goes up by one, and that number
  is this connection's *fencing token*; the presence key names the connection and its
  token; the requests the previous connection took and has not answered go back to the
  front of the agent's queue; the previous connection is told (its control list) to close.
* **take** (:meth:`Lease.take`): ``BLMOVE`` a request from the agent's queue to this
  connection's processing list: a request is always in exactly one list, so a pump
  cancelled between Redis moving it and Python reading it loses nothing.
* **answer** (:meth:`Lease.answer`): the reply is pushed only if this connection still
  holds the newest token and the request is still in its processing list (then removed).
  A late answer of a connection that was taken over is ignored: its requests went back
  to the queue, and the newer connection answers them.
* **refresh** (:meth:`Lease.refresh`): the heartbeat renews the presence only while it is
  this connection's (compare, then expire).
* **release** (:meth:`Lease.release`): the processing list goes back to the front of the
  queue and the presence is deleted only if it still names this connection
  (compare-and-delete: a newer connection's presence is never removed). It compares the
  connection's id, not its token: a claim of this connection's own (the heartbeat's, after
  the presence expired) whose reply was lost to a cancellation raised the token without
  the connection learning it, and the presence must still go with the socket.

A request given back is sent again to whichever connection takes it next; one whose
engine stopped waiting is dropped by the pump that takes it.
"""

from __future__ import annotations

import time

import redis.asyncio as aredis

from arena.connected.broker import PRESENCE_TTL_S, REPLY_TTL_S, REQUESTS_TTL_S
from arena.snapshots.keys import RedisKeys

FENCE_TTL_S = 30 * 24 * 3600
"""How long an agent's fence counter outlives its last claim."""
CONTROL_TTL_S = 60

# KEYS: online, fence, requests, previous processing list, previous control list.
# ARGV: conn, previous conn ('' for none), since, text ('1'/'0'), presence px, fence ttl, requests ttl.
_CLAIM = """
local last = redis.call('HGET', KEYS[2], 'conn') or ''
if last ~= ARGV[2] then return {-1, last} end
local fence = redis.call('HINCRBY', KEYS[2], 'fence', 1)
redis.call('HSET', KEYS[2], 'conn', ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[6])
local presence = cjson.encode({conn = ARGV[1], since = tonumber(ARGV[3]), text = ARGV[4] == '1', fence = fence})
redis.call('SET', KEYS[1], presence, 'PX', ARGV[5])
local moved = 0
if ARGV[2] ~= '' and ARGV[2] ~= ARGV[1] then
  while redis.call('LMOVE', KEYS[4], KEYS[3], 'RIGHT', 'LEFT') do moved = moved + 1 end
  if moved > 0 then redis.call('EXPIRE', KEYS[3], ARGV[7]) end
  redis.call('RPUSH', KEYS[5], fence)
  redis.call('EXPIRE', KEYS[5], 60)
end
return {fence, moved}
"""

# KEYS: online, processing. ARGV: fence, presence px, requests ttl.
_REFRESH = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
if cjson.decode(raw).fence ~= tonumber(ARGV[1]) then return -1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
"""

# KEYS: online, processing, reply. ARGV: fence, request envelope, reply ('' : none), reply ttl (0: none).
_ANSWER = """
local raw = redis.call('GET', KEYS[1])
if raw and cjson.decode(raw).fence ~= tonumber(ARGV[1]) then return -1 end
if redis.call('LREM', KEYS[2], 1, ARGV[2]) == 0 then return 0 end
if ARGV[3] ~= '' then
  redis.call('RPUSH', KEYS[3], ARGV[3])
  if tonumber(ARGV[4]) > 0 then redis.call('EXPIRE', KEYS[3], ARGV[4]) end
end
return 1
"""

# KEYS: online, processing, requests, seen. ARGV: conn, now, requests ttl.
_RELEASE = """
local moved = 0
while redis.call('LMOVE', KEYS[2], KEYS[3], 'RIGHT', 'LEFT') do moved = moved + 1 end
if moved > 0 then redis.call('EXPIRE', KEYS[3], ARGV[3]) end
redis.call('SET', KEYS[4], ARGV[2])
local raw = redis.call('GET', KEYS[1])
if raw and cjson.decode(raw).conn == ARGV[1] then redis.call('DEL', KEYS[1]) end
return moved
"""

ANSWERED, NOT_HELD, TAKEN_OVER = 1, 0, -1
"""What :meth:`Lease.answer` did: pushed the reply; the request is not this connection's
(given back, or never taken); a newer connection holds the agent (nothing pushed)."""


class Lease:
    """Connection ``conn_id``'s hold on connected agent ``agent_id``.

    Args:
        client: An asyncio Redis client.
        keys: The service's key namespace.
        agent_id: The agent.
        conn_id: The connection's id (unique).
        text: The client asked for text renderings (the engine reads it from the presence).
    """

    def __init__(self, client: aredis.Redis, keys: RedisKeys, agent_id: int, conn_id: str, text: bool) -> None:
        self.client, self.keys = client, keys
        self.agent_id, self.conn_id, self.text = agent_id, conn_id, text
        self.fence = 0
        self.online = keys.connected_online(agent_id)
        self.requests = keys.connected_requests(agent_id)
        self.processing = keys.connected_processing(agent_id, conn_id)
        self.control = keys.connected_control(conn_id)
        self._claim = client.register_script(_CLAIM)
        self._refresh = client.register_script(_REFRESH)
        self._answer = client.register_script(_ANSWER)
        self._release = client.register_script(_RELEASE)

    async def claim(self) -> int:
        """Take the agent over (the newest connection wins); returns this connection's fencing token.

        The previous connection's unanswered requests go back to the front of the queue,
        and it is told to close.
        """
        fence_key = self.keys.connected_fence(self.agent_id)
        while True:  # another claim between the read and the script: read again
            raw = await self.client.hget(fence_key, "conn")
            previous = "" if raw is None else raw.decode()
            keys = [self.online, fence_key, self.requests,
                    self.keys.connected_processing(self.agent_id, previous or self.conn_id),
                    self.keys.connected_control(previous or self.conn_id)]
            args = [self.conn_id, previous, time.time(), "1" if self.text else "0", int(PRESENCE_TTL_S * 1000),
                    FENCE_TTL_S, REQUESTS_TTL_S]
            fence, _ = await self._claim(keys=keys, args=args)
            if int(fence) > 0:
                self.fence = int(fence)
                return self.fence

    async def refresh(self) -> int:
        """Renew the presence if it is still this connection's: 1 renewed, 0 gone (expired),
        -1 a newer connection holds it."""
        return int(await self._refresh(keys=[self.online, self.processing],
                                       args=[self.fence, int(PRESENCE_TTL_S * 1000), REQUESTS_TTL_S]))

    async def take(self, timeout_s: float) -> bytes | None:
        """The next request envelope for the agent, moved to this connection's processing list."""
        return await self.client.blmove(self.requests, self.processing, timeout_s, "LEFT", "RIGHT")

    async def answer(self, reply_key: str, request: bytes, reply: bytes | None, expires: float) -> int:
        """Push ``reply`` for the request ``request`` (its envelope), fenced (:data:`ANSWERED`,
        :data:`NOT_HELD` or :data:`TAKEN_OVER`). ``reply=None`` only drops the request."""
        left = expires - time.time()
        if reply is not None and left <= 0:
            reply = None  # the engine stopped waiting: nobody would read it
        # A reply the engine is blocked on is popped at once; one it may give up on first expires.
        ttl = 0 if left > 1.0 else int(REPLY_TTL_S)
        return int(await self._answer(keys=[self.online, self.processing, reply_key],
                                      args=[self.fence, request, reply or b"", ttl]))

    async def drop(self, requests: list[bytes]) -> None:
        """Forget requests whose engine stopped waiting (out of the processing list)."""
        if requests:
            pipe = self.client.pipeline(transaction=False)
            for raw in requests:
                pipe.lrem(self.processing, 1, raw)
            await pipe.execute()

    async def release(self) -> int:
        """Give the unanswered requests back and the presence up if it still names this connection;
        returns how many requests went back."""
        return int(await self._release(keys=[self.online, self.processing, self.requests,
                                             self.keys.connected_seen(self.agent_id)],
                                       args=[self.conn_id, str(time.time()), REQUESTS_TTL_S]))
