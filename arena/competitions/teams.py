"""Teams of a competition: create, join by code within the team size, merge by Kaggle's rule.

Each write is one transaction; the counts that gate it (members, a merge's submissions) are
read after the teams' rows are locked (:func:`~arena.storage.db.repositories.competitions.lock_team`,
two in id order), and one team per person is the primary key of ``competition_team_members``.
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from arena.competitions.rules import CompetitionState, merge_allowance
from arena.competitions.service import Caller, new_code, user_of, visible
from arena.core.errors import Conflict, Forbidden, InvalidParameter
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services


def _accepting_teams(session: Session, competition_id: int, caller: Caller) -> comp_repo.CompetitionInfo:
    competition = visible(session, competition_id, caller)
    if competition.state not in (CompetitionState.DRAFT, CompetitionState.OPEN) or utcnow() >= competition.deadline:
        raise Conflict(f"competition {competition_id} is past its deadline: teams can no longer change")
    comp_repo.add_member(session, competition_id, user_of(caller))
    return competition


def create_team(services: Services, caller: Caller, competition_id: int, name: str) -> int:
    """A new team with the caller as its first member; returns its id."""
    user_id = user_of(caller)

    def create(session: Session) -> int:
        _accepting_teams(session, competition_id, caller)
        if comp_repo.team_of(session, competition_id, user_id) is not None:
            raise Conflict("you are already in a team of this competition (one team per person)")
        try:
            with session.begin_nested():
                team_id = comp_repo.create_team(session, competition_id, name, new_code())
        except IntegrityError:
            raise Conflict(f"a team called {name!r} exists already in this competition; pick another name") from None
        comp_repo.add_team_member(session, competition_id, team_id, user_id)
        return team_id

    return services.sessions.write_transaction(create, what=f"creating a team in competition {competition_id}")


def join_team(services: Services, caller: Caller, competition_id: int, join_code: str) -> int:
    """Join the team whose code is ``join_code`` (within the team size); returns its id."""
    user_id = user_of(caller)

    def join(session: Session) -> int:
        competition = _accepting_teams(session, competition_id, caller)
        found = comp_repo.team_by_code(session, join_code)
        if found is None or found.competition_id != competition_id or found.merged_into is not None:
            raise InvalidParameter("no team of this competition has that join code; ask its members for it")
        team = comp_repo.lock_team(session, found.id)
        if comp_repo.team_of(session, competition_id, user_id) is not None:
            raise Conflict("you are already in a team of this competition (one team per person)")
        members = len(comp_repo.team_members(session, [team.id])[team.id])
        if members >= competition.team_size:
            raise Conflict(f"team {team.name!r} is full ({members} of {competition.team_size} members)")
        comp_repo.add_team_member(session, competition_id, team.id, user_id)
        return team.id

    return services.sessions.write_transaction(join, what=f"joining a team of competition {competition_id}")


def merge_team(services: Services, caller: Caller, competition_id: int, other_code: str) -> int:
    """Merge the team of ``other_code`` into the caller's (Kaggle's rule); returns the merged team's id.

    Refused after the merge deadline, over the team size, or when the two teams' submissions
    together exceed the daily limit summed over every day the competition has run.
    """
    user_id = user_of(caller)

    def merge(session: Session) -> int:
        competition = _accepting_teams(session, competition_id, caller)
        now = utcnow()
        if now >= competition.merge_deadline:
            raise Conflict(f"the team-merge deadline passed at {competition.merge_deadline.isoformat()}")
        mine, other = comp_repo.team_of(session, competition_id, user_id), comp_repo.team_by_code(session, other_code)
        if mine is None:
            raise Forbidden("you are in no team of this competition; create or join one first")
        if other is None or other.competition_id != competition_id or other.merged_into is not None:
            raise InvalidParameter("no team of this competition has that join code")
        if other.id == mine.id:
            raise InvalidParameter("that is your own team's code")
        for team_id in sorted((mine.id, other.id)):  # always in id order: no deadlock between two merges
            comp_repo.lock_team(session, team_id)
        sizes = comp_repo.team_members(session, [mine.id, other.id])
        if len(sizes[mine.id]) + len(sizes[other.id]) > competition.team_size:
            raise Conflict(f"together the teams have {len(sizes[mine.id]) + len(sizes[other.id])} members; "
                           f"the limit is {competition.team_size}")
        made = comp_repo.count_entries(session, mine.id) + comp_repo.count_entries(session, other.id)
        allowed = merge_allowance(competition.daily_submissions, competition.opens_at, now)
        if made > allowed:
            raise Conflict(f"together the teams made {made} submissions; a merged team may have made at most "
                           f"{allowed} (the daily limit {competition.daily_submissions} times the days so far)")
        comp_repo.merge_teams(session, mine.id, other.id)
        comp_repo.keep_latest_active(session, competition_id, mine.id, competition.active_entries)
        return mine.id

    return services.sessions.write_transaction(merge, what=f"merging teams of competition {competition_id}")
