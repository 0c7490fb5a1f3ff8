"""What fault benchmarks check in the match log once the faults are over.

:func:`duplicated_records` counts work recorded twice: a match id stored twice, a match
whose participants are not one per seat, rating events beyond one per seat (a result
applied twice shows there). :func:`rebuild_equals_live` says whether the live ratings of
every env equal a rebuild from the log (ratings are derived data: the log is the truth).
"""

from __future__ import annotations

from sqlalchemy import func, select

from arena.storage.db import models


def duplicated_records(sessions, env_id: str | None = None) -> int:
    """Surplus match rows, matches without one participant per seat, and matches with more
    rating events than seats (of ``env_id``, or of every env)."""
    M, P, E = models.Match, models.MatchParticipant, models.RatingEvent
    where = [] if env_id is None else [M.env_id == env_id]
    with sessions() as session:
        matches = session.execute(select(M.seq, M.id, M.seats).where(*where)).all()
        parts = dict(session.execute(select(P.match_seq, func.count()).group_by(P.match_seq)).all())
        events = dict(session.execute(select(E.match_seq, func.count()).group_by(E.match_seq)).all())
    surplus = len(matches) - len({match_id for _, match_id, _ in matches})
    surplus += sum(1 for seq, _, seats in matches if parts.get(seq, 0) != len(seats))
    return surplus + sum(1 for seq, _, seats in matches if events.get(seq, 0) > len(seats))


def rebuild_equals_live(sessions, env_ids: list[str] | tuple[str, ...]) -> bool:
    """Whether every env's live ratings equal a rebuild from its match log."""
    from arena.ladder.recorder import rebuild_ratings
    from envs.registry import get_spec

    return all(rebuild_ratings(sessions, get_spec(env_id)).equal for env_id in env_ids)
