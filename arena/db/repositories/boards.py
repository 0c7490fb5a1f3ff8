"""Read models of leaderboards and payoff matrices (the HTTP API's heavy reads).

A board is read whole once and then kept current from two cheap markers (see
``arena.api.boards``): :func:`board_version` says whether anything may have changed
and :func:`board_changes` returns only the rows that did.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Select, distinct, func, select, true
from sqlalchemy.orm import Session, aliased

from arena.db.models import Agent, AgentRating, Match, MatchParticipant
from arena.db.repositories.dialect import IN_CHUNK, chunks


class BoardRow(NamedTuple):
    """One agent on a leaderboard (a tuple: boards of 10,000 agents are built often)."""

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
    last_match_seq: int | None
    last_match_at: datetime | None


def board_select() -> Select:
    """The columns of a :class:`BoardRow`: an agent's rating in one role joined to the agent,
    and the time of its last match (a primary-key lookup per row returned)."""
    last_match_at = select(Match.created_at).where(Match.seq == AgentRating.last_match_seq)
    return select(
        AgentRating.agent_id, Agent.key, Agent.name, Agent.kind, Agent.status,
        AgentRating.mu, AgentRating.sigma, AgentRating.conservative, AgentRating.games,
        AgentRating.wins, AgentRating.draws, AgentRating.losses, AgentRating.last_match_seq,
        last_match_at.scalar_subquery(),
    ).join(Agent, Agent.id == AgentRating.agent_id)


def board_order(row: BoardRow) -> tuple[float, int]:
    """Sort key of a board: best conservative rating first, the older agent on ties."""
    return (-row.conservative, row.agent_id)


def board_rows(
    session: Session,
    env_id: str,
    role: str,
    exclude_statuses: Collection[str] = (),
    agent_ids: Collection[int] | None = None,
) -> list[BoardRow]:
    """Every agent rated in ``role`` of ``env_id``, best conservative rating first.

    One index range scan plus the agents' rows: the whole board in one statement (the
    API pages and ranks it in memory, and caches it; see ``arena.api.boards``).

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
    return [BoardRow(*row) for row in session.execute(stmt)]


def board_changes(
    session: Session, env_id: str, role: str, after_seq: int | None, after_update: datetime | None
) -> list[BoardRow]:
    """Board rows that may differ from a version read earlier (see :func:`board_version`).

    The rows of agents rated in a later match or updated since, *whatever their status*
    (a retired agent's row tells the caller to drop it). One statement, so refreshing
    a cached board costs about as many rows as changed.

    Args:
        after_seq: The version's newest match seq (``None``: there were no matches).
        after_update: The version's newest agent update (``None``: there were no agents).
    """
    changed = AgentRating.last_match_seq > (after_seq if after_seq is not None else -1)
    if after_update is not None:
        changed = changed | (Agent.updated_at > after_update)
    else:
        changed = true()
    stmt = board_select().where(AgentRating.env_id == env_id, AgentRating.role == role, changed)
    return [BoardRow(*row) for row in session.execute(stmt)]


def board_version(session: Session, env_id: str, role: str | None = None) -> tuple[Any, ...]:
    """A cheap marker that changes whenever a leaderboard of ``env_id`` may have changed.

    ``role`` is accepted for symmetry with :func:`board_rows`; the marker covers every
    role of the env.

    ``(newest match seq of the env, newest agent update of the env)``: ratings change
    only in the transaction that inserts a match (seq order is commit order, see
    :mod:`~arena.db.repositories.matches`), statuses and names through agent updates.
    A rating rebuild rewrites ratings without either: caches must also expire by age.
    """
    newest_match = select(func.max(Match.seq)).where(Match.env_id == env_id).scalar_subquery()
    newest_agent = (
        select(func.max(Agent.updated_at)).where(Agent.env_id == env_id).scalar_subquery()
    )
    return tuple(session.execute(select(newest_match, newest_agent)).one())


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
