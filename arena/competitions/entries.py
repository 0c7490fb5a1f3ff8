"""Entries of a competition: the daily quota, the checks an entry must pass, and the ``tag`` that
makes a submission (an upload through :func:`arena.ladder.submissions.submit_agent`, or a connected
agent) a team's entry inside the storing transaction, under the team's row lock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from agents.checkpoint_spec import ONNX_ARCH, validate_spec
from arena.competitions.rules import CompetitionState, retry_after_s, utc_day
from arena.competitions.service import Caller, user_of
from arena.core.errors import Conflict, Forbidden, TooManyRequests, UnknownCompetition
from arena.ladder.registration import register_connected_agent
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services
from envs.errors import InvalidSubmission


@dataclass(frozen=True)
class Quota:
    """A team's daily submissions: used and left today, and when the count resets."""

    team_id: int
    used_today: int
    left_today: int
    resets_at: datetime


def quota(session: Session, competition: comp_repo.CompetitionInfo, team_id: int, now: datetime) -> Quota:
    start, end = utc_day(now)
    used = comp_repo.count_entries(session, team_id, since=start)
    return Quota(team_id, used, max(0, competition.daily_submissions - used), end)


def submission_path(spec_bytes: bytes) -> str:
    """``onnx`` or ``weights``, from the spec's arch (a bad spec: the submission path's own 422)."""
    return "onnx" if validate_spec(spec_bytes).arch == ONNX_ARCH else "weights"


def check_entry(session: Session, competition: comp_repo.CompetitionInfo, caller: Caller, path: str,
                env_id: str, now: datetime) -> comp_repo.TeamInfo:
    """Why the caller may not submit now (raised), else its team. Cheap: run before validation
    and again, under the team's lock, inside the storing transaction.

    Raises:
        Conflict: Not open yet, past the deadline, finished.
        InvalidSubmission: A path the competition does not take, another env.
        Forbidden: Not in a team of the competition.
        TooManyRequests: The team's submissions today are used up (Retry-After: next UTC day).
    """
    if competition.state == CompetitionState.FINISHED:
        raise Conflict(f"competition {competition.id} is finished: it takes no more submissions")
    if competition.state in (CompetitionState.FINAL,) or now >= competition.deadline:
        raise Conflict(f"the submission deadline of competition {competition.id} passed at "
                       f"{competition.deadline.isoformat()}")
    if competition.state == CompetitionState.DRAFT or now < competition.opens_at:
        raise Conflict(f"competition {competition.id} takes submissions from {competition.opens_at.isoformat()}"
                       + (" once its organizer opens it" if competition.state == CompetitionState.DRAFT else ""))
    team = comp_repo.team_of(session, competition.id, user_of(caller))
    if team is None:
        raise Forbidden(f"join a team of competition {competition.id} first (create one, or join one by its code)")
    if path not in competition.allowed_paths:
        raise InvalidSubmission(f"competition {competition.id} does not take {path} submissions; it takes "
                                f"{', '.join(competition.allowed_paths)}")
    if env_id != competition.env_id:
        raise InvalidSubmission(f"competition {competition.id} is on {competition.env_id}, not {env_id}")
    left = quota(session, competition, team.id, now)
    if left.left_today <= 0:
        raise TooManyRequests(f"team {team.name!r} has used its {competition.daily_submissions} submissions of "
                              "today (UTC); more tomorrow", retry_after_s(now))
    return team


def entry_tag(competition_id: int, caller: Caller, path: str,
              env_id: str) -> Callable[[Session], Callable[[int], None]]:
    """The ``tag`` of :func:`~arena.ladder.submissions.submit_agent` for a competition entry.

    In the storing transaction, before anything is written: the competition and the team
    are locked and every check of :func:`check_entry` runs again (the daily count included);
    then the new agent becomes the team's entry and only its latest ``active_entries`` stay active.
    """
    def check(session: Session) -> Callable[[int], None]:
        competition = comp_repo.get_competition(session, competition_id)
        if competition is None:
            raise UnknownCompetition(f"no competition with id {competition_id}")
        team = comp_repo.team_of(session, competition_id, user_of(caller))
        if team is not None:
            comp_repo.lock_team(session, team.id)
        now = utcnow()
        team = check_entry(session, competition, caller, path, env_id, now)

        def attach(agent_id: int) -> None:
            comp_repo.add_entry(session, competition_id, team.id, agent_id, caller.user_id, now)
            comp_repo.keep_latest_active(session, competition_id, team.id, competition.active_entries)

        return attach

    return check


def enter_connected(services: Services, caller: Caller, competition_id: int, name: str) -> int:
    """A connected agent of the caller (played by its own process, no weights) as its team's entry,
    under the same checks and quota as an upload (:func:`entry_tag`); returns the agent's id.

    Raises:
        Conflict: The caller already has a connected agent of that name in the env (name a new one).
    """
    def enter(session: Session) -> int:
        competition = comp_repo.get_competition(session, competition_id)
        if competition is None:
            raise UnknownCompetition(f"no competition with id {competition_id}")
        attach = entry_tag(competition_id, caller, "connected", competition.env_id)(session)
        agent, created = register_connected_agent(session, competition.env_id, name, caller.user_id,
                                                  competition.role)
        if not created:
            raise Conflict(f"you already have a connected agent called {name!r} (agent {agent.id}); an entry "
                           "is a new agent: give it a new name", existing_id=agent.id)
        attach(agent.id)
        return agent.id

    return services.sessions.write_transaction(enter, what=f"entering a connected agent in {competition_id}")
