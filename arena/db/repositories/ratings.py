"""Ratings: derived data, written by the ladder and rebuilt from the match log.

No TrueSkill here: callers compute new ratings (``league.ladder.rate_match``) and
hand the values over. The only derived value stored is ``conservative = mu - 3
sigma``, computed here so the leaderboard index can never disagree with mu/sigma.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from arena.db.models import Agent, AgentRating, Match, RatingEvent
from arena.db.repositories.boards import board_select
from arena.db.repositories.dialect import chunks, dialect_insert

CONSERVATIVE_SIGMAS = 3.0


@dataclass(frozen=True)
class StoredRating:
    agent_id: int
    role: str
    env_id: str
    mu: float
    sigma: float
    conservative: float
    games: int
    wins: int
    draws: int
    losses: int
    last_match_seq: int | None


@dataclass(frozen=True)
class LeaderboardEntry:
    rank: int
    agent_id: int
    key: str
    name: str
    kind: str
    status: str
    mu: float
    sigma: float
    conservative: float
    games: int
    wins: int
    draws: int
    losses: int


_RATING_COLUMNS = [getattr(AgentRating, f) for f in StoredRating.__dataclass_fields__]
_UPSERT_KEYS = ("agent_id", "role", "env_id", "mu", "sigma", "games", "wins", "draws",
                "losses", "last_match_seq")
_EVENT_KEYS = ("match_seq", "agent_id", "role", "mu_before", "sigma_before", "mu_after",
               "sigma_after")


def load_ratings(
    session: Session, agent_ids: Collection[int], role: str | None = None
) -> dict[tuple[int, str], StoredRating]:
    """Stored ratings of ``agent_ids`` (in ``role`` only, if given).

    Returns:
        ``{(agent_id, role): rating}``; agents without a rating are absent.
    """
    found: dict[tuple[int, str], StoredRating] = {}
    for part in chunks(list(set(agent_ids))):
        stmt = select(*_RATING_COLUMNS).where(AgentRating.agent_id.in_(part))
        if role is not None:
            stmt = stmt.where(AgentRating.role == role)
        for row in session.execute(stmt):
            rating = StoredRating(*row)
            found[(rating.agent_id, rating.role)] = rating
    return found


def upsert_ratings(session: Session, rows: Iterable[Mapping[str, Any]]) -> int:
    """Writes ratings: ``INSERT ... ON CONFLICT (agent_id, role) DO UPDATE``, in bulk.

    Args:
        session: The session (the caller commits).
        rows: Dicts with ``agent_id``, ``role``, ``env_id``, ``mu``, ``sigma``,
            ``games``, ``wins``, ``draws``, ``losses``, ``last_match_seq`` (the new
            totals, not increments). When a key repeats, the last row wins.

    Returns:
        The number of distinct (agent_id, role) rows written.
    """
    # PostgreSQL refuses to update one row twice in a statement; keep the last.
    latest: dict[tuple[int, str], dict[str, Any]] = {}
    for row in rows:
        values = {k: row[k] for k in _UPSERT_KEYS}
        values["conservative"] = values["mu"] - CONSERVATIVE_SIGMAS * values["sigma"]
        latest[(values["agent_id"], values["role"])] = values
    if not latest:
        return 0
    insert = dialect_insert(session, AgentRating.__table__)
    updated = {k: insert.excluded[k] for k in (*_UPSERT_KEYS[2:], "conservative")}
    stmt = insert.on_conflict_do_update(index_elements=["agent_id", "role"], set_=updated)
    session.execute(stmt, list(latest.values()))
    return len(latest)


def insert_rating_events(session: Session, rows: Iterable[Mapping[str, Any]]) -> int:
    """Appends rating events (one executemany); returns the row count.

    Rows carry ``match_seq``, ``agent_id``, ``role``, ``mu_before``, ``sigma_before``,
    ``mu_after`` and ``sigma_after``.
    """
    params = [{k: row[k] for k in _EVENT_KEYS} for row in rows]
    if params:
        session.execute(RatingEvent.__table__.insert(), params)
    return len(params)


def rating_history(session: Session, agent_id: int, role: str | None = None) -> list[dict[str, Any]]:
    """An agent's rating events in match order (for rating-over-time charts)."""
    stmt = (
        select(*[getattr(RatingEvent, k) for k in _EVENT_KEYS])
        .where(RatingEvent.agent_id == agent_id)
        .order_by(RatingEvent.match_seq, RatingEvent.id)
    )
    if role is not None:
        stmt = stmt.where(RatingEvent.role == role)
    return [dict(row._mapping) for row in session.execute(stmt)]


def leaderboard(
    session: Session,
    env_id: str,
    role: str,
    limit: int = 50,
    offset: int = 0,
    statuses: Collection[str] | None = None,
) -> list[LeaderboardEntry]:
    """Agents of ``env_id`` in ``role``, best conservative rating first.

    Served by the ``(env_id, role, conservative DESC, agent_id)`` index; ties go to
    the older agent, so pages are stable.

    Args:
        statuses: Only agents in these statuses (e.g. ``{"rated", "placement"}``).
    """
    stmt = (
        board_select()
        .where(AgentRating.env_id == env_id, AgentRating.role == role)
        .order_by(AgentRating.conservative.desc(), AgentRating.agent_id)
        .limit(limit)
        .offset(offset)
    )
    if statuses is not None:
        stmt = stmt.where(Agent.status.in_(list(statuses)))
    # A BoardRow's last two fields (its last match's seq and time) are not part of an entry.
    return [
        LeaderboardEntry(offset + i + 1, *row[:-2]) for i, row in enumerate(session.execute(stmt))
    ]


def rating_points(
    session: Session, agent_id: int, role: str | None = None, limit: int | None = None
) -> list[tuple[int, str, float, float, datetime]]:
    """An agent's rating after each of its rated matches, oldest first, with match times.

    Args:
        role: Only this role.
        limit: Only the latest ``limit`` points.

    Returns:
        ``(match_seq, role, mu, sigma, created_at)`` tuples.
    """
    stmt = (
        select(RatingEvent.match_seq, RatingEvent.role, RatingEvent.mu_after,
               RatingEvent.sigma_after, Match.created_at)
        .join(Match, Match.seq == RatingEvent.match_seq)
        .where(RatingEvent.agent_id == agent_id)
        .order_by(RatingEvent.match_seq.desc(), RatingEvent.id.desc())
    )
    if role is not None:
        stmt = stmt.where(RatingEvent.role == role)
    if limit is not None:
        stmt = stmt.limit(limit)
    rows = [tuple(row) for row in session.execute(stmt)]
    rows.reverse()
    return rows


def count_ratings(session: Session, env_id: str, role: str) -> int:
    """Number of agents with a rating in ``role`` of ``env_id`` (leaderboard length)."""
    stmt = select(func.count()).select_from(AgentRating).where(
        AgentRating.env_id == env_id, AgentRating.role == role
    )
    return session.execute(stmt).scalar_one()


def clear_ratings(session: Session, env_id: str) -> int:
    """Deletes every rating and rating event of ``env_id`` (before a rebuild).

    Returns:
        The number of rating rows deleted.
    """
    env_agents = select(Agent.id).where(Agent.env_id == env_id).scalar_subquery()
    session.execute(
        delete(RatingEvent).where(RatingEvent.agent_id.in_(env_agents)),
        execution_options={"synchronize_session": False},
    )
    result = session.execute(
        delete(AgentRating).where(AgentRating.env_id == env_id),
        execution_options={"synchronize_session": False},
    )
    return result.rowcount
