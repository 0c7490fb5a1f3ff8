"""Ratings: derived data, written by the ladder and rebuilt from the match log, and
the leaderboard rows read from them.

No TrueSkill here: callers compute new ratings (``league.ratings.book.rate_match``) and
hand the values over. The only derived value stored is ``conservative = mu - 3
sigma``, computed here so the leaderboard index can never disagree with mu/sigma.

A leaderboard is read whole once (:func:`board_rows`, the one leaderboard query) and
then kept current from two cheap markers (see :mod:`arena.read.boards`):
:func:`board_version` says whether anything may have changed and
:func:`board_changes` returns only the rows that did.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Select, delete, distinct, func, select, true
from sqlalchemy.orm import Session, aliased

from arena.storage.db.models import Agent, AgentRating, Match, MatchParticipant, Probe, RatingEvent
from arena.storage.db.repositories.dialect import IN_CHUNK, bulk_append, chunks, dialect_insert

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
    """Appends rating events (:func:`~arena.storage.db.repositories.dialect.bulk_append`);
    returns the row count.

    Rows carry ``match_seq``, ``agent_id``, ``role``, ``mu_before``, ``sigma_before``,
    ``mu_after`` and ``sigma_after``.
    """
    params = [tuple(row[k] for k in _EVENT_KEYS) for row in rows]
    if params:
        bulk_append(session, RatingEvent.__tablename__, _EVENT_KEYS, params)
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


def rating_events_between(session: Session, first_seq: int, last_seq: int) -> list[tuple[Any, ...]]:
    """The rating events of the matches with ``first_seq <= seq <= last_seq`` (a range scan of
    their ``match_seq`` index): ``(match_seq, agent_id, role, mu_before, sigma_before, mu_after,
    sigma_after)`` tuples in match order."""
    stmt = (select(*[getattr(RatingEvent, k) for k in _EVENT_KEYS])
            .where(RatingEvent.match_seq >= first_seq, RatingEvent.match_seq <= last_seq)
            .order_by(RatingEvent.match_seq, RatingEvent.id))
    return [tuple(row) for row in session.execute(stmt)]


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


class BoardRow(NamedTuple):
    """One agent on a leaderboard: the agent, its rating in the board's role and when it last
    played (a tuple: boards of 10,000 agents are built often)."""

    agent_id: int
    key: str
    name: str
    kind: str
    status: str
    last_match_at: datetime | None
    rating: StoredRating

    @staticmethod
    def from_row(row: Any) -> BoardRow:
        """The row of a :func:`board_select` statement."""
        return BoardRow(*row[:5], row[-1], StoredRating(*row[5:-1]))


def board_select() -> Select:
    """The columns of a :class:`BoardRow`: an agent's rating in one role joined to the agent,
    and the time of its last match (a primary-key lookup per row returned)."""
    last_match_at = select(Match.created_at).where(Match.seq == AgentRating.last_match_seq)
    return select(
        AgentRating.agent_id, Agent.key, Agent.name, Agent.kind, Agent.status, *_RATING_COLUMNS,
        last_match_at.scalar_subquery(),
    ).join(Agent, Agent.id == AgentRating.agent_id)


def board_order(row: BoardRow) -> tuple[float, int]:
    """Sort key of a board: best conservative rating first, the older agent on ties."""
    return (-row.rating.conservative, row.agent_id)


def board_rows(
    session: Session,
    env_id: str,
    role: str,
    exclude_statuses: Collection[str] = (),
    agent_ids: Collection[int] | None = None,
) -> list[BoardRow]:
    """Every agent rated in ``role`` of ``env_id``, best conservative rating first.

    One index range scan plus the agents' rows: the whole board in one statement (the
    API pages and ranks it in memory, and caches it; see ``arena.read.boards``).

    Args:
        exclude_statuses: Agents in these statuses are left off (e.g. ``retired``).
        agent_ids: Only these agents (to refresh part of a cached board).
    """
    if agent_ids is not None and len(agent_ids) > IN_CHUNK:  # bounded IN lists
        rows = [row for part in chunks(list(agent_ids))
                for row in board_rows(session, env_id, role, exclude_statuses, part)]
        return sorted(rows, key=board_order)
    stmt = (
        board_select()
        .where(AgentRating.env_id == env_id, AgentRating.role == role)
        .order_by(AgentRating.conservative.desc(), AgentRating.agent_id)
    )
    if exclude_statuses:
        stmt = stmt.where(Agent.status.not_in(list(exclude_statuses)))
    if agent_ids is not None:
        stmt = stmt.where(AgentRating.agent_id.in_(list(agent_ids)))
    return [BoardRow.from_row(row) for row in session.execute(stmt)]


def board_changes(
    session: Session, env_id: str, role: str, after_seq: int | None, after_update: datetime | None,
    after_probe: datetime | None = None,
) -> list[BoardRow]:
    """Board rows that may differ from a version read earlier (see :func:`board_version`).

    The rows of agents rated in a later match or updated since, *whatever their status*
    (a retired agent's row tells the caller to drop it). One statement, so refreshing
    a cached board costs about as many rows as changed.

    Args:
        after_seq: The version's newest match seq (``None``: there were no matches).
        after_update: The version's newest agent update (``None``: there were no agents).
        after_probe: The version's newest finished probe: agents probed since change too
            (``None``: every probed agent).
    """
    changed = AgentRating.last_match_seq > (after_seq if after_seq is not None else -1)
    if after_update is not None:
        changed = changed | (Agent.updated_at > after_update)
    else:
        changed = true()
    probed = select(Probe.agent_id).where(Probe.env_id == env_id, Probe.status == "done")
    if after_probe is not None:
        probed = probed.where(Probe.finished_at > after_probe)
    changed = changed | AgentRating.agent_id.in_(probed)
    stmt = board_select().where(AgentRating.env_id == env_id, AgentRating.role == role, changed)
    return [BoardRow.from_row(row) for row in session.execute(stmt)]


def board_version(session: Session, env_id: str, role: str | None = None) -> tuple[Any, ...]:
    """A cheap marker that changes whenever a leaderboard of ``env_id`` may have changed.

    ``role`` is accepted for symmetry with :func:`board_rows`; the marker covers every
    role of the env.

    ``(newest match seq of the env, newest agent update of the env, newest finished
    probe of the env)``: ratings change
    only in the transaction that inserts a match (seq order is commit order, see
    :mod:`~arena.storage.db.repositories.matches`), statuses and names through agent updates.
    A rating rebuild rewrites ratings without either: caches must also expire by age.
    """
    newest_match = select(func.max(Match.seq)).where(Match.env_id == env_id).scalar_subquery()
    newest_agent = (
        select(func.max(Agent.updated_at)).where(Agent.env_id == env_id).scalar_subquery()
    )
    newest_probe = (
        select(func.max(Probe.finished_at)).where(Probe.env_id == env_id, Probe.status == "done").scalar_subquery()
    )
    return tuple(session.execute(select(newest_match, newest_agent, newest_probe)).one())


def head_to_head(session: Session, agent_ids: Iterable[int]) -> dict[tuple[int, int], dict[str, int]]:
    """Results of every pair of ``agent_ids`` that met on opposing teams.

    Counts every stored match (rated or not); an agent filling several seats of one
    team counts once per match.

    Returns:
        ``{(a, b): {"W": wins of a against b, "D": draws, "L": losses}}`` for every
        ordered pair that played; both ``(a, b)`` and ``(b, a)`` are present.
    """
    ids = list(set(agent_ids))
    if len(ids) < 2:
        return {}
    me, them = aliased(MatchParticipant), aliased(MatchParticipant)
    stmt = (
        select(me.agent_id, them.agent_id, me.result, func.count(distinct(me.match_seq)))
        .join(them, (them.match_seq == me.match_seq) & (them.team != me.team))
        .where(me.agent_id.in_(ids), them.agent_id.in_(ids), me.agent_id != them.agent_id)
        .group_by(me.agent_id, them.agent_id, me.result)
    )
    out: dict[tuple[int, int], dict[str, int]] = {}
    for a, b, result, count in session.execute(stmt):
        out.setdefault((a, b), {"W": 0, "D": 0, "L": 0})[result] = count
    return out
