"""Tournaments: their rows, and the results of their games from the match log.

A tournament's games are matches on the board ``tournament:<id>`` (``rated = false``);
:func:`game_results` reads what the rounds are derived from: each stored game's id and
the score of its seat 0.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from arena.storage.db.models import Match
from arena.storage.db.repositories.dialect import insert_row
from arena.storage.db.tournament_models import Tournament


@dataclass(frozen=True)
class TournamentInfo:
    id: int
    env_id: str
    competition_id: int | None
    title: str
    kind: str
    games: int
    rounds: int | None
    seed: int
    entrants: list[int]
    state: str
    error: str
    created_by: int | None
    created_at: datetime
    finished_at: datetime | None


_COLUMNS = [getattr(Tournament, f.name) for f in fields(TournamentInfo)]


def create_tournament(session: Session, values: Mapping[str, Any]) -> int:
    """Stores a tournament (``values``: its columns); returns its id."""
    return insert_row(session, Tournament(**values))


def get_tournament(session: Session, tournament_id: int) -> TournamentInfo | None:
    row = session.execute(select(*_COLUMNS).where(Tournament.id == tournament_id)).first()
    return None if row is None else TournamentInfo(*row)


def tournaments(session: Session, *, competition_id: int | None = None, standalone: bool = False,
                states: Collection[str] | None = None, limit: int = 200) -> list[TournamentInfo]:
    """Tournaments newest first: of ``competition_id``, or those of no competition (``standalone``),
    or all; only in ``states`` if given."""
    stmt = select(*_COLUMNS).order_by(Tournament.id.desc()).limit(limit)
    if competition_id is not None:
        stmt = stmt.where(Tournament.competition_id == competition_id)
    elif standalone:
        stmt = stmt.where(Tournament.competition_id.is_(None))
    if states is not None:
        stmt = stmt.where(Tournament.state.in_(list(states)))
    return [TournamentInfo(*row) for row in session.execute(stmt)]


def end_tournament(session: Session, tournament_id: int, state: str, error: str = "") -> bool:
    """``running -> state`` (finished or failed); ``False`` if it was not running (already ended)."""
    done = session.execute(update(Tournament).where(Tournament.id == tournament_id, Tournament.state == "running")
                           .values(state=state, error=error[:2000], finished_at=func.current_timestamp()))
    return done.rowcount == 1


def game_results(session: Session, board: str) -> dict[str, float]:
    """``{match id: seat 0's score}`` (1 win, 1/2 draw, 0 loss) of the matches on ``board``."""
    rows = session.execute(select(Match.id, Match.winner).where(Match.board == board))
    return {match_id: 0.5 if winner is None else (1.0 if winner == 0 else 0.0) for match_id, winner in rows}
