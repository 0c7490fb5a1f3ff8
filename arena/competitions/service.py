"""The writes behind ``/api/v1/competitions``: each one transaction, every gating count checked
under a lock in the same transaction that writes. This module: who may see and organize a
competition, creating, changing and opening one, joining it; teams are
:mod:`arena.competitions.teams`, entries and quotas :mod:`arena.competitions.entries`.

* A team's submissions today, its size, and a merge's history are counted after the team's
  row is locked (``SELECT ... FOR UPDATE``; SQLite's write transactions are serialised), so
  concurrent requests cannot both pass one check.
* A submission goes through the one submission path (:func:`arena.ladder.submissions.submit_agent`:
  validated exactly as ``POST /agents``) with :func:`arena.competitions.entries.entry_tag`, which checks the competition
  again inside the storing transaction and writes the entry there: refused, nothing is stored.
* A private competition is invisible to non-members: :class:`UnknownCompetition` (404), as
  if it did not exist.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.orm import Session

from agents.catalog import make_policy
from arena.competitions.rules import (
    CompetitionSettings,
    CompetitionState,
    changed_dates,
    is_two_player,
)
from arena.core.errors import Conflict, Forbidden, InvalidParameter, UnknownCompetition
from arena.ladder.registration import register_builtin_agents, register_env
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services
from envs.errors import ArenaError
from envs.registry import get_spec


@dataclass(frozen=True)
class Caller:
    """Who asks: a user (``user_id``), or the operator's admin token (``user_id`` ``None``)."""

    user_id: int | None
    name: str
    is_admin: bool


def new_code() -> str:
    """A fresh invite or join code."""
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
    """Agent ids of the reference agents, in ``names``' order: agent ids as digits, builtin names otherwise."""
    builtins = [n for n in names if not n.isdigit()]
    for name in builtins:
        try:
            make_policy(name, env_id)  # a name no scripted agent answers to would fail every match
        except ArenaError as exc:
            raise InvalidParameter(f"reference_agents: {exc}") from None
    registered = register_builtin_agents(session, env_id, builtins) if builtins else {}
    ids = [int(n) if n.isdigit() else registered[n] for n in names]
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
        values = {k: v for k, v in asdict(settings).items() if k not in ("reference_agents", "divisions")}
        values["allowed_paths"] = list(settings.allowed_paths)
        references = _reference_ids(session, settings.env_id, settings.reference_agents)
        boss_ids = dict(zip(settings.reference_agents, references, strict=True))
        divisions = None if settings.divisions is None else [
            {"name": name, "boss": None if boss is None else boss_ids[boss]} for name, boss in settings.divisions]
        competition_id = comp_repo.create_competition(session, {
            **values, "created_by": caller.user_id, "state": CompetitionState.DRAFT.value, "divisions": divisions,
            "invite_code": None if settings.is_public else new_code(), "seed": secrets.randbits(62)})
        comp_repo.set_references(session, competition_id, references)
        return competition_id

    return services.sessions.write_transaction(create, what=f"creating a competition on {settings.env_id}")


def update_competition(services: Services, caller: Caller, competition_id: int, wanted: dict[str, Any]) -> None:
    """Change a draft's settings, or extend an open competition's dates before its deadline."""
    def update(session: Session) -> None:
        competition = _organized(session, competition_id, caller)
        stored = asdict(competition)
        changes = changed_dates(stored, wanted, competition.state, utcnow())
        references = changes.pop("reference_agents", None)
        merged = {k: v for k, v in {**stored, **changes}.items()
                  if k in CompetitionSettings.__dataclass_fields__ and k != "divisions"}  # set at creation only
        merged["allowed_paths"] = tuple(merged["allowed_paths"])
        settings = CompetitionSettings(**merged).checked()
        _check_env(settings)
        values = {k: v for k, v in changes.items() if k in stored}
        if "allowed_paths" in values:
            values["allowed_paths"] = list(settings.allowed_paths)
        if "is_public" in values:
            values["invite_code"] = None if settings.is_public else (competition.invite_code or new_code())
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


# -- members -----------------------------------------------------------------------------
def user_of(caller: Caller) -> int:
    """The caller's user id (the admin token is no user: Forbidden)."""
    if caller.user_id is None:
        raise Forbidden("the operator's admin token is no user: join and submit with a user's token")
    return caller.user_id


def join_competition(services: Services, caller: Caller, competition_id: int, invite_code: str | None) -> None:
    """Become a member (a private competition needs its invite code; a wrong one is a 404)."""
    user_id = user_of(caller)

    def join(session: Session) -> None:
        competition = comp_repo.get_competition(session, competition_id)
        invited = (competition is not None and invite_code is not None
                   and secrets.compare_digest(invite_code, competition.invite_code or ""))
        if competition is None or not (invited or may_see(session, competition, caller)):
            raise UnknownCompetition(f"no competition with id {competition_id} (or a wrong invite code)")
        comp_repo.add_member(session, competition_id, user_id)

    services.sessions.write_transaction(join, what=f"joining competition {competition_id}")
