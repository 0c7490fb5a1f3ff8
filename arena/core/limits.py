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

An in-flight count (a *hold*, ``{prefix}:busy:{name}:{subject}``) is taken by one Lua
script (:func:`hold_keys`: counted only if under the limit, so concurrent requests never
pass it) and given back by key (:func:`give_back_holds`) by whoever ends the work, in
whatever process: the durable queues (:mod:`arena.ladder.work_queue`) give a
challenge's or a game's holds back exactly once, when it is done or failed.

If Redis does not answer, requests are let through (and a warning logged): the limits
protect the service, they must not take it down.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Iterator
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
# KEYS: the holds. ARGV: ttl, then each key's limit. One more in flight on every key if
# each has fewer than its limit (1), else nothing counted (0): all or none, atomically.
_HOLD = """
for i, key in ipairs(KEYS) do
  if tonumber(redis.call('GET', key) or '0') >= tonumber(ARGV[i + 1]) then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call('INCR', key)
  redis.call('EXPIRE', key, ARGV[1])
end
return 1
"""


def hold_keys(client: redis.Redis, limits: dict[str, int], ttl_s: int = IN_FLIGHT_TTL_S) -> bool:
    """Count one more in flight on every key of ``limits`` if each has fewer than its limit;
    whether they were counted.

    One script, all or none: concurrent callers never count past a limit, and a refused
    one counts nothing, even for a moment (so it never refuses a racing request that fits).
    Raises ``redis.RedisError`` if Redis does not answer.
    """
    keys = list(limits)
    return int(client.register_script(_HOLD)(keys=keys, args=[ttl_s, *(limits[k] for k in keys)])) == 1


def give_back_holds(client: redis.Redis, keys: Iterable[str]) -> None:
    """Un-count one in flight on each of ``keys`` (the work they were held for ended, or never
    started); a key at zero is deleted. Logs, never raises, if Redis does not answer: the
    holds then expire after :data:`IN_FLIGHT_TTL_S`."""
    keys = tuple(keys)
    if not keys:
        return
    try:
        client.register_script(_GIVE_BACK)(keys=list(keys), args=[1])
    except redis.RedisError as exc:
        log.warning("could not give back the holds %s (%s); they expire", keys, exc)


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

    def hold(self, name: str, subject: str, limit: int, what: str) -> list[Taken]:
        """Count one more ``name`` of ``subject`` in flight, at most ``limit`` at a time (0: no limit).

        Returns:
            What to :meth:`give_back` when it ends (empty: nothing was counted).

        Raises:
            TooManyRequests: ``limit`` are in flight already (``Retry-After: 1``); nothing stays counted.
        """
        if limit <= 0:
            return []
        key = self.keys.busy(name, subject)
        try:
            counted = hold_keys(self.client, {key: limit})
        except redis.RedisError as exc:
            log.warning("in-flight limit not applied: Redis did not answer (%s)", exc)
            return []
        if not counted:
            raise TooManyRequests(f"too many requests: at most {limit} {what} at a time; "
                                  "wait for one to finish", 1)
        return [Taken(key, 1)]

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
    def challenge(self, user_id: int, matches: int) -> Iterator[list[Taken]]:
        """The block queueing a challenge of ``matches`` matches for ``user_id``.

        Yields the challenge's in-flight hold: the block hands it to the queued challenge,
        whose player gives it back when the challenge is done or failed (not when the
        request returns), so a user has at most ``ARENA_CHALLENGES_IN_FLIGHT`` challenges
        queued or being played. If the block raises, everything is given back.
        """
        held = self.hold("challenges", str(user_id), self.challenges_in_flight, "challenges queued or being played")
        try:
            with self.reserved((self.challenge_matches, str(user_id), matches)):
                yield held
        except BaseException:
            self.give_back(held)
            raise
