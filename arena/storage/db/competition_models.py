"""The competition tables: competitions, organizers, members, teams, entries, reference
agents, and the ratings of boards other than the env ladders (migration 0011_competitions).

A competition's entries are ordinary agents of its env (``agents``); an entry row tags one
with the competition and the team that submitted it. Its matches are ordinary rows of the
match log whose ``board`` names the board that rates them (``competition:<id>`` for the
season, ``competition:<id>:final`` for the final evaluation); they are stored with
``rated = false`` because ``rated`` means rated on the env's own ladder, which they never
move. A board's ratings live in ``board_ratings``: derived from its matches in ``seq``
order with the same rating code as the ladders, and rebuilt from them.

Imported by :mod:`arena.storage.db.models` so that every table is on one metadata.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from arena.storage.db.base import Base, RatingColumns, UTCDateTime, created_at_column, one_of, utcnow

COMPETITION_STATES = ("draft", "open", "final", "finished")
SUBMISSION_PATHS = ("weights", "onnx", "connected")
BOARD_KEY = String(64)


class Competition(Base):
    """A season on one env (and role) with a deadline, then a final evaluation.

    Settings are frozen once it opens, except the dates, which may only be extended
    before the deadline (:mod:`arena.competitions.rules`).
    """

    __tablename__ = "competitions"
    __table_args__ = (
        CheckConstraint(one_of("state", COMPETITION_STATES), name="state"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    env_id: Mapped[str] = mapped_column(ForeignKey("envs.id"), index=True)
    # The role entries play (role envs); NULL: the env's one role.
    role: Mapped[str | None] = mapped_column(String(32))
    title: Mapped[str] = mapped_column(String(200))
    rules_md: Mapped[str] = mapped_column(Text(), default="", server_default="")
    state: Mapped[str] = mapped_column(String(16), default="draft", server_default="draft")
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    is_public: Mapped[bool] = mapped_column(default=True, server_default=true())
    # Joining a private competition takes this code (NULL: public).
    invite_code: Mapped[str | None] = mapped_column(String(32), unique=True)
    opens_at: Mapped[datetime] = mapped_column(UTCDateTime())
    deadline: Mapped[datetime] = mapped_column(UTCDateTime())
    # When the final evaluation stops at the latest; NULL: until certified (or the budget is spent).
    final_ends_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    final_match_budget: Mapped[int] = mapped_column(BigInteger())
    daily_submissions: Mapped[int] = mapped_column()
    active_entries: Mapped[int] = mapped_column()
    team_size: Mapped[int] = mapped_column()
    merge_deadline: Mapped[datetime] = mapped_column(UTCDateTime())
    allowed_paths: Mapped[list[Any]] = mapped_column(JSON())
    top_k: Mapped[int] = mapped_column()
    confidence: Mapped[float] = mapped_column(Float())
    tie_margin: Mapped[float] = mapped_column(Float())
    final_floor: Mapped[int] = mapped_column()
    # Master seed of the competition's matches (the final evaluation's schedule and seeds).
    seed: Mapped[int] = mapped_column(BigInteger())
    created_at: Mapped[datetime] = created_at_column()
    final_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The frozen standings and certificate (league.competitions.certification.Certificate.to_json).
    final_result: Mapped[dict[str, Any] | None] = mapped_column(JSON())
    # Divisions with bosses, bottom to top: [{"name": ..., "boss": agent id or null (the top)}];
    # NULL: one board without divisions (migration 0014_divisions).
    divisions: Mapped[list[Any] | None] = mapped_column(JSON())


class CompetitionOrganizer(Base):
    """A user an admin made an organizer: may create competitions (admins always may)."""

    __tablename__ = "competition_organizers"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True,
                                         autoincrement=False)
    granted_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = created_at_column()


class CompetitionMember(Base):
    """A user who joined a competition (by its invite code when private)."""

    __tablename__ = "competition_members"

    competition_id: Mapped[int] = mapped_column(ForeignKey("competitions.id", ondelete="CASCADE"),
                                                primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True,
                                         index=True)
    joined_at: Mapped[datetime] = created_at_column()


class Team(Base):
    """A team of one competition; ``merged_into``: the team it merged into (then it has no members)."""

    __tablename__ = "competition_teams"
    __table_args__ = (UniqueConstraint("competition_id", "name"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(primary_key=True)
    competition_id: Mapped[int] = mapped_column(ForeignKey("competitions.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    join_code: Mapped[str] = mapped_column(String(32), unique=True)
    created_at: Mapped[datetime] = created_at_column()
    merged_into: Mapped[int | None] = mapped_column(ForeignKey("competition_teams.id", ondelete="SET NULL"))


class TeamMember(Base):
    """A user's team in a competition: one team per user per competition (the primary key)."""

    __tablename__ = "competition_team_members"

    competition_id: Mapped[int] = mapped_column(ForeignKey("competitions.id", ondelete="CASCADE"),
                                                primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("competition_teams.id", ondelete="CASCADE"), index=True)
    joined_at: Mapped[datetime] = created_at_column()


class Entry(Base):
    """An agent submitted to a competition by a team.

    ``active``: among the team's latest ``active_entries`` submissions (they play on the
    season board); ``frozen``: in the final evaluation's pool (set at the deadline, never
    cleared).
    """

    __tablename__ = "competition_entries"
    __table_args__ = (
        UniqueConstraint("competition_id", "agent_id"),
        Index("ix_competition_entries_team_id_submitted_at", "team_id", "submitted_at"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    competition_id: Mapped[int] = mapped_column(ForeignKey("competitions.id", ondelete="CASCADE"))
    team_id: Mapped[int] = mapped_column(ForeignKey("competition_teams.id", ondelete="CASCADE"))
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    submitted_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    active: Mapped[bool] = mapped_column(default=True, server_default=true())
    frozen: Mapped[bool] = mapped_column(default=False, server_default=false())
    # Its division (0: the bottom); only ever moves up (league.competitions.divisions.place).
    division: Mapped[int] = mapped_column(default=0, server_default="0")


class ReferenceAgent(Base):
    """A baseline every entry must beat: on the season board and shown there, never ranked as an entry."""

    __tablename__ = "competition_references"

    competition_id: Mapped[int] = mapped_column(ForeignKey("competitions.id", ondelete="CASCADE"),
                                                primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)


class BoardRating(RatingColumns, Base):
    """An agent's current rating in one role on a board other than its env's ladder (derived
    from the matches whose ``board`` is ``board``)."""

    __tablename__ = "board_ratings"
    __table_args__ = (
        Index("ix_board_ratings_board_role_conservative", "board", "role", "conservative"),
    )

    board: Mapped[str] = mapped_column(BOARD_KEY, primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True,
                                          autoincrement=False)
