"""Environments and leagues: the things matches and agents belong to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from arena.storage.db.models import Env, League
from arena.storage.db.repositories.dialect import dialect_insert
from envs.spec import EnvSpec


@dataclass(frozen=True)
class LeagueInfo:
    id: int
    name: str
    env_id: str
    config: dict[str, Any]
    created_at: datetime


def ensure_env(session: Session, spec: EnvSpec, rating: Mapping[str, float]) -> bool:
    """Registers the env of ``spec`` with its ladder's TrueSkill constants, if not stored yet.

    An env id is versioned (``connect_four-v3``): its spec never changes, and its
    ladder keeps the constants it started with, so an existing row is left as it is.

    Args:
        spec: The env's spec (seats and roles are stored).
        rating: ``RatingEnv.to_json()`` of the ladder's constants.

    Returns:
        Whether the env was inserted by this call.
    """
    table = Env.__table__
    stmt = (
        dialect_insert(session, table)
        .values(id=spec.env_id, spec={"seats": list(spec.seats), "roles": list(spec.roles)},
                rating=dict(rating))
        .on_conflict_do_nothing(index_elements=["id"])
        .returning(table.c.id)
    )
    return session.execute(stmt).first() is not None


def get_env_spec(session: Session, env_id: str) -> dict[str, Any] | None:
    """The stored spec of ``env_id``, or ``None`` if it was never registered."""
    return session.execute(select(Env.spec).where(Env.id == env_id)).scalar_one_or_none()


def get_env_rating(session: Session, env_id: str) -> dict[str, float] | None:
    """The stored TrueSkill constants of ``env_id``'s ladder, or ``None`` if not registered."""
    return session.execute(select(Env.rating).where(Env.id == env_id)).scalar_one_or_none()


def create_league(
    session: Session, name: str, env_id: str, config: Mapping[str, Any]
) -> int:
    """Creates a league and returns its id (raises ``IntegrityError`` on a taken name)."""
    league = League(name=name, env_id=env_id, config=dict(config))
    session.add(league)
    session.flush()
    return league.id


def get_league(session: Session, league_id: int, *, lock: bool = False) -> LeagueInfo | None:
    """The league with ``league_id``, or ``None``.

    Args:
        lock: Lock its row until the transaction ends (``SELECT ... FOR UPDATE`` on
            PostgreSQL; SQLite's write transactions are serialized anyway), for a
            read-modify-write of its config.
    """
    if lock:
        row = session.execute(select(League.id, League.name, League.env_id, League.config, League.created_at)
                              .where(League.id == league_id).with_for_update()).first()
        return None if row is None else LeagueInfo(*row)
    league = session.get(League, league_id)
    if league is None:
        return None
    return LeagueInfo(league.id, league.name, league.env_id, league.config, league.created_at)


def set_league_config(session: Session, league_id: int, config: Mapping[str, Any]) -> None:
    """Replaces a league's config (the caller read it under ``get_league(..., lock=True)``)."""
    session.execute(update(League).where(League.id == league_id).values(config=dict(config))
                    .execution_options(synchronize_session=False))


def get_league_by_name(session: Session, name: str) -> LeagueInfo | None:
    """The league called ``name``, or ``None``."""
    league = session.execute(select(League).where(League.name == name)).scalar_one_or_none()
    if league is None:
        return None
    return LeagueInfo(league.id, league.name, league.env_id, league.config, league.created_at)
