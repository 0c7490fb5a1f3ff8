"""What the evaluation measures read from the match log: results by seat, rated 1v1 matches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from arena.storage.db.models import Match, MatchParticipant, RatingEvent

SCORES = {"W": 1.0, "D": 0.5, "L": 0.0}


def seat_counts(session: Session, env_id: str, agent_id: int | None = None) -> list[tuple[int, int, str, int]]:
    """``(agent id, seat, result, matches)`` over the env's rated two-seat matches between
    different agents (only ``agent_id``'s if given): one aggregate query."""
    me, other = aliased(MatchParticipant), aliased(MatchParticipant)
    stmt = (
        select(me.agent_id, me.seat, me.result, func.count())
        .join(Match, Match.seq == me.match_seq)
        .join(other, (other.match_seq == me.match_seq) & (other.seat == 1 - me.seat))
        .where(Match.env_id == env_id, Match.rated, me.seat.in_((0, 1)), other.agent_id != me.agent_id)
        .group_by(me.agent_id, me.seat, me.result)
    )
    if agent_id is not None:
        stmt = stmt.where(me.agent_id == agent_id)
    return [(int(a), int(s), r, int(n)) for a, s, r, n in session.execute(stmt)]


@dataclass(frozen=True)
class RatedPair:
    """One rated 1v1 match: seat 0's and seat 1's agent, seat 0's score, both ratings before it."""

    match_seq: int
    a: int
    b: int
    score: float
    a_before: tuple[float, float]
    b_before: tuple[float, float]


def rated_pairs(session: Session, env_id: str, role: str) -> Iterator[RatedPair]:
    """The env's rated two-seat matches in ``role`` with both ratings before each, in rating order."""
    p0, p1 = aliased(MatchParticipant), aliased(MatchParticipant)
    e0, e1 = aliased(RatingEvent), aliased(RatingEvent)
    stmt = (
        select(Match.seq, p0.agent_id, p1.agent_id, p0.result, e0.mu_before, e0.sigma_before,
               e1.mu_before, e1.sigma_before)
        .join(p0, (p0.match_seq == Match.seq) & (p0.seat == 0))
        .join(p1, (p1.match_seq == Match.seq) & (p1.seat == 1))
        .join(e0, (e0.match_seq == Match.seq) & (e0.agent_id == p0.agent_id) & (e0.role == role))
        .join(e1, (e1.match_seq == Match.seq) & (e1.agent_id == p1.agent_id) & (e1.role == role))
        .where(Match.env_id == env_id, Match.rated, p0.agent_id != p1.agent_id)
        .order_by(Match.seq)
    )
    for seq, a, b, result, mu_a, sig_a, mu_b, sig_b in session.execute(stmt).yield_per(10_000):
        yield RatedPair(int(seq), int(a), int(b), SCORES[result], (mu_a, sig_a), (mu_b, sig_b))
