"""The persisted match queue: jobs written before dispatch, deleted when recorded."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from arena.storage.db.models import QueuedMatch
from arena.storage.db.repositories.dialect import chunks, dialect_insert


@dataclass(frozen=True)
class QueuedJob:
    """One queued match: enough to dispatch it again exactly as before."""

    match_id: str
    batch_key: str
    seed: int
    agents: tuple[str, ...]


def enqueue_matches(session: Session, env_id: str, batch_key: str, jobs: Sequence[QueuedJob],
                    league_id: int | None = None) -> int:
    """Queue ``jobs`` under ``batch_key``; returns how many.

    Idempotent: a job already queued (a retried transaction whose commit did land) is
    left as it is.
    """
    if not jobs:
        return 0
    stmt = dialect_insert(session, QueuedMatch.__table__).on_conflict_do_nothing(index_elements=["id"])
    session.execute(stmt, [
        {"id": j.match_id, "env_id": env_id, "league_id": league_id, "batch_key": batch_key,
         "position": i, "seed": j.seed, "agents": list(j.agents)}
        for i, j in enumerate(jobs)
    ])
    return len(jobs)


def dequeue_matches(session: Session, match_ids: Iterable[str]) -> int:
    """Remove recorded (or abandoned) matches from the queue; returns how many were queued."""
    removed = 0
    for part in chunks(list(match_ids)):
        removed += session.execute(delete(QueuedMatch).where(QueuedMatch.id.in_(part))).rowcount or 0
    return removed


def queued_matches(session: Session, env_id: str) -> list[QueuedJob]:
    """Every queued match of ``env_id``, oldest batch first, in dispatch order."""
    rows = session.execute(
        select(QueuedMatch.id, QueuedMatch.batch_key, QueuedMatch.seed, QueuedMatch.agents)
        .where(QueuedMatch.env_id == env_id)
        .order_by(QueuedMatch.created_at, QueuedMatch.batch_key, QueuedMatch.position)
    ).all()
    return [QueuedJob(r.id, r.batch_key, int(r.seed), tuple(r.agents)) for r in rows]


def queue_depth(session: Session, env_id: str | None = None) -> int:
    """Matches queued (scheduled, not yet recorded), for one env or all."""
    query = select(func.count()).select_from(QueuedMatch)
    if env_id is not None:
        query = query.where(QueuedMatch.env_id == env_id)
    return int(session.execute(query).scalar_one())
