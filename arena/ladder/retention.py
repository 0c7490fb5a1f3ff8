"""Replay retention on the service's clock: old, never-opened replays lose their moves.

``ARENA_REPLAY_RETENTION_DAYS`` (default 30; 0 keeps everything). Every
``every_s`` the service empties the action lists of matches older than the retention
that nobody opened (:func:`arena.storage.db.repositories.drop_old_replays`), a bounded
chunk per transaction, walking the log by seq from a watermark. Results, seats,
seeds and rating events are kept, so ``arena ratings rebuild`` still equals live.
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.retry import retry_transient

log = logging.getLogger(__name__)


class ReplayRetention:
    """Drops old replays in bounded chunks.

    Args:
        sessions: The database.
        days: Replays older than this many days (and never opened) are dropped; 0 disables.
        every_s: Seconds between passes (:meth:`due`).
        chunk: Matches looked at per transaction.
    """

    def __init__(self, sessions: sessionmaker[Session], days: float, every_s: float = 300.0,
                 chunk: int = 10_000) -> None:
        self.sessions = sessions
        self.days = days
        self.every_s = every_s
        self.chunk = chunk
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
        return dropped

    def _chunk(self, cutoff: datetime) -> int:
        with self.sessions.begin() as session:
            n, self.watermark = repo.drop_old_replays(session, cutoff, self.watermark, self.chunk)
        return n
