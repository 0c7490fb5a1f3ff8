"""Exploitability probes: queued, claimed by the probe service, finished or failed."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from arena.storage.db.base import utcnow
from arena.storage.db.models import Agent, Probe

PROBE_FIELDS = ("id", "agent_id", "env_id", "budget_env_steps", "eval_games", "seed", "status", "requested_by",
                "env_steps", "games", "wins", "draws", "losses", "win_rate", "ci_low", "ci_high", "error",
                "created_at", "started_at", "finished_at")


@dataclass(frozen=True)
class ProbeInfo:
    """One probe row, as plain values."""

    id: int
    agent_id: int
    env_id: str
    budget_env_steps: int
    eval_games: int
    seed: int
    status: str
    requested_by: str
    env_steps: int
    games: int | None
    wins: int | None
    draws: int | None
    losses: int | None
    win_rate: float | None
    ci_low: float | None
    ci_high: float | None
    error: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def _select() -> Any:
    return select(*(getattr(Probe, f) for f in PROBE_FIELDS))


def _info(row: Any) -> ProbeInfo:
    return ProbeInfo(**{f: getattr(row, f) for f in PROBE_FIELDS})


PROBE_QUEUE_LOCK = 0x6172656E612E7071
"""pg_advisory_xact_lock key of the writers of new probes ("arena.pq" as a 64-bit int)."""


def lock_probe_queue(session: Session) -> None:
    """Serialise the transactions that queue probes, until this one ends, so that the counts
    that gate a new probe (per user queued and per day, the queue's size, one per agent and
    budget) are exact when requests race. PostgreSQL: a transaction-scoped advisory lock;
    SQLite: nothing to do (write transactions begin ``IMMEDIATE``: one writer at a time)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PROBE_QUEUE_LOCK})


def add_probe(session: Session, agent_id: int, env_id: str, budget_env_steps: int, eval_games: int,
              seed: int, requested_by: str = "") -> int:
    """Queue a probe; returns its id."""
    probe = Probe(agent_id=agent_id, env_id=env_id, budget_env_steps=budget_env_steps, eval_games=eval_games,
                  seed=seed, requested_by=requested_by[:64])
    session.add(probe)
    session.flush()
    return probe.id


def get_probe(session: Session, probe_id: int) -> ProbeInfo | None:
    row = session.execute(_select().where(Probe.id == probe_id)).first()
    return None if row is None else _info(row)


def agent_probes(session: Session, agent_id: int, limit: int = 50) -> list[ProbeInfo]:
    """An agent's probes, newest first."""
    rows = session.execute(_select().where(Probe.agent_id == agent_id).order_by(Probe.id.desc()).limit(limit))
    return [_info(r) for r in rows]


def latest_probes(session: Session, agent_ids: Collection[int]) -> dict[int, ProbeInfo]:
    """Each agent's newest finished probe (``done``), for leaderboard columns."""
    if not agent_ids:
        return {}
    newest = (select(func.max(Probe.id)).where(Probe.agent_id.in_(list(agent_ids)), Probe.status == "done")
              .group_by(Probe.agent_id))
    rows = session.execute(_select().where(Probe.id.in_(newest)))
    return {r.agent_id: _info(r) for r in rows}


def probes_by_status(session: Session, status: str, limit: int | None = None) -> list[ProbeInfo]:
    """Probes in ``status``, oldest first."""
    stmt = _select().where(Probe.status == status).order_by(Probe.id)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [_info(r) for r in session.execute(stmt)]


def probe_at_budget(session: Session, agent_id: int, budget_env_steps: int) -> ProbeInfo | None:
    """The agent's newest probe at ``budget_env_steps`` that did not fail (queued, running or
    done), whatever its seed: at one budget an agent has one probe."""
    row = session.execute(_select().where(Probe.agent_id == agent_id, Probe.budget_env_steps == budget_env_steps,
                                          Probe.status != "failed").order_by(Probe.id.desc()).limit(1)).first()
    return None if row is None else _info(row)


def count_requested_probes(session: Session, requested_by: str, *, open_only: bool = False,
                           since: datetime | None = None) -> int:
    """Probes ``requested_by`` asked for: only queued or running ones (``open_only``), or
    those created at or after ``since``."""
    stmt = select(func.count()).select_from(Probe).where(Probe.requested_by == requested_by[:64])
    if open_only:
        stmt = stmt.where(Probe.status.in_(("queued", "running")))
    if since is not None:
        stmt = stmt.where(Probe.created_at >= since)
    return int(session.execute(stmt).scalar_one())


def last_started(session: Session, requesters: Collection[str]) -> dict[str, datetime | None]:
    """When a probe of each requester last started (``None``: never), for serving them in turn."""
    rows = session.execute(select(Probe.requested_by, func.max(Probe.started_at))
                           .where(Probe.requested_by.in_(list(requesters))).group_by(Probe.requested_by))
    started: dict[str, datetime | None] = dict.fromkeys(requesters)
    started.update({r[0]: r[1] for r in rows})
    return started


def count_open_probes(session: Session) -> int:
    """Probes queued or running."""
    return int(session.execute(select(func.count()).select_from(Probe)
                               .where(Probe.status.in_(("queued", "running")))).scalar_one())


def unprobed_agents(session: Session, env_ids: Collection[str], statuses: Collection[str],
                    kinds: Collection[str], limit: int, *, owned: bool = False) -> list[tuple[int, str]]:
    """``(agent id, env)`` of agents in ``statuses`` that never had a probe, oldest first
    (``owned``: only agents a user submitted)."""
    probed = select(Probe.agent_id)
    stmt = (select(Agent.id, Agent.env_id)
            .where(Agent.env_id.in_(list(env_ids)), Agent.status.in_(list(statuses)),
                   Agent.kind.in_(list(kinds)), Agent.id.not_in(probed),
                   *([Agent.owner_id.is_not(None)] if owned else []))
            .order_by(Agent.id).limit(limit))
    return [(int(r.id), r.env_id) for r in session.execute(stmt)]


def claim_probe(session: Session, probe_id: int) -> bool:
    """Move a queued probe to ``running``; ``False`` if it was not queued any more."""
    result = session.execute(update(Probe).where(Probe.id == probe_id, Probe.status == "queued")
                             .values(status="running", started_at=utcnow(), env_steps=0))
    return bool(result.rowcount)


def set_probe_progress(session: Session, probe_id: int, env_steps: int) -> None:
    session.execute(update(Probe).where(Probe.id == probe_id, Probe.status == "running")
                    .values(env_steps=env_steps))


def finish_probe(session: Session, probe_id: int, result: Mapping[str, Any]) -> None:
    """Store a probe's result (``ProbeResult.to_dict()`` fields) and mark it ``done``."""
    session.execute(update(Probe).where(Probe.id == probe_id).values(
        status="done", finished_at=utcnow(), error="",
        **{k: result[k] for k in ("env_steps", "games", "wins", "draws", "losses", "win_rate", "ci_low",
                                  "ci_high")}))


def fail_probe(session: Session, probe_id: int, error: str) -> None:
    session.execute(update(Probe).where(Probe.id == probe_id)
                    .values(status="failed", finished_at=utcnow(), error=error[:2000]))


def requeue_running_probes(session: Session) -> int:
    """Probes left ``running`` by a stopped service go back to the queue; returns how many."""
    result = session.execute(update(Probe).where(Probe.status == "running")
                             .values(status="queued", started_at=None, env_steps=0))
    return int(result.rowcount or 0)
