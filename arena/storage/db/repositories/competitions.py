"""Competitions, teams, entries and reference agents; the ratings of boards beside the env ladders.

Counts that gate a write (a team's submissions today, its members) are read after the
team's row is locked (:func:`lock_team`: ``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's
write transactions are ``BEGIN IMMEDIATE``, one writer at a time), so two requests can
never both pass the same check. One team per user per competition is the primary key of
``competition_team_members``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, func, or_, select, update
from sqlalchemy.orm import Session

from arena.storage.db.competition_models import (
    BoardRating,
    Competition,
    CompetitionMember,
    CompetitionOrganizer,
    Entry,
    ReferenceAgent,
    Team,
    TeamMember,
)
from arena.storage.db.models import Agent
from arena.storage.db.repositories.dialect import chunks, dialect_insert, insert_row
from arena.storage.db.repositories.ratings import CONSERVATIVE_SIGMAS, StoredRating


@dataclass(frozen=True)
class CompetitionInfo:
    id: int
    env_id: str
    role: str | None
    title: str
    rules_md: str
    state: str
    created_by: int | None
    is_public: bool
    invite_code: str | None
    opens_at: datetime
    deadline: datetime
    final_ends_at: datetime | None
    final_match_budget: int
    daily_submissions: int
    active_entries: int
    team_size: int
    merge_deadline: datetime
    allowed_paths: list[str]
    top_k: int
    confidence: float
    tie_margin: float
    final_floor: int
    seed: int
    created_at: datetime
    final_started_at: datetime | None
    finished_at: datetime | None
    final_result: dict[str, Any] | None
    divisions: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class TeamInfo:
    id: int
    competition_id: int
    name: str
    join_code: str
    created_at: datetime
    merged_into: int | None


@dataclass(frozen=True)
class EntryInfo:
    id: int
    competition_id: int
    team_id: int
    agent_id: int
    submitted_by: int | None
    submitted_at: datetime
    active: bool
    frozen: bool
    division: int = 0


def _columns(model: type, info: type) -> list[Any]:
    return [getattr(model, f.name) for f in fields(info)]


_COMPETITION = _columns(Competition, CompetitionInfo)
_TEAM = _columns(Team, TeamInfo)
_ENTRY = _columns(Entry, EntryInfo)


# -- competitions -----------------------------------------------------------------------
def create_competition(session: Session, values: Mapping[str, Any]) -> int:
    """Stores a competition (``values``: its columns); returns its id."""
    return insert_row(session, Competition(**values))


def get_competition(session: Session, competition_id: int, *, lock: bool = False) -> CompetitionInfo | None:
    """The competition, or ``None``; ``lock``: ``FOR UPDATE`` (writers of its state)."""
    stmt = select(*_COMPETITION).where(Competition.id == competition_id)
    row = session.execute(stmt.with_for_update() if lock else stmt).first()
    return None if row is None else CompetitionInfo(*row)


def competition_by_invite(session: Session, code: str) -> CompetitionInfo | None:
    """The private competition whose invite code is ``code``."""
    row = session.execute(select(*_COMPETITION).where(Competition.invite_code == code)).first()
    return None if row is None else CompetitionInfo(*row)


def _visible(user_id: int | None, is_admin: bool) -> Any:
    """Where-clause: the competitions ``user_id`` may see (public, theirs, or joined)."""
    if is_admin:
        return True
    if user_id is None:
        return Competition.is_public.is_(True)
    member = exists().where(CompetitionMember.competition_id == Competition.id, CompetitionMember.user_id == user_id)
    return or_(Competition.is_public.is_(True), Competition.created_by == user_id, member)


def page_competitions(session: Session, *, user_id: int | None, is_admin: bool, state: str | None = None,
                      limit: int = 50, offset: int = 0) -> tuple[list[CompetitionInfo], int]:
    """The competitions ``user_id`` may see, newest first, and how many there are."""
    where = [_visible(user_id, is_admin)]
    if state is not None:
        where.append(Competition.state == state)
    total = session.execute(select(func.count()).select_from(Competition).where(*where)).scalar_one()
    stmt = select(*_COMPETITION).where(*where).order_by(Competition.id.desc()).limit(limit).offset(offset)
    return [CompetitionInfo(*row) for row in session.execute(stmt)], total


def competitions_in(session: Session, states: Collection[str]) -> list[CompetitionInfo]:
    """Every competition in one of ``states``, oldest first (the background service's work)."""
    stmt = select(*_COMPETITION).where(Competition.state.in_(list(states))).order_by(Competition.id)
    return [CompetitionInfo(*row) for row in session.execute(stmt)]


def update_competition(session: Session, competition_id: int, values: Mapping[str, Any]) -> None:
    """Writes ``values`` (columns) to the competition."""
    if values:
        session.execute(update(Competition).where(Competition.id == competition_id).values(**values))


# -- organizers and members -------------------------------------------------------------
def is_organizer(session: Session, user_id: int) -> bool:
    return session.get(CompetitionOrganizer, user_id) is not None


def grant_organizer(session: Session, user_id: int, granted_by: str) -> None:
    """Make ``user_id`` an organizer (again: no change)."""
    insert = dialect_insert(session, CompetitionOrganizer.__table__)
    session.execute(insert.on_conflict_do_nothing(index_elements=["user_id"]),
                    {"user_id": user_id, "granted_by": granted_by})


def add_member(session: Session, competition_id: int, user_id: int) -> None:
    """``user_id`` joins the competition (again: no change)."""
    insert = dialect_insert(session, CompetitionMember.__table__)
    session.execute(insert.on_conflict_do_nothing(index_elements=["competition_id", "user_id"]),
                    {"competition_id": competition_id, "user_id": user_id})


def is_member(session: Session, competition_id: int, user_id: int) -> bool:
    stmt = select(CompetitionMember.user_id).where(CompetitionMember.competition_id == competition_id,
                                                   CompetitionMember.user_id == user_id)
    return session.execute(stmt).first() is not None


# -- teams -------------------------------------------------------------------------------
def create_team(session: Session, competition_id: int, name: str, join_code: str) -> int:
    """A new team; ``IntegrityError`` when the name is taken in the competition."""
    return insert_row(session, Team(competition_id=competition_id, name=name, join_code=join_code))


def get_team(session: Session, team_id: int) -> TeamInfo | None:
    row = session.execute(select(*_TEAM).where(Team.id == team_id)).first()
    return None if row is None else TeamInfo(*row)


def lock_team(session: Session, team_id: int) -> TeamInfo | None:
    """The team, its row locked until the transaction ends (every gated write of a team takes it first)."""
    row = session.execute(select(*_TEAM).where(Team.id == team_id).with_for_update()).first()
    return None if row is None else TeamInfo(*row)


def team_by_code(session: Session, join_code: str) -> TeamInfo | None:
    row = session.execute(select(*_TEAM).where(Team.join_code == join_code)).first()
    return None if row is None else TeamInfo(*row)


def team_of(session: Session, competition_id: int, user_id: int) -> TeamInfo | None:
    """``user_id``'s team in the competition, or ``None``."""
    stmt = (select(*_TEAM).join(TeamMember, TeamMember.team_id == Team.id)
            .where(TeamMember.competition_id == competition_id, TeamMember.user_id == user_id))
    row = session.execute(stmt).first()
    return None if row is None else TeamInfo(*row)


def teams(session: Session, competition_id: int) -> list[TeamInfo]:
    """The competition's teams (merged ones included), oldest first."""
    stmt = select(*_TEAM).where(Team.competition_id == competition_id).order_by(Team.id)
    return [TeamInfo(*row) for row in session.execute(stmt)]


def add_team_member(session: Session, competition_id: int, team_id: int, user_id: int) -> None:
    """``user_id`` joins ``team_id``; ``IntegrityError`` when already in a team of the competition."""
    session.add(TeamMember(competition_id=competition_id, team_id=team_id, user_id=user_id))
    session.flush()


def team_members(session: Session, team_ids: Collection[int]) -> dict[int, list[int]]:
    """``{team id: [user ids]}`` in joining order."""
    found: dict[int, list[int]] = {t: [] for t in team_ids}
    for part in chunks(list(set(team_ids))):
        stmt = (select(TeamMember.team_id, TeamMember.user_id).where(TeamMember.team_id.in_(part))
                .order_by(TeamMember.joined_at, TeamMember.user_id))
        for team_id, user_id in session.execute(stmt):
            found[team_id].append(user_id)
    return found


def merge_teams(session: Session, into: int, other: int) -> None:
    """Move ``other``'s members and entries to ``into``; ``other`` keeps its name, marked merged."""
    session.execute(update(TeamMember).where(TeamMember.team_id == other).values(team_id=into))
    session.execute(update(Entry).where(Entry.team_id == other).values(team_id=into))
    session.execute(update(Team).where(Team.id == other).values(merged_into=into))


# -- entries -----------------------------------------------------------------------------
def add_entry(session: Session, competition_id: int, team_id: int, agent_id: int, submitted_by: int | None,
              submitted_at: datetime) -> int:
    return insert_row(session, Entry(competition_id=competition_id, team_id=team_id, agent_id=agent_id,
                                     submitted_by=submitted_by, submitted_at=submitted_at, active=True))


def count_entries(session: Session, team_id: int, since: datetime | None = None) -> int:
    """The team's submissions (since ``since``), merged teams' history included."""
    stmt = select(func.count()).select_from(Entry).where(Entry.team_id == team_id)
    if since is not None:
        stmt = stmt.where(Entry.submitted_at >= since)
    return session.execute(stmt).scalar_one()


UNCOUNTED = ("rejected", "retired")
"""Agent statuses whose entries never count as active (a failed or withdrawn submission)."""


def active_changes(session: Session, competition_id: int, keep: int,
                   team_id: int | None = None) -> dict[int, bool]:
    """Entries whose ``active`` flag is stale (entry id -> what it should be): per team, the ``keep``
    latest whose agent is not rejected or retired are active (ties: the later id), the rest not."""
    stmt = (select(Entry.id, Entry.team_id, Entry.active, Agent.status).join(Agent, Agent.id == Entry.agent_id)
            .where(Entry.competition_id == competition_id)
            .order_by(Entry.team_id, Entry.submitted_at.desc(), Entry.id.desc()))
    if team_id is not None:
        stmt = stmt.where(Entry.team_id == team_id)
    counted: dict[int, int] = {}
    changes: dict[int, bool] = {}
    for entry_id, team, active, status in session.execute(stmt):
        wanted = status not in UNCOUNTED and counted.get(team, 0) < keep
        counted[team] = counted.get(team, 0) + wanted
        if wanted != active:
            changes[entry_id] = wanted
    return changes


def set_active(session: Session, changes: Mapping[int, bool]) -> None:
    """Write :func:`active_changes`' result."""
    for flag in (True, False):
        ids = [e for e, wanted in changes.items() if wanted is flag]
        for part in chunks(ids):
            session.execute(update(Entry).where(Entry.id.in_(part)).values(active=flag))


def keep_latest_active(session: Session, competition_id: int, team_id: int, keep: int) -> None:
    """Bring the team's ``active`` flags up to date (:func:`active_changes`)."""
    set_active(session, active_changes(session, competition_id, keep, team_id))


def entries(session: Session, competition_id: int, *, team_id: int | None = None, active: bool | None = None,
            frozen: bool | None = None) -> list[EntryInfo]:
    """The competition's entries, oldest first."""
    where = [Entry.competition_id == competition_id]
    if team_id is not None:
        where.append(Entry.team_id == team_id)
    if active is not None:
        where.append(Entry.active.is_(active))
    if frozen is not None:
        where.append(Entry.frozen.is_(frozen))
    stmt = select(*_ENTRY).where(*where).order_by(Entry.id)
    return [EntryInfo(*row) for row in session.execute(stmt)]


def set_divisions(session: Session, competition_id: int, divisions: Mapping[int, int]) -> None:
    """Move entries (agent id -> division index) to their new divisions."""
    for agent_id, division in divisions.items():
        session.execute(update(Entry).where(Entry.competition_id == competition_id, Entry.agent_id == agent_id)
                        .values(division=division))


def freeze_entries(session: Session, competition_id: int, agent_ids: Collection[int]) -> None:
    """Mark the final evaluation's pool (never cleared)."""
    for part in chunks(list(agent_ids)):
        session.execute(update(Entry).where(Entry.competition_id == competition_id, Entry.agent_id.in_(part))
                        .values(frozen=True))


# -- reference agents --------------------------------------------------------------------
def set_references(session: Session, competition_id: int, agent_ids: Iterable[int]) -> None:
    session.execute(delete(ReferenceAgent).where(ReferenceAgent.competition_id == competition_id))
    for agent_id in dict.fromkeys(agent_ids):
        session.add(ReferenceAgent(competition_id=competition_id, agent_id=agent_id))
    session.flush()


def references(session: Session, competition_id: int) -> list[int]:
    stmt = select(ReferenceAgent.agent_id).where(ReferenceAgent.competition_id == competition_id)
    return sorted(session.execute(stmt).scalars())


# -- board ratings -----------------------------------------------------------------------
_BOARD_RATING = [getattr(BoardRating, f) for f in StoredRating.__dataclass_fields__]
_BOARD_KEYS = ("agent_id", "role", "env_id", "mu", "sigma", "games", "wins", "draws", "losses", "last_match_seq")


def load_board_ratings(session: Session, board: str,
                       agent_ids: Collection[int] | None = None) -> dict[tuple[int, str], StoredRating]:
    """Stored ratings on ``board`` (of ``agent_ids`` only, if given): ``{(agent_id, role): rating}``."""
    found: dict[tuple[int, str], StoredRating] = {}
    parts = [None] if agent_ids is None else chunks(list(set(agent_ids)))
    for part in parts:
        stmt = select(*_BOARD_RATING).where(BoardRating.board == board)
        if part is not None:
            stmt = stmt.where(BoardRating.agent_id.in_(part))
        for row in session.execute(stmt):
            rating = StoredRating(*row)
            found[(rating.agent_id, rating.role)] = rating
    return found


def upsert_board_ratings(session: Session, board: str, rows: Iterable[Mapping[str, Any]]) -> int:
    """Writes ratings on ``board`` (rows as :func:`~arena.storage.db.repositories.upsert_ratings`'s)."""
    latest: dict[tuple[int, str], dict[str, Any]] = {}
    for row in rows:
        values = {k: row[k] for k in _BOARD_KEYS}
        values["conservative"] = values["mu"] - CONSERVATIVE_SIGMAS * values["sigma"]
        latest[(values["agent_id"], values["role"])] = {"board": board, **values}
    if not latest:
        return 0
    insert = dialect_insert(session, BoardRating.__table__)
    updated = {k: insert.excluded[k] for k in (*_BOARD_KEYS[2:], "conservative")}
    session.execute(insert.on_conflict_do_update(index_elements=["board", "agent_id", "role"], set_=updated),
                    list(latest.values()))
    return len(latest)


def clear_board_ratings(session: Session, board: str) -> int:
    return session.execute(delete(BoardRating).where(BoardRating.board == board)).rowcount


def competitions_of_agents(session: Session, agent_ids: Collection[int]) -> dict[int, list[int]]:
    """``{agent id: [competition ids]}`` the agents are entries of (for tagging them in listings)."""
    found: dict[int, list[int]] = {}
    for part in chunks(list(set(agent_ids))):
        stmt = select(Entry.agent_id, Entry.competition_id).where(Entry.agent_id.in_(part))
        for agent_id, competition_id in session.execute(stmt):
            found.setdefault(agent_id, []).append(competition_id)
    return found


def member_competitions(session: Session, user_id: int) -> set[int]:
    """Ids of the competitions ``user_id`` joined."""
    stmt = select(CompetitionMember.competition_id).where(CompetitionMember.user_id == user_id)
    return set(session.execute(stmt).scalars())


