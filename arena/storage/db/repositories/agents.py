"""Agents: one row per (env, agent key), with the lifecycle status the scheduler drives."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from arena.core.agent_status import WAITING, AgentStatus, sources_of
from arena.storage.db.base import utcnow
from arena.storage.db.models import AGENT_KINDS, Agent
from arena.storage.db.repositories.dialect import chunks, dialect_insert
from envs.errors import UnknownAgent


@dataclass(frozen=True)
class AgentInfo:
    id: int
    key: str
    env_id: str
    name: str
    owner_id: int | None
    kind: str
    status: str
    status_reason: str
    snapshot_sha256: str | None
    created_at: datetime
    updated_at: datetime
    role: str | None = None
    """The role it plays for its whole team; ``None``: every role of its env."""
    published: bool = False
    """Anyone may download its weights and spec; else only its owner and admins."""

    def plays(self, role: str) -> bool:
        """Whether this agent takes ``role``'s seats on its ladder."""
        return self.role is None or self.role == role


_INFO_COLUMNS = [getattr(Agent, f) for f in AgentInfo.__dataclass_fields__]


def get_or_create_agents(
    session: Session,
    env_id: str,
    keys: Iterable[str],
    kind: str,
    *,
    names: Mapping[str, str] | None = None,
    owner_id: int | None = None,
    status: AgentStatus | str = AgentStatus.QUEUED,
    snapshot_sha256: str | None = None,
    roles: Mapping[str, str | None] | None = None,
    reason: str = "",
) -> dict[str, int]:
    """Database ids of the agents ``keys`` in ``env_id``, creating the missing ones.

    One ``SELECT`` finds the existing agents and one ``INSERT ... ON CONFLICT DO
    NOTHING`` creates the rest; an agent created concurrently by another transaction
    is picked up by a final re-read instead of failing.

    Args:
        session: The session (the caller commits).
        env_id: Env the agents play (must be registered with ``ensure_env``).
        keys: Agent keys as they appear in match records (``heuristic:epsilon=0.3``).
        kind: ``builtin`` or ``neural``; applies to created agents only.
        names: Display name per key for created agents (default: the key).
        owner_id: Owning user of created agents.
        status: Initial status of created agents.
        snapshot_sha256: Snapshot of created agents (neural agents).
        roles: Role per key of created agents (missing: ``None``, every role).
        reason: Status reason of created agents (e.g. why a queued one waits).

    Returns:
        ``{key: agent id}`` for every requested key.
    """
    _check(kind, AGENT_KINDS, "kind")
    status = AgentStatus(status)
    wanted = list(dict.fromkeys(keys))
    ids = _agent_ids(session, env_id, wanted)
    missing = [k for k in wanted if k not in ids]
    if missing:
        names, roles = names or {}, roles or {}
        now = utcnow()
        rows = [
            {
                "key": key, "env_id": env_id, "name": names.get(key, key), "owner_id": owner_id,
                "kind": kind, "status": status.value, "status_reason": reason,
                "snapshot_sha256": snapshot_sha256, "role": roles.get(key), "created_at": now,
                "updated_at": now,
            }
            for key in missing
        ]
        table = Agent.__table__
        stmt = (
            dialect_insert(session, table)
            .on_conflict_do_nothing(index_elements=["env_id", "key"])
            .returning(table.c.key, table.c.id)
        )
        ids.update({key: id_ for key, id_ in session.execute(stmt, rows)})
        raced = [k for k in missing if k not in ids]
        if raced:
            ids.update(_agent_ids(session, env_id, raced))
    return ids


def _agent_ids(session: Session, env_id: str, keys: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for part in chunks(keys):
        stmt = select(Agent.key, Agent.id).where(Agent.env_id == env_id, Agent.key.in_(part))
        found.update({key: id_ for key, id_ in session.execute(stmt)})
    return found


def get_agent(session: Session, agent_id: int) -> AgentInfo | None:
    """The agent with database id ``agent_id``, or ``None``."""
    row = session.execute(select(*_INFO_COLUMNS).where(Agent.id == agent_id)).first()
    return None if row is None else AgentInfo(*row)


def get_agent_by_key(session: Session, env_id: str, key: str) -> AgentInfo | None:
    """The agent ``key`` of ``env_id``, or ``None``."""
    stmt = select(*_INFO_COLUMNS).where(Agent.env_id == env_id, Agent.key == key)
    row = session.execute(stmt).first()
    return None if row is None else AgentInfo(*row)


def get_agent_by_weights(session: Session, env_id: str, sha256: str, role: str) -> AgentInfo | None:
    """The agent of ``env_id`` playing ``role`` with the weights ``sha256``, or ``None``."""
    stmt = select(*_INFO_COLUMNS).where(Agent.env_id == env_id, Agent.snapshot_sha256 == sha256,
                                        (Agent.role == role) | Agent.role.is_(None)).order_by(Agent.id)
    row = session.execute(stmt).first()
    return None if row is None else AgentInfo(*row)


def list_agents(
    session: Session, env_id: str, statuses: Collection[str] | None = None
) -> list[AgentInfo]:
    """Agents of ``env_id`` (optionally only those in ``statuses``), oldest first."""
    stmt = select(*_INFO_COLUMNS).where(Agent.env_id == env_id).order_by(Agent.id)
    if statuses is not None:
        stmt = stmt.where(Agent.status.in_(list(statuses)))
    return [AgentInfo(*row) for row in session.execute(stmt)]


def waiting_agents(session: Session, env_id: str, statuses: Collection[str], limit: int = 50) -> list[AgentInfo]:
    """Agents of ``env_id`` in ``statuses`` whose status reason says what they wait for, oldest first."""
    stmt = (select(*_INFO_COLUMNS)
            .where(Agent.env_id == env_id, Agent.status.in_(list(statuses)), Agent.status_reason != "")
            .order_by(Agent.id).limit(limit))
    return [AgentInfo(*row) for row in session.execute(stmt)]


def get_agents(session: Session, agent_ids: Collection[int]) -> dict[int, AgentInfo]:
    """``{id: agent}`` for the given ids (unknown ids are left out)."""
    found: dict[int, AgentInfo] = {}
    for part in chunks(list(set(agent_ids))):
        for row in session.execute(select(*_INFO_COLUMNS).where(Agent.id.in_(part))):
            found[row.id] = AgentInfo(*row)
    return found


def agent_ids_for_keys(session: Session, env_id: str, keys: Iterable[str]) -> dict[str, int]:
    """``{key: id}`` of the existing agents ``keys`` of ``env_id`` (no creation)."""
    return _agent_ids(session, env_id, list(dict.fromkeys(keys)))


def page_agents(
    session: Session,
    *,
    env_id: str | None = None,
    owner_id: int | None = None,
    status: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[AgentInfo], int]:
    """One page of agents, newest first, and how many match the filters in all.

    Args:
        session: The session.
        env_id: Only agents of this env.
        owner_id: Only agents of this user.
        status: Only agents in this status.
        limit: Page size.
        offset: Agents to skip.

    Returns:
        ``(page, total)``.
    """
    conditions = []
    if env_id is not None:
        conditions.append(Agent.env_id == env_id)
    if owner_id is not None:
        conditions.append(Agent.owner_id == owner_id)
    if status is not None:
        conditions.append(Agent.status == status)
    total = session.execute(select(func.count()).select_from(Agent).where(*conditions)).scalar_one()
    stmt = (
        select(*_INFO_COLUMNS).where(*conditions).order_by(Agent.id.desc()).limit(limit).offset(offset)
    )
    return [AgentInfo(*row) for row in session.execute(stmt)], total


def queue_positions(
    session: Session, env_id: str, statuses: Collection[str] = WAITING
) -> dict[int, int]:
    """``{agent id: 1-based position}`` of the agents of ``env_id`` waiting in ``statuses``.

    The queue is served oldest first, so the position is the order of ids (served by
    the ``(env_id, status)`` index).
    """
    stmt = (
        select(Agent.id)
        .where(Agent.env_id == env_id, Agent.status.in_(list(statuses)))
        .order_by(Agent.id)
    )
    return {agent_id: i for i, agent_id in enumerate(session.execute(stmt).scalars(), 1)}


def set_agent_status(
    session: Session, agent_id: int, status: AgentStatus | str, reason: str = ""
) -> bool:
    """Moves an agent to ``status``, recording why (shown to its owner), if the move is allowed.

    The move is checked against the status the row has when the statement runs
    (:data:`arena.core.agent_status.TRANSITIONS`), so a concurrent change (an owner retiring
    the agent while a ladder batch finishes) is never overwritten by a stale one. An
    agent already in ``status`` with the same reason is left untouched (its
    ``updated_at`` does not move, so leaderboard caches stay valid).

    Returns:
        ``True`` if the agent now has ``status``; ``False`` if the move from its current
        status is not allowed (nothing changed).

    Raises:
        ValueError: ``status`` is not an :class:`~arena.core.agent_status.AgentStatus`.
        UnknownAgent: No agent has id ``agent_id``.
    """
    target = AgentStatus(status)
    allowed = [s.value for s in sources_of(target)]
    stmt = (
        update(Agent)
        .where(Agent.id == agent_id, Agent.status.in_(allowed),
               (Agent.status != target.value) | (Agent.status_reason != reason))
        .values(status=target.value, status_reason=reason, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    if session.execute(stmt).rowcount:
        return True
    current = session.execute(select(Agent.status).where(Agent.id == agent_id)).scalar()
    if current is None:
        raise UnknownAgent(f"no agent with id {agent_id}")
    return current == target.value


def set_agent_published(session: Session, agent_id: int, published: bool) -> None:
    """Publishes (or unpublishes) an agent's weights; ``updated_at`` moves only on a change.

    Raises:
        UnknownAgent: No agent has id ``agent_id``.
    """
    stmt = (update(Agent).where(Agent.id == agent_id, Agent.published != published)
            .values(published=published, updated_at=utcnow()).execution_options(synchronize_session=False))
    changed = session.execute(stmt).rowcount
    if not changed and session.execute(select(Agent.id).where(Agent.id == agent_id)).first() is None:
        raise UnknownAgent(f"no agent with id {agent_id}")


def agent_keys(session: Session, agent_ids: Collection[int]) -> dict[int, tuple[str, str]]:
    """``{agent id: (env_id, key)}`` for the given ids (unknown ids are left out)."""
    found: dict[int, tuple[str, str]] = {}
    for part in chunks(list(agent_ids)):
        stmt = select(Agent.id, Agent.env_id, Agent.key).where(Agent.id.in_(part))
        found.update({id_: (env, key) for id_, env, key in session.execute(stmt)})
    return found


def _check(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"agent {what} must be one of {', '.join(allowed)}; got {value!r}")

