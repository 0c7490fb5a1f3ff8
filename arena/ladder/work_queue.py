"""One durable queue for work handed from the API to the background service.

Challenges (:mod:`arena.ladder.challenge_queue`) and people's games
(:mod:`arena.ladder.people`) are both queued here, and nothing is lost when a
service dies:

* **Records.** Each item is a Redis hash (its ``request`` as JSON, ``status``,
  ``heartbeat``, ``owner``, ``attempts``, ``error``, ``finished``, ``queued``, plus the
  kind's own fields), its id on a list (the queue) and in a set (the open items).
  :meth:`WorkQueue.put` writes all three in the caller's transaction.
* **Claim.** A worker pops an id and takes it with one Lua script: ``queued ->
  playing`` under a random owner token, a heartbeat, one more attempt. Someone else's
  claim, or a finished item, is skipped. A worker that died between the pop and the
  claim left a ``queued`` item on no list: the sweep queues it again.
* **Heartbeat.** The worker refreshes the heartbeat of what it plays every
  ``heartbeat_s``; a worker that stops marks its own stale at once (heartbeat 0).
* **Re-queue.** Every ``sweep_s`` (and when a worker starts) the open set is swept:
  an item ``playing`` without a heartbeat for ``stale_s`` (its owner died) is queued
  again, to be claimed by the next worker. A failure a retry may fix (the database or
  Redis away) queues the item again at once, by its owner only.
* **Exactly once.** Only the owner finishes an item (``done`` or ``failed``, one
  script, which also gives back the user's holds and ends a play token: the worker's
  :meth:`QueueWorker.releases`, so a service killed right after it cannot leave them
  held); the worker's :meth:`QueueWorker.ended` (what is not in Redis: retiring a guest)
  runs only when that script said yes, so once per item. An item claimed
  :data:`MAX_ATTEMPTS` times without finishing fails with the reason, so one that takes
  its service down cannot do so forever. The work itself must be idempotent by id
  (matches are recorded by match id and skipped when played again).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

import redis

from arena.core.loop import ServiceLoop
from arena.snapshots.keys import WorkQueueKeys
from envs.errors import ArenaError, ServiceUnavailable

log = logging.getLogger(__name__)

QUEUED, PLAYING, DONE, FAILED = "queued", "playing", "done", "failed"
HEARTBEAT_S = 5.0
"""How often a worker says it is still playing what it claimed."""
STALE_S = 30.0
"""An item ``playing`` without a heartbeat for this long is queued again."""
SWEEP_S = 10.0
"""How often a worker looks for stale items (and once when it starts)."""
MAX_ATTEMPTS = 3
"""An item claimed this often without finishing fails."""
KEEP_FINISHED_S = 7 * 86_400
"""A done or failed item's record is kept this long."""


def queue_timings(stale_s: float = STALE_S) -> dict[str, float]:
    """A worker's ``stale_s``, ``heartbeat_s`` and ``sweep_s`` for a given staleness (the
    ``ARENA_WORK_STALE_S`` setting): heartbeats six times and sweeps three times per
    ``stale_s``, never rarer than the defaults."""
    return {"stale_s": stale_s, "heartbeat_s": min(HEARTBEAT_S, stale_s / 6), "sweep_s": min(SWEEP_S, stale_s / 3)}

# KEYS: record. ARGV: now, owner, max attempts. Queued -> playing (1), or over its
# attempts (-1, still marked playing so that its new owner fails it); else 0 (someone
# else took it, or it was finished).
_TAKE = """
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then return 0 end
local attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'status', 'playing', 'heartbeat', ARGV[1], 'owner', ARGV[2])
if attempts > tonumber(ARGV[3]) then return -1 end
return 1
"""
# KEYS: record. ARGV: owner, now. The owner's heartbeat (0 on stop: stale at once).
_TOUCH = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'heartbeat', ARGV[2])
return 1
"""
# KEYS: record, open set, then the holds to give back, then the keys to delete. ARGV: owner,
# status, error, now, keep seconds, id, number of holds. Only the owner finishes; what the
# item held is given back in the same script, so a service killed just after it finished an
# item cannot leave a person's slot or a challenge's hold counted (nor half of them).
_FINISH = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'status') ~= 'playing' then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'error', ARGV[3], 'finished', ARGV[4], 'owner', '')
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('SREM', KEYS[2], ARGV[6])
local holds = tonumber(ARGV[7])
for i = 3, #KEYS do
  if i < 3 + holds then
    if redis.call('DECR', KEYS[i]) <= 0 then redis.call('DEL', KEYS[i]) end
  else
    redis.call('DEL', KEYS[i])
  end
end
return 1
"""
# KEYS: record, queue, open set. ARGV: id, stale before, now, owner ('': any).
# A stale playing item (of ``owner``), or a stale queued one on no queue, is queued
# again (1); a record that is gone or finished leaves the open set (-1); else 0.
_REQUEUE = """
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'queued' and status ~= 'playing' then redis.call('SREM', KEYS[3], ARGV[1]) return -1 end
local stale = tonumber(redis.call('HGET', KEYS[1], 'heartbeat') or '0') < tonumber(ARGV[2])
if status == 'playing' and (stale or ARGV[4] ~= '') then
  if ARGV[4] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[4] then return 0 end
elseif not (status == 'queued' and stale and not redis.call('LPOS', KEYS[2], ARGV[1])) then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'queued', 'heartbeat', ARGV[3], 'queued', ARGV[3], 'owner', '')
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
"""


@dataclass(frozen=True)
class Claim:
    """An item a worker took.

    Attributes:
        id: The item's id.
        owner: The worker's token for it (only the owner heartbeats and finishes it).
        record: The record's fields as they were once claimed (``request`` is missing if
            the record is gone).
        exhausted: It was claimed :data:`MAX_ATTEMPTS` times before: it is to fail.
    """

    id: str
    owner: str
    record: dict[str, str]
    exhausted: bool

    @property
    def queued_at(self) -> float:
        """Unix seconds it was last queued (first, or again after its owner died)."""
        return float(self.record.get("queued") or 0)


class WorkQueue:
    """The Redis side of one durable queue (see the module's docstring).

    Args:
        client: The app's Redis.
        keys: Its keys (:meth:`~arena.snapshots.keys.RedisKeys.work_queue`): an item's record
            from its id, the list of queued ids, the set of the ids queued or being played.
        stale_s: A claim without a heartbeat for this long is queued again by :meth:`sweep`.
        max_attempts: Claims of one item before it fails.
    """

    def __init__(self, client: redis.Redis, keys: WorkQueueKeys, *,
                 stale_s: float = STALE_S, max_attempts: int = MAX_ATTEMPTS) -> None:
        self.client = client
        self.record = keys.record
        self.queue = keys.queue
        self.open_set = keys.open_set
        self.stale_s = stale_s
        self.max_attempts = max_attempts
        self._take, self._touch = client.register_script(_TAKE), client.register_script(_TOUCH)
        self._finish, self._requeue = client.register_script(_FINISH), client.register_script(_REQUEUE)

    def put(self, pipe: redis.client.Pipeline, item_id: str, request_json: str, now: float,
            **fields: str | float) -> None:
        """Queue ``item_id`` through ``pipe`` (the caller's transaction): its record, ``queued``,
        with ``fields`` beside the standard ones, on the queue and in the open set."""
        pipe.hset(self.record(item_id), mapping={
            "request": request_json, "status": QUEUED, "heartbeat": now, "queued": now, "owner": "",
            "attempts": 0, "error": "", "finished": 0, **fields})
        pipe.sadd(self.open_set, item_id)
        pipe.rpush(self.queue, item_id)

    def fields(self, item_id: str) -> dict[str, str]:
        """The record's fields (empty: no such record, or it expired)."""
        return {k.decode(): v.decode() for k, v in self.client.hgetall(self.record(item_id)).items()}

    def claim(self, block_s: float = 0.0) -> Claim | None:
        """Take the next queued item, waiting up to ``block_s`` for one (0: don't wait)."""
        while True:
            if block_s > 0:
                got = self.client.blpop([self.queue], timeout=block_s)
                raw = None if got is None else got[1]
            else:
                raw = self.client.lpop(self.queue)
            if raw is None:
                return None
            item_id, owner = raw.decode(), secrets.token_hex(8)
            taken = self._take(keys=[self.record(item_id)], args=[time.time(), owner, self.max_attempts])
            if taken != 0:  # else: taken or finished by someone else meanwhile
                return Claim(item_id, owner, self.fields(item_id), exhausted=taken == -1)
            block_s = 0.0

    def touch(self, item_id: str, owner: str, now: float) -> bool:
        """The owner's heartbeat (``now`` 0: stale at once, for the next worker to take over)."""
        return self._touch(keys=[self.record(item_id)], args=[owner, now]) == 1

    def finish(self, item_id: str, owner: str, status: str, error: str = "", keep_s: float = KEEP_FINISHED_S,
               holds: tuple[str, ...] = (), deletes: tuple[str, ...] = ()) -> bool:
        """Mark the owner's item ``done`` or ``failed``; ``True`` only for the one call that did.

        In the same script, that call gives back one count on each of ``holds`` (in-flight
        counters taken with the item, :func:`arena.core.limits.take_holds`) and deletes ``deletes``."""
        return self._finish(keys=[self.record(item_id), self.open_set, *holds, *deletes],
                            args=[owner, status, error, time.time(), int(keep_s), item_id, len(holds)]) == 1

    def requeue(self, item_id: str, owner: str) -> bool:
        """The owner gives its item back to the queue now (a failure that a retry may fix)."""
        return self._requeue(keys=self._requeue_keys(item_id), args=[item_id, 0, time.time(), owner]) == 1

    def sweep(self, now: float | None = None) -> list[str]:
        """Queue again every stale item (see the module's docstring); returns their ids."""
        now = time.time() if now is None else now
        requeued = []
        for raw in self.client.smembers(self.open_set):
            item_id = raw.decode()
            if self._requeue(keys=self._requeue_keys(item_id), args=[item_id, now - self.stale_s, now, ""]) == 1:
                requeued.append(item_id)
        return requeued

    def _requeue_keys(self, item_id: str) -> list[str]:
        return [self.record(item_id), self.queue, self.open_set]


class QueueWorker(ServiceLoop):
    """A small thread that claims items of a :class:`WorkQueue` and plays them, at most
    ``capacity`` at once; subclasses say how to play one (:meth:`begin`) and what to do
    once it is done or failed (:meth:`ended`).

    Args:
        queue: The queue.
        capacity: Items played at once.
        name: The thread's name, and what the log calls an item.
        poll_s: Longest wait for a queued item (or a free slot) before heartbeats and sweeps; an
            item that ends frees its slot at once (the wait for a slot ends then, not at ``poll_s``).
        heartbeat_s: How often the heartbeats of the items played are refreshed.
        sweep_s: How often stale items are queued again (and once at the start).
    """

    retry_s = 1.0

    def __init__(self, queue: WorkQueue, capacity: int, name: str, *, poll_s: float = 0.5,
                 heartbeat_s: float = HEARTBEAT_S, sweep_s: float = SWEEP_S) -> None:
        super().__init__()
        self.queue = queue
        self.capacity = capacity
        self.name = self.thread_name = name
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.sweep_s = sweep_s
        self._playing: dict[str, str] = {}  # item id -> our owner token
        self._lock = threading.Lock()
        self._touched = self._swept = float("-inf")
        self._freed = threading.Event()  # set when an item ends (its slot is free) or the loop stops

    # -- what a kind of work says ------------------------------------------------------
    def begin(self, claim: Claim) -> Future:
        """Start playing ``claim`` (in the background); the future says how it ended.

        Raising, or a future that fails, with an :class:`~envs.errors.ArenaError` (other
        than ``ServiceUnavailable``) fails the item; any other error queues it again."""
        raise NotImplementedError

    def releases(self, claim: Claim) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(holds, deletes)``: the in-flight counters the item holds and the keys it keeps
        alive, given back and deleted atomically with its finish (:meth:`WorkQueue.finish`)."""
        return (), ()

    def ended(self, claim: Claim, status: str, error: str) -> None:
        """The item is ``done`` or ``failed`` (called once per item, by its owner, after its
        :meth:`releases` were given back: a service killed in between skips only this)."""

    def exhausted_reason(self) -> str:
        return f"its service stopped while playing it {self.queue.max_attempts} times; ask again"

    # -- the thread --------------------------------------------------------------------
    def stop(self, timeout: float = 5.0) -> None:
        """Stop claiming; what is still playing is marked stale, so the next worker plays it at once."""
        self.stop_loop(timeout)
        with self._lock:
            playing = dict(self._playing)
        try:
            for item_id, owner in playing.items():
                self.queue.touch(item_id, owner, 0)
        except redis.RedisError as exc:
            log.warning("could not mark the %s items still playing as stale (%s); they go stale", self.name, exc)

    def cycle(self) -> float:
        self._freed.clear()  # before the check: a slot freed after it ends the wait below at once
        if self.step(self.poll_s) is None and self.full():
            self._freed.wait(self.poll_s)  # until an item ends (or the poll's end, or a stop)
        return 0.0

    def ask_to_stop(self) -> None:
        super().ask_to_stop()
        self._freed.set()

    def full(self) -> bool:
        with self._lock:
            return len(self._playing) >= self.capacity

    def step(self, block_s: float = 0.0) -> Future | None:
        """Heartbeat and sweep when due, then start the next queued item if there is room."""
        now = time.time()
        if now - self._touched >= self.heartbeat_s:
            self._touched = now
            self.heartbeat(now)
        if now - self._swept >= self.sweep_s:
            self._swept = now
            self.sweep(now)
        return self.take(block_s)

    def heartbeat(self, now: float) -> None:
        with self._lock:
            playing = dict(self._playing)
        for item_id, owner in playing.items():
            self.queue.touch(item_id, owner, now)

    def sweep(self, now: float | None = None) -> int:
        """Queue again every stale item; returns how many."""
        requeued = self.queue.sweep(now)
        for item_id in requeued:
            log.warning("%s %s was left unfinished by its service; queued again", self.name, item_id)
        return len(requeued)

    def take(self, block_s: float = 0.0) -> Future | None:
        """Start the next queued item if there is room, waiting up to ``block_s`` for one.

        Returns:
            ``None`` if nothing was taken; else a future that ends once the item's record
            says how it ended (done, failed, or queued again): the play's result, or its error.
        """
        if self.full():
            return None
        claim = self.queue.claim(block_s)
        if claim is None:
            return None
        with self._lock:
            self._playing[claim.id] = claim.owner
        ended: Future = Future()
        if claim.exhausted or "request" not in claim.record:
            self._finished(claim, _failed(self.exhausted_reason()), ended)
            return ended
        try:
            future = self.begin(claim)
        except Exception as exc:
            log.warning("could not start %s %s", self.name, claim.id, exc_info=True)
            self._finished(claim, _failed(exc), ended)
            return ended
        future.add_done_callback(lambda done: self._finished(claim, done, ended))
        return ended

    def _finished(self, claim: Claim, done: Future, ended: Future) -> None:
        """The play ended as ``done`` says: the item is done, failed, or queued again;
        then ``ended`` gets ``done``'s outcome."""
        try:
            self._end(claim, done)
        finally:
            if done.cancelled():
                ended.cancel()
            elif done.exception() is not None:
                ended.set_exception(done.exception())
            else:
                ended.set_result(done.result())

    def _end(self, claim: Claim, done: Future) -> None:
        with self._lock:
            self._playing.pop(claim.id, None)
        self._freed.set()
        if done.cancelled():  # its lane closed: the service is stopping, the next one plays it
            self.queue.touch(claim.id, claim.owner, 0)
            return
        exc = done.exception()
        if exc is not None and not (isinstance(exc, ArenaError) and not isinstance(exc, ServiceUnavailable)):
            log.warning("%s %s failed for now (%s); queued again", self.name, claim.id, exc)
            self.queue.requeue(claim.id, claim.owner)
            return
        status, error = (DONE, "") if exc is None else (FAILED, str(exc)[:1000])
        holds, deletes = self.releases(claim) if "request" in claim.record else ((), ())
        if self.queue.finish(claim.id, claim.owner, status, error, holds=holds, deletes=deletes):
            log.info("%s %s is %s%s", self.name, claim.id, status, f": {error}" if error else "")
            self.ended(claim, status, error)


def _failed(reason: Exception | str) -> Future:
    """A future that failed with ``reason`` (a message is an :class:`ArenaError`: no retry)."""
    future: Future = Future()
    future.set_exception(ArenaError(reason) if isinstance(reason, str) else reason)
    return future


def finished_future(result: object = None) -> Future:
    """A future that is already done with ``result``."""
    future: Future = Future()
    future.set_result(result)
    return future
