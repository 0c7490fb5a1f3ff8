"""Replay retention: the action lists of old matches nobody opened are emptied (migration 0006).

A match keeps its seed, seats, scores, result and rating events forever (ratings are
rebuilt from those); only its ``actions`` go, and ``replay_dropped`` says so. Scans go
by ``seq`` (the primary key) from a watermark, never over ``created_at`` (no index).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from arena.storage.db.models import Match


@dataclass(frozen=True)
class ReplayState:
    """Whether a match's replay was ever opened, and whether its actions were dropped."""

    requested: bool
    dropped: bool


def replay_state(session: Session, match_id: str) -> ReplayState | None:
    """The replay flags of match ``match_id`` (``None``: no such match)."""
    row = session.execute(
        select(Match.replay_requested, Match.replay_dropped).where(Match.id == match_id)).first()
    return None if row is None else ReplayState(bool(row[0]), bool(row[1]))


def mark_replay_requested(session: Session, match_id: str) -> bool:
    """Keep the replay of ``match_id`` (someone opened it); ``True`` if it was not marked yet."""
    stmt = (update(Match).where(Match.id == match_id, Match.replay_requested.is_(False))
            .values(replay_requested=True))
    return bool(session.execute(stmt).rowcount)


def drop_old_replays(session: Session, created_before: datetime, after_seq: int = 0,
                     limit: int = 10_000) -> tuple[int, int]:
    """Empty the action lists of up to ``limit`` matches (by seq) created before ``created_before``.

    Args:
        session: The transaction.
        created_before: Matches created at or after this keep their replays.
        after_seq: Watermark: matches up to this seq were handled by an earlier call.
        limit: Most matches looked at in one call (one bounded transaction).

    Returns:
        ``(dropped, watermark)``: how many replays were dropped, and the seq to pass as
        ``after_seq`` next time (unchanged when nothing is old enough yet).
    """
    rows = session.execute(
        select(Match.seq, Match.created_at).where(Match.seq > after_seq).order_by(Match.seq).limit(limit)).all()
    through = after_seq
    for seq, created_at in rows:
        if created_at >= created_before:
            break
        through = seq
    if through == after_seq:
        return 0, after_seq
    stmt = (update(Match)
            .where(Match.seq > after_seq, Match.seq <= through, Match.replay_requested.is_(False),
                   Match.replay_dropped.is_(False))
            .values(actions=[], replay_dropped=True))
    return session.execute(stmt).rowcount or 0, through
