"""Abuse limits: rate limits and quotas, counted in the app's Redis, refused with 429.

Every limit is a fixed-window counter (one Lua script: counted with ``INCRBY`` and
``EXPIRE`` only if it stays within the limit, on a key that names its window,
:meth:`arena.snapshots.keys.RedisKeys.limit`), so all API processes sharing a Redis
share the counts and racing requests never pass a limit. A request over a limit is refused with
:class:`~arena.core.errors.TooManyRequests` (HTTP 429, ``Retry-After``: the seconds until
the window ends) *before* it does anything, and what it counted is taken back, so a
refused request neither stores anything nor uses up the allowance. The submission
quota is reserved before storing and given back when the submission is refused for
another reason (a bad checkpoint, a duplicate), so only stored agents count.

The limits (settings ``ARENA_*``; 0 turns one off; the operator's admin token is
never limited):

* sign-ups per client address per hour;
* writes per user per minute, and per client address per minute (sign-ups and
  anonymous writes, such as a guest opening a game, included);
* submissions per user per env per UTC day (Kaggle-style daily quota);
* challenge matches per user per hour, and challenges per user in flight (queued or
  being played by the background service), so nobody can keep the server's match
  workers to themselves;
* people's open games (:mod:`arena.ladder.people`): per user, per user per env, per
  address of guests.

An in-flight count (a *hold*, ``{prefix}:busy:{name}:{subject}``) is taken by one
optimistic transaction (:func:`take_holds`: ``WATCH`` the counters, counted only if each is
under its limit, so concurrent requests never pass it) and given back by whoever ends
the work, in whatever process (:meth:`Limits.give_back`, or the queue's finishing
script). Work that is
queued writes its queue record in the *same* transaction as its holds (``write``), so a
process killed in between leaves neither a hold without its work nor work without its
hold: the durable queues (:mod:`arena.ladder.work_queue`) give a challenge's or a game's
holds back exactly once, when it is done or failed.

If Redis does not answer, requests are let through (and a warning logged): the limits
protect the service, they must not take it down.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import redis

from arena.core.errors import TooManyRequests
from arena.core.settings import Settings
from arena.snapshots.keys import RedisKeys

log = logging.getLogger(__name__)

IN_FLIGHT_TTL_S = 3600
"""An in-flight count outlives a crashed process by at most this long."""

# Un-count every key atomically (all of a piece of work's holds, or none), and leave no key
# behind at zero (a refused request leaves nothing).
_GIVE_BACK = """
local left = 0
for _, key in ipairs(KEYS) do
  left = redis.call('DECRBY', key, ARGV[1])
  if left <= 0 then redis.call('DEL', key) end
end
return left
"""
# KEYS: the window's counter. ARGV: amount, limit, ttl. Counted if it stays within the
# limit (1), else nothing counted (0): racing requests never pass it, nor refuse each other.
_TAKE_WINDOW = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""


@dataclass(frozen=True)
class Limit:
    """At most ``count`` units per ``window_s`` seconds (``count`` 0: no limit).

    Attributes:
        name: Part of the Redis key.
        what: What is counted, for the message ("sign-ups from this address").
    """

    name: str
    count: int
    window_s: int
    what: str


@dataclass(frozen=True)
class Taken:
    """Units counted against a limit in one window (so they can be given back)."""

    key: str
    amount: int


@dataclass(frozen=True)
class Hold:
    """An in-flight count to take: its key, its limit, and the 429's text when it is full."""

    key: str
    limit: int
    refusal: str


def take_holds(client: redis.Redis, holds: list[Hold], write: Callable[[redis.client.Pipeline], object] | None = None,
               ttl_s: int = IN_FLIGHT_TTL_S, retry_after_s: int = 1) -> tuple[str, ...]:
    """Count one more in flight on every hold if each has fewer than its limit, and queue
    ``write``'s commands (the work the holds are for) in the same transaction; the keys taken.

    All or none: concurrent callers never count past a limit (the counters are watched; a
    transaction that raced another is tried again), a refused one counts and writes nothing,
    and a process killed before ``EXEC`` leaves nothing behind.

    Raises:
        TooManyRequests: One of them is full (the first full one's ``refusal``); nothing
            was counted or written.
        redis.RedisError: Redis did not answer.
    """
    keys = [h.key for h in holds]
    with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                if keys:
                    pipe.watch(*keys)
                    used = [int(u or 0) for u in pipe.mget(keys)]
                    full = [h for h, n in zip(holds, used, strict=True) if n >= h.limit]
                    if full:
                        raise TooManyRequests(full[0].refusal, retry_after_s)
                pipe.multi()
                for key in keys:
                    pipe.incr(key)
                    pipe.expire(key, ttl_s)
                if write is not None:
                    write(pipe)
                pipe.execute()
                return tuple(keys)
            except redis.WatchError:
                continue


class Limits:
    """The service's limits over one Redis client.

    Args:
        client: The app's Redis.
        settings: Where the numbers come from.
        keys: Key namespace (tests may pass their own).
    """

    def __init__(self, client: redis.Redis, settings: Settings, keys: RedisKeys | None = None) -> None:
        self.client = client
        self.keys = keys or RedisKeys()
        self._give_back = client.register_script(_GIVE_BACK)
        self._take_window = client.register_script(_TAKE_WINDOW)
        self.signups = Limit("signups", settings.signups_per_hour, 3600, "sign-ups from this address per hour")
        self.user_writes = Limit("writes", settings.writes_per_minute, 60, "write requests per user per minute")
        self.client_writes = Limit("client-writes", settings.client_writes_per_minute, 60,
                                   "write requests from this address per minute")
        self.submissions = Limit("submissions", settings.submissions_per_day, 86_400,
                                 "submissions per user per env per UTC day (ARENA_SUBMISSIONS_PER_DAY)")
        self.challenge_matches = Limit("challenge-matches", settings.challenge_matches_per_hour, 3600,
                                       "challenge matches per user per hour")
        self.challenges_in_flight = settings.challenges_in_flight

    # -- counting -------------------------------------------------------------------
    def take(self, *wanted: tuple[Limit, str, int]) -> list[Taken]:
        """Count ``(limit, subject, amount)`` each; all or none.

        Raises:
            TooManyRequests: One of them is over its limit; nothing stays counted.
        """
        taken: list[Taken] = []
        try:
            for limit, subject, amount in wanted:
                if limit.count > 0:
                    taken.append(self._take(limit, subject, amount))
        except TooManyRequests:
            self.give_back(taken)
            raise
        except redis.RedisError as exc:
            log.warning("rate limits not applied: Redis did not answer (%s)", exc)
            self.give_back(taken)
            return []
        return taken

    def _take(self, limit: Limit, subject: str, amount: int) -> Taken:
        now = time.time()
        window = int(now // limit.window_s)
        key = self.keys.limit(limit.name, subject, window)
        if self._take_window(keys=[key], args=[amount, limit.count, limit.window_s + 60]) == 0:
            retry_after = math.ceil((window + 1) * limit.window_s - now)
            raise TooManyRequests(f"too many requests: at most {limit.count} {limit.what}; "
                                  f"try again in {retry_after} s", retry_after)
        return Taken(key, amount)

    def give_back(self, taken: list[Taken]) -> None:
        """Un-count ``taken`` (the request they were counted for did not happen)."""
        try:
            for t in taken:
                self._give_back(keys=[t.key], args=[t.amount])
        except redis.RedisError as exc:
            log.warning("could not give back rate-limit counts (%s)", exc)

    @contextmanager
    def reserved(self, *wanted: tuple[Limit, str, int]) -> Iterator[None]:
        """Count ``wanted`` for the block; given back if the block raises."""
        taken = self.take(*wanted)
        try:
            yield
        except BaseException:
            self.give_back(taken)
            raise

    def in_flight_hold(self, name: str, subject: str, limit: int, what: str) -> list[Hold]:
        """The hold of one more ``name`` of ``subject`` in flight, at most ``limit`` at a time
        (empty for limit 0: no limit), to take with :func:`take_holds`."""
        if limit <= 0:
            return []
        return [Hold(self.keys.busy(name, subject), limit,
                     f"too many requests: at most {limit} {what} at a time; wait for one to finish")]

    def hold(self, name: str, subject: str, limit: int, what: str) -> list[Taken]:
        """Count one more ``name`` of ``subject`` in flight, at most ``limit`` at a time (0: no limit).

        Returns:
            What to :meth:`give_back` when it ends (empty: nothing was counted).

        Raises:
            TooManyRequests: ``limit`` are in flight already (``Retry-After: 1``); nothing stays counted.
        """
        try:
            return [Taken(key, 1) for key in take_holds(self.client, self.in_flight_hold(name, subject, limit, what))]
        except redis.RedisError as exc:
            log.warning("in-flight limit not applied: Redis did not answer (%s)", exc)
            return []

    @contextmanager
    def in_flight(self, name: str, subject: str, limit: int, what: str) -> Iterator[None]:
        """At most ``limit`` blocks of kind ``name`` of ``subject`` at a time (0: no limit).

        Raises:
            TooManyRequests: ``limit`` are running already (``Retry-After: 1``).
        """
        held = self.hold(name, subject, limit, what)
        try:
            yield
        finally:
            self.give_back(held)

    # -- the service's limits ---------------------------------------------------------
    def sign_up(self, client: str) -> None:
        """A sign-up from address ``client``."""
        self.take((self.signups, client, 1), (self.client_writes, client, 1))

    def write(self, user_id: int, client: str) -> None:
        """A write request of ``user_id`` from ``client``."""
        self.take((self.user_writes, str(user_id), 1), (self.client_writes, client, 1))

    def anonymous_write(self, client: str) -> None:
        """A write request without a user (a guest's game) from ``client``."""
        self.take((self.client_writes, client, 1))

    def submission(self, user_id: int, env_id: str) -> AbstractContextManager[None]:
        """The block storing one submission of ``user_id`` for ``env_id`` (the daily quota)."""
        return self.reserved((self.submissions, f"{user_id}:{env_id}", 1))

    @contextmanager
    def challenge(self, user_id: int, matches: int) -> Iterator[list[Hold]]:
        """The block queueing a challenge of ``matches`` matches for ``user_id``.

        Counts the matches against the hourly budget (given back if the block raises) and
        yields the challenge's in-flight hold, not yet taken: the block takes it in the
        transaction that queues the challenge (:func:`take_holds` with ``write``), and the
        challenge's player gives it back when the challenge is done or failed, so a user has
        at most ``ARENA_CHALLENGES_IN_FLIGHT`` challenges queued or being played.
        """
        with self.reserved((self.challenge_matches, str(user_id), matches)):
            yield self.in_flight_hold("challenges", str(user_id), self.challenges_in_flight,
                                      "challenges queued or being played")
