"""A training league's strategy timeline: phase rates and ratings per generation, and its exploiters'."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from arena.storage.db.base import utcnow
from arena.storage.db.models import League, LeagueGeneration
from arena.storage.db.repositories.catalog import LeagueInfo
from arena.storage.db.repositories.dialect import dialect_insert


@dataclass(frozen=True)
class GenerationRow:
    """One generation of a league's timeline."""

    generation: int
    episodes: int
    phase_rates: dict[str, float]
    ratings: dict[str, list[float]]
    first_matches: dict[str, str]
    exploiters: list[dict[str, Any]] = field(default_factory=list)
    """apart from the mains: per exploiter ``role``, ``index``, ``score``, ``edge``, ``snapshot``
    (the key it was frozen as, or ``None``) and ``reset``"""


def replace_generations(session: Session, league_id: int, rows: Sequence[Mapping[str, Any]]) -> int:
    """Writes the league's whole timeline (rows: the fields of :class:`GenerationRow`; no
    ``exploiters``: none).

    The timeline is derived from the trainer's state, so it is rewritten as a whole:
    generations no longer in ``rows`` are deleted, the others upserted.

    Returns:
        The number of rows written.
    """
    table = LeagueGeneration.__table__
    keep = [int(r["generation"]) for r in rows]
    session.execute(delete(LeagueGeneration).where(LeagueGeneration.league_id == league_id,
                                                   LeagueGeneration.generation.not_in(keep)))
    if not rows:
        return 0
    now = utcnow()
    values = [{"league_id": league_id, "generation": int(r["generation"]), "episodes": int(r["episodes"]),
               "phase_rates": dict(r["phase_rates"]), "ratings": dict(r["ratings"]),
               "first_matches": dict(r["first_matches"]),
               "exploiters": [dict(e) for e in r.get("exploiters", ())], "updated_at": now} for r in rows]
    stmt = dialect_insert(session, table)
    stmt = stmt.on_conflict_do_update(
        index_elements=["league_id", "generation"],
        set_={c: stmt.excluded[c]
              for c in ("episodes", "phase_rates", "ratings", "first_matches", "exploiters", "updated_at")})
    session.execute(stmt, values)
    return len(values)


def league_generations(session: Session, league_id: int) -> list[GenerationRow]:
    """The league's timeline in generation order (empty if it has none)."""
    rows = session.execute(
        select(LeagueGeneration).where(LeagueGeneration.league_id == league_id)
        .order_by(LeagueGeneration.generation)).scalars()
    return [GenerationRow(r.generation, r.episodes, dict(r.phase_rates), dict(r.ratings), dict(r.first_matches),
                          [dict(e) for e in r.exploiters or ()])
            for r in rows]


def list_leagues(session: Session, env_id: str | None = None) -> list[LeagueInfo]:
    """Every league (of ``env_id`` when given), newest first."""
    stmt = select(League).order_by(League.id.desc())
    if env_id is not None:
        stmt = stmt.where(League.env_id == env_id)
    return [LeagueInfo(x.id, x.name, x.env_id, x.config, x.created_at) for x in session.execute(stmt).scalars()]
