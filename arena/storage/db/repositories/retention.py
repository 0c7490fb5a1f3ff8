"""Replay retention: the action lists of old matches nobody kept are emptied (migration 0007).

A match keeps its seed, seats, scores, result and rating events forever (ratings are
rebuilt from those); only its ``actions`` go, and ``replay_dropped`` says so. Kept are
the replays an owner of one of the match's agents opened (``replay_requested``, set
only by such a view: anonymous reads write nothing) and those the site links
(:func:`site_linked`), which are decided at retention time from stored data. Scans go
by ``seq`` (the primary key) from a watermark, never over ``created_at`` (no index).

Guests (the ``human`` agents of people who played without signing in: no owner, named
``guest-...``) are pruned whole once they are retired (after their one game) and
older than the retention, with their games (:func:`prune_guests`): those games are
unrated and on no board, so ratings and their rebuild do not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from arena.storage.db.models import Agent, LeagueGeneration, Match, MatchParticipant
from arena.storage.db.repositories.dialect import chunks


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


SITE_RECENT_MATCHES = 20
"""Newest matches of each agent (its page lists them) and of each env kept past retention."""


def drop_old_replays(session: Session, created_before: datetime, after_seq: int = 0,
                     limit: int = 10_000, recent: int = SITE_RECENT_MATCHES) -> tuple[int, int]:
    """Empty the action lists of up to ``limit`` matches (by seq) created before ``created_before``,
    except those an owner kept and those the site links (:func:`site_linked`).

    Args:
        session: The transaction.
        created_before: Matches created at or after this keep their replays.
        after_seq: Watermark: matches up to this seq were handled by an earlier call.
        limit: Most matches looked at in one call (one bounded transaction).
        recent: How many of each agent's and each env's newest matches the site links.

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
    candidates = dict(session.execute(
        select(Match.seq, Match.id).where(Match.seq > after_seq, Match.seq <= through,
                                          Match.replay_requested.is_(False), Match.replay_dropped.is_(False))).all())
    kept = site_linked(session, candidates, after_seq, through, recent)
    drop = [seq for seq in candidates if seq not in kept]
    for part in chunks(drop):
        session.execute(update(Match).where(Match.seq.in_(part)).values(actions=[], replay_dropped=True))
    return len(drop), through


def site_linked(session: Session, candidates: dict[int, str], after_seq: int, through: int,
                recent: int) -> set[int]:
    """The seqs among ``candidates`` (``{seq: match id}`` in ``(after_seq, through]``) that the
    site links: the first match of a phase in a league timeline, and the ``recent`` newest
    matches of an agent (its page) or of an env (its leaderboard page).

    Decided from stored data alone, so nobody's reads can add to it.
    """
    firsts = {match_id for (first,) in session.execute(select(LeagueGeneration.first_matches))
              for match_id in (first or {}).values()}
    linked = {seq for seq, match_id in candidates.items() if match_id in firsts}
    agents = session.execute(select(MatchParticipant.agent_id).distinct()
                             .where(MatchParticipant.match_seq > after_seq, MatchParticipant.match_seq <= through))
    for (agent_id,) in agents:
        linked.update(session.execute(select(MatchParticipant.match_seq).where(MatchParticipant.agent_id == agent_id)
                                      .order_by(MatchParticipant.match_seq.desc()).limit(recent)).scalars())
    envs = session.execute(select(Match.env_id).distinct().where(Match.seq > after_seq, Match.seq <= through))
    for (env_id,) in envs:
        linked.update(session.execute(select(Match.seq).where(Match.env_id == env_id)
                                      .order_by(Match.seq.desc()).limit(recent)).scalars())
    return linked & candidates.keys()


GUEST_NAME_PREFIX = "guest-"
"""A guest's human agent is named ``guest-<random>`` (:mod:`arena.ladder.people`)."""


def prune_guests(session: Session, updated_before: datetime, created_before: datetime,
                 limit: int = 1000) -> tuple[int, int]:
    """Delete up to ``limit`` guest agents, with their games: guests (``human``, no owner,
    named ``guest-...``) last changed before ``updated_before`` and either retired (their one
    game is over) or created before ``created_before`` (a game whose end was never
    recorded, long past any play token).

    Returns:
        ``(guests, matches)`` deleted (a match's participants and rating events go with it).
    """
    ids = list(session.execute(
        select(Agent.id).where(Agent.kind == "human", Agent.owner_id.is_(None),
                               Agent.name.startswith(GUEST_NAME_PREFIX, autoescape=True),
                               Agent.updated_at < updated_before,
                               or_(Agent.status == "retired", Agent.created_at < created_before))
        .order_by(Agent.id).limit(limit)).scalars())
    if not ids:
        return 0, 0
    seqs = select(MatchParticipant.match_seq).where(MatchParticipant.agent_id.in_(ids)).scalar_subquery()
    matches = session.execute(delete(Match).where(Match.seq.in_(seqs))).rowcount
    session.execute(delete(Agent).where(Agent.id.in_(ids)))
    return len(ids), matches
