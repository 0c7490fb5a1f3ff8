"""The writes behind ``/api/v1/competitions``: each one transaction, every gating count checked
under a lock in the same transaction that writes.

* A team's submissions today, its size, and a merge's history are counted after the team's
  row is locked (``SELECT ... FOR UPDATE``; SQLite's write transactions are serialised), so
  concurrent requests cannot both pass one check.
* A submission goes through the one submission path (:func:`arena.ladder.submissions.submit_agent`:
  validated exactly as ``POST /agents``) with :func:`entry_tag`, which checks the competition
  again inside the storing transaction and writes the entry there: refused, nothing is stored.
* A private competition is invisible to non-members: :class:`UnknownCompetition` (404), as
  if it did not exist.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from agents.catalog import make_policy
from agents.checkpoint import validate_spec
from agents.checkpoint_spec import ONNX_ARCH
from arena.competitions.rules import (
    CompetitionSettings,
    CompetitionState,
    changed_dates,
    is_two_player,
    merge_allowance,
    retry_after_s,
    utc_day,
)
from arena.core.errors import Conflict, Forbidden, InvalidParameter, TooManyRequests, UnknownCompetition
from arena.ladder.registration import register_builtin_agents, register_connected_agent, register_env
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services
from envs.errors import ArenaError, InvalidSubmission
from envs.registry import get_spec


@dataclass(frozen=True)
class Caller:
    """Who asks: a user (``user_id``), or the operator's admin token (``user_id`` ``None``)."""

    user_id: int | None
    name: str
    is_admin: bool


def _code() -> str:
    return secrets.token_urlsafe(12)


# -- reading ----------------------------------------------------------------------------
def may_see(session: Session, competition: comp_repo.CompetitionInfo, caller: Caller | None) -> bool:
    """Public, or the caller is an admin, its creator or a member."""
    if competition.is_public or (caller is not None and caller.is_admin):
        return True
    if caller is None or caller.user_id is None:
        return False
    return competition.created_by == caller.user_id or comp_repo.is_member(session, competition.id, caller.user_id)


def visible(session: Session, competition_id: int, caller: Caller | None) -> comp_repo.CompetitionInfo:
    """The competition if the caller may see it.

    Raises:
        UnknownCompetition: None with that id, or a private one the caller has not joined (404 both).
    """
    found = comp_repo.get_competition(session, competition_id)
    if found is None or not may_see(session, found, caller):
        raise UnknownCompetition(f"no competition with id {competition_id} (a private competition is "
                                 "visible once you join it with its invite code)")
    return found


def organizes(session: Session, competition: comp_repo.CompetitionInfo, caller: Caller) -> bool:
    """Admins, and the organizer who created it."""
    return caller.is_admin or (caller.user_id is not None and competition.created_by == caller.user_id)


def _organized(session: Session, competition_id: int, caller: Caller) -> comp_repo.CompetitionInfo:
    competition = comp_repo.get_competition(session, competition_id, lock=True)
    if competition is None or not may_see(session, competition, caller):
        raise UnknownCompetition(f"no competition with id {competition_id}")
    if not organizes(session, competition, caller):
        raise Forbidden(f"only the organizer of competition {competition_id} (or an admin) may change it")
    return competition


# -- organizers, competitions -------------------------------------------------------------
def grant_organizer(services: Services, caller: Caller, user_name: str) -> int:
    """An admin makes ``user_name`` an organizer; returns the user's id."""
    if not caller.is_admin:
        raise Forbidden("only an admin may make organizers")

    def grant(session: Session) -> int:
        user = repo.get_user_by_name(session, user_name)
        if user is None:
            raise InvalidParameter(f"no user called {user_name[:64]!r}")
        comp_repo.grant_organizer(session, user.id, caller.name)
        return user.id

    return services.sessions.write_transaction(grant, what=f"making {user_name} an organizer")


def _reference_ids(session: Session, env_id: str, names: tuple[str, ...]) -> list[int]:
    """Agent ids of the reference agents: agent ids as digits, builtin names otherwise."""
    ids = [int(n) for n in names if n.isdigit()]
    builtins = [n for n in names if not n.isdigit()]
    for name in builtins:
        try:
            make_policy(name, env_id)  # a name no scripted agent answers to would fail every match
        except ArenaError as exc:
            raise InvalidParameter(f"reference_agents: {exc}") from None
    if builtins:
        ids += list(register_builtin_agents(session, env_id, builtins).values())
    agents = repo.get_agents(session, ids)
    wrong = [i for i in ids if i not in agents or agents[i].env_id != env_id]
    if wrong:
        raise InvalidParameter(f"reference_agents: {', '.join(map(str, wrong))} are not agents of {env_id}")
    return ids


def _check_env(settings: CompetitionSettings) -> None:
    spec = get_spec(settings.env_id)
    if not is_two_player(spec.env_id):
        raise InvalidParameter(f"{spec.env_id} is not a two-player game; a competition's final evaluation "
                               "certifies head-to-head results, so competitions take 1v1 envs for now")
    roles = list(dict.fromkeys(spec.roles))
    if settings.role is not None and settings.role not in roles:
        raise InvalidParameter(f"{spec.env_id} has no role {settings.role!r}; its roles: {', '.join(roles)}")
    if settings.role is None and len(roles) > 1:
        raise InvalidParameter(f"{spec.env_id} has several roles ({', '.join(roles)}): say which one entries play")


def create_competition(services: Services, caller: Caller, settings: CompetitionSettings) -> int:
    """A new competition in ``draft`` (admins and organizers); returns its id."""
    settings = settings.checked()
    _check_env(settings)

    def create(session: Session) -> int:
        if not caller.is_admin and (caller.user_id is None or not comp_repo.is_organizer(session, caller.user_id)):
            raise Forbidden("only admins and organizers (an admin makes one with "
                            "PUT /api/v1/competitions/organizers/{user}) may create competitions")
        register_env(session, settings.env_id)
        values = {k: v for k, v in asdict(settings).items() if k != "reference_agents"}
        values["allowed_paths"] = list(settings.allowed_paths)
        competition_id = comp_repo.create_competition(session, {
            **values, "created_by": caller.user_id, "state": CompetitionState.DRAFT.value,
            "invite_code": None if settings.is_public else _code(), "seed": secrets.randbits(62)})
        comp_repo.set_references(session, competition_id, _reference_ids(session, settings.env_id,
                                                                         settings.reference_agents))
        return competition_id

    return services.sessions.write_transaction(create, what=f"creating a competition on {settings.env_id}")


def update_competition(services: Services, caller: Caller, competition_id: int, wanted: dict[str, Any]) -> None:
    """Change a draft's settings, or extend an open competition's dates before its deadline."""
    def update(session: Session) -> None:
        competition = _organized(session, competition_id, caller)
        stored = asdict(competition)
        changes = changed_dates(stored, wanted, competition.state, utcnow())
        references = changes.pop("reference_agents", None)
        merged = {k: v for k, v in {**stored, **changes}.items() if k in CompetitionSettings.__dataclass_fields__}
        merged["allowed_paths"] = tuple(merged["allowed_paths"])
        settings = CompetitionSettings(**merged).checked()
        _check_env(settings)
        values = {k: v for k, v in changes.items() if k in stored}
        if "allowed_paths" in values:
            values["allowed_paths"] = list(settings.allowed_paths)
        if "is_public" in values:
            values["invite_code"] = None if settings.is_public else (competition.invite_code or _code())
        comp_repo.update_competition(session, competition_id, values)
        if references is not None:
            comp_repo.set_references(session, competition_id, _reference_ids(session, competition.env_id,
                                                                             tuple(references)))

    services.sessions.write_transaction(update, what=f"updating competition {competition_id}")


def open_competition(services: Services, caller: Caller, competition_id: int) -> None:
    """``draft -> open``: its settings freeze; entries are taken from ``opens_at`` to the deadline."""
    def open_(session: Session) -> None:
        competition = _organized(session, competition_id, caller)
        if competition.state != CompetitionState.DRAFT:
            raise Conflict(f"competition {competition_id} is {competition.state}; only a draft can be opened")
        if competition.deadline <= utcnow():
            raise Conflict("its deadline has passed; move the deadline later before opening it")
        comp_repo.update_competition(session, competition_id, {"state": CompetitionState.OPEN.value})

    services.sessions.write_transaction(open_, what=f"opening competition {competition_id}")


# -- members and teams -------------------------------------------------------------------
def _user(caller: Caller) -> int:
    if caller.user_id is None:
        raise Forbidden("the operator's admin token is no user: join and submit with a user's token")
    return caller.user_id


def join_competition(services: Services, caller: Caller, competition_id: int, invite_code: str | None) -> None:
    """Become a member (a private competition needs its invite code; a wrong one is a 404)."""
    user_id = _user(caller)

    def join(session: Session) -> None:
        competition = comp_repo.get_competition(session, competition_id)
        invited = (competition is not None and invite_code is not None
                   and secrets.compare_digest(invite_code, competition.invite_code or ""))
        if competition is None or not (invited or may_see(session, competition, caller)):
            raise UnknownCompetition(f"no competition with id {competition_id} (or a wrong invite code)")
        comp_repo.add_member(session, competition_id, user_id)

    services.sessions.write_transaction(join, what=f"joining competition {competition_id}")


def _accepting_teams(session: Session, competition_id: int, caller: Caller) -> comp_repo.CompetitionInfo:
    competition = visible(session, competition_id, caller)
    if competition.state not in (CompetitionState.DRAFT, CompetitionState.OPEN) or utcnow() >= competition.deadline:
        raise Conflict(f"competition {competition_id} is past its deadline: teams can no longer change")
    comp_repo.add_member(session, competition_id, _user(caller))
    return competition


def create_team(services: Services, caller: Caller, competition_id: int, name: str) -> int:
    """A new team with the caller as its first member; returns its id."""
    user_id = _user(caller)

    def create(session: Session) -> int:
        _accepting_teams(session, competition_id, caller)
        if comp_repo.team_of(session, competition_id, user_id) is not None:
            raise Conflict("you are already in a team of this competition (one team per person)")
        try:
            with session.begin_nested():
                team_id = comp_repo.create_team(session, competition_id, name, _code())
        except IntegrityError:
            raise Conflict(f"a team called {name!r} exists already in this competition; pick another name") from None
        comp_repo.add_team_member(session, competition_id, team_id, user_id)
        return team_id

    return services.sessions.write_transaction(create, what=f"creating a team in competition {competition_id}")


def join_team(services: Services, caller: Caller, competition_id: int, join_code: str) -> int:
    """Join the team whose code is ``join_code`` (within the team size); returns its id."""
    user_id = _user(caller)

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
    user_id = _user(caller)

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
        comp_repo.keep_latest_active(session, mine.id, competition.active_entries)
        return mine.id

    return services.sessions.write_transaction(merge, what=f"merging teams of competition {competition_id}")


# -- entries -----------------------------------------------------------------------------
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
    team = comp_repo.team_of(session, competition.id, _user(caller))
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
        team = comp_repo.team_of(session, competition_id, _user(caller))
        if team is not None:
            comp_repo.lock_team(session, team.id)
        now = utcnow()
        team = check_entry(session, competition, caller, path, env_id, now)

        def attach(agent_id: int) -> None:
            comp_repo.add_entry(session, competition_id, team.id, agent_id, caller.user_id, now)
            comp_repo.keep_latest_active(session, team.id, competition.active_entries)

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
