"""The tournaments table (migration 0013_tournaments).

A tournament stores only what :func:`league.competitions.tournaments.tournament` needs to
recompute it: its seeded field (``entrants``, agent ids best seed first), its format
(``kind``, ``games`` per mini-match, Swiss ``rounds``, ``seed``) and its state. Its games
are ordinary rows of the match log with ``board = tournament:<id>`` and ``rated = false``
(never rated on the env's ladder; they replay like any match), whose ids are fixed by the
tournament, the round, the table and the game: the results, the rounds and the standings
are derived from them.

Imported by :mod:`arena.storage.db.models` so that every table is on one metadata.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, CheckConstraint, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from arena.storage.db.base import Base, UTCDateTime, created_at_column, one_of

TOURNAMENT_STATES = ("running", "finished", "failed")
TOURNAMENT_KINDS = ("round_robin", "double_round_robin", "swiss", "single_elimination")


class Tournament(Base):
    """A tournament among chosen agents of one env, played by the background service."""

    __tablename__ = "tournaments"
    __table_args__ = (
        CheckConstraint(one_of("state", TOURNAMENT_STATES), name="state"),
        CheckConstraint(one_of("kind", TOURNAMENT_KINDS), name="kind"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    env_id: Mapped[str] = mapped_column(ForeignKey("envs.id"))
    # The competition it belongs to (its page links it; a private one's tournaments are as private).
    competition_id: Mapped[int | None] = mapped_column(ForeignKey("competitions.id", ondelete="CASCADE"),
                                                       index=True)
    title: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(32))
    # M: games per mini-match (seats alternated, one seed per game).
    games: Mapped[int] = mapped_column()
    # Swiss: its rounds (NULL: ceil(log2 n)).
    rounds: Mapped[int | None] = mapped_column()
    seed: Mapped[int] = mapped_column(BigInteger())
    # Agent ids, best seed first.
    entrants: Mapped[list[Any]] = mapped_column(JSON())
    state: Mapped[str] = mapped_column(String(16), default="running", server_default="running")
    error: Mapped[str] = mapped_column(Text(), default="", server_default="")
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = created_at_column()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
