"""Replay retention on the service's clock: old replays nobody kept lose their moves.

``ARENA_REPLAY_RETENTION_DAYS`` (default 30; 0 keeps everything). Every
``every_s`` the service empties the action lists of matches older than the retention
(:func:`arena.storage.db.repositories.drop_old_replays`), a bounded chunk per
transaction, walking the log by seq from a watermark. It keeps what no crawler can
forge: replays an owner of one of the match's agents opened with its token (reads
without one write nothing, :mod:`arena.read.replays`), and the matches the site links,
decided here from stored data: the first match of each phase in a league timeline and
the newest ``recent`` matches of every agent (its page) and every env (its board's
page). Unrated matches get no exception: users can play them by the thousand.
Results, seats, seeds and rating events are kept, so ``arena ratings rebuild`` still
equals live.

The same pass prunes guests (:func:`arena.storage.db.repositories.prune_guests`): a
person who plays without signing in gets a fresh ``guest-...`` agent, retired after its
one game; older than the retention, it is deleted with its games (unrated, on no
board), so guests leave no permanent rows. A guest whose game's end was never recorded
goes too once it is :data:`GUEST_MAX_AGE` old.
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories.retention import SITE_RECENT_MATCHES
from arena.storage.retry import retry_transient

log = logging.getLogger(__name__)

GUEST_MAX_AGE = timedelta(days=1)
"""A guest agent not retired is pruned past this age too (no play token lives this long)."""


class ReplayRetention:
    """Drops old replays in bounded chunks.

    Args:
        sessions: The database.
        days: Replays older than this many days (and not kept) are dropped; 0 disables.
        every_s: Seconds between passes (:meth:`due`).
        chunk: Matches looked at per transaction.
        recent: Newest matches of each agent and each env that are kept (the site links them).
    """

    def __init__(self, sessions: sessionmaker[Session], days: float, every_s: float = 300.0,
                 chunk: int = 10_000, recent: int = SITE_RECENT_MATCHES) -> None:
        self.sessions = sessions
        self.days = days
        self.every_s = every_s
        self.chunk = chunk
        self.recent = recent
        self.watermark = 0
        self._last_pass: float | None = None

    def due(self, now: float) -> bool:
        """Whether a pass is due at monotonic time ``now`` (never when disabled)."""
        return self.days > 0 and (self._last_pass is None or now - self._last_pass >= self.every_s)

    def run(self, now: float, wall: datetime | None = None) -> int:
        """One pass (every chunk that is old enough); returns how many replays were dropped.

        Args:
            now: Monotonic seconds (for :meth:`due`).
            wall: The present, in UTC (tests pass a future one); default: now.
        """
        self._last_pass = now
        cutoff = (wall or utcnow()) - timedelta(days=self.days)
        dropped = 0
        while True:
            before = self.watermark
            n = retry_transient(functools.partial(self._chunk, cutoff), timeout_s=60.0,
                                what="dropping old replays")
            dropped += n
            if self.watermark == before:
                break
        if dropped:
            log.info("replay retention dropped the moves of %d matches older than %g days", dropped, self.days)
        self.prune_guests(wall)
        return dropped

    def prune_guests(self, wall: datetime | None = None) -> int:
        """Delete the guests older than the retention (with their games), in bounded chunks;
        returns how many guests went."""
        now = wall or utcnow()
        cutoff = now - timedelta(days=self.days)
        guests = matches = 0
        while True:
            n, m = retry_transient(
                lambda: self._guests_chunk(cutoff, now - GUEST_MAX_AGE), timeout_s=60.0, what="pruning guests")
            guests, matches = guests + n, matches + m
            if n < self.chunk:
                break
        if guests:
            log.info("retention pruned %d guest agents older than %g days, with their %d games", guests, self.days,
                     matches)
        return guests

    def _guests_chunk(self, updated_before: datetime, created_before: datetime) -> tuple[int, int]:
        with self.sessions.begin() as session:
            return repo.prune_guests(session, updated_before, created_before, self.chunk)

    def _chunk(self, cutoff: datetime) -> int:
        with self.sessions.begin() as session:
            n, self.watermark = repo.drop_old_replays(session, cutoff, self.watermark, self.chunk, self.recent)
        return n
