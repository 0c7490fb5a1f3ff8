"""``/competitions``: seasons with deadlines, teams, quotas, entries, boards and final standings.

Handlers are thin: the writes are :mod:`arena.competitions.service` (one transaction each,
gating counts under a lock), the reads :mod:`arena.read.competitions`. A private
competition is a 404 to anyone who has not joined it. An entry is submitted through the
one submission path (the multipart upload of ``POST /agents``, validated exactly the same),
then tagged with the competition and the caller's team in the storing transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from arena.api.competition_schemas import (
    CompetitionBoardPublic,
    CompetitionCreate,
    CompetitionPublic,
    CompetitionsPublic,
    CompetitionUpdate,
    ConnectedEntryCreate,
    EntriesPublic,
    EntryCreated,
    EntryPublic,
    JoinCompetition,
    OrganizerPublic,
    QuotaPublic,
    StandingsPublic,
    TeamCreate,
    TeamJoin,
    TeamMerge,
    TeamPublic,
    TeamsPublic,
)
from arena.api.deps import (
    CompetitionIdPath,
    Principal,
    ServicesDep,
    SessionDep,
    StateDep,
    UserDep,
    WriterDep,
    optional_user,
)
from arena.api.errors import error_responses
from arena.api.routes.agents import UPLOAD_SCHEMA, receive_agent
from arena.api.routes.envs import MATCH_LOG_ROWS, match_log_file, match_log_responses
from arena.api.schemas import MAX_ID, AgentPublic
from arena.competitions import entries, service, teams
from arena.competitions.rules import CompetitionSettings, board_key, final_board_key
from arena.core.errors import Forbidden
from arena.ladder.registration import ladder_rating_env
from arena.read import competitions as read
from arena.read.summaries import agents_public
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.wiring import Services
from envs.registry import get_spec
from league.competitions.certification import FINAL_RATING_ENV

router = APIRouter(tags=["competitions"])
CallerDep = Annotated[Principal | None, Depends(optional_user)]


def _caller(user: Principal | None) -> service.Caller | None:
    return None if user is None else service.Caller(user.user_id, user.name, user.is_admin)


def _public(session: Session, competition_id: int, user: Principal | None) -> CompetitionPublic:
    caller = _caller(user)
    found = service.visible(session, competition_id, caller)
    return CompetitionPublic(**read.competition_public(session, found, caller is not None
                                                       and service.organizes(session, found, caller)))


@router.post("/competitions", status_code=201, response_model=CompetitionPublic,
             responses=error_responses(400, 401, 403, 404, 422, 429))
def create_competition(body: CompetitionCreate, user: WriterDep, services: ServicesDep) -> CompetitionPublic:
    """Create a competition (admins, and users an admin made organizers); it starts as a ``draft``."""
    values = body.model_dump()
    divisions = None if body.divisions is None else tuple((d.name, d.boss) for d in body.divisions)
    settings = CompetitionSettings(env_id=values.pop("env"), **{
        **values, "allowed_paths": tuple(body.allowed_paths), "reference_agents": tuple(body.reference_agents),
        "divisions": divisions})
    competition_id = service.create_competition(services, _caller(user), settings)
    with services.sessions() as session:
        return _public(session, competition_id, user)


@router.get("/competitions", response_model=CompetitionsPublic, responses=error_responses(401, 422))
def list_competitions(
    session: SessionDep, user: CallerDep,
    state: Annotated[str | None, Query(pattern="^(draft|open|final|finished)$")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> CompetitionsPublic:
    """Competitions the caller may see (public ones, and private ones it joined), newest first."""
    page, total = comp_repo.page_competitions(session, user_id=user.user_id if user else None,
                                              is_admin=bool(user and user.is_admin), state=state,
                                              limit=limit, offset=offset)
    caller = _caller(user)
    return CompetitionsPublic(data=[CompetitionPublic(**read.competition_public(
        session, c, caller is not None and service.organizes(session, c, caller))) for c in page], count=total)


@router.get("/competitions/{competition_id}", response_model=CompetitionPublic,
            responses=error_responses(401, 404, 422))
def get_competition(competition_id: CompetitionIdPath, session: SessionDep, user: CallerDep) -> CompetitionPublic:
    """One competition (404 for a private one the caller has not joined)."""
    return _public(session, competition_id, user)


@router.patch("/competitions/{competition_id}", response_model=CompetitionPublic,
              responses=error_responses(400, 401, 403, 404, 409, 422, 429))
def update_competition(competition_id: CompetitionIdPath, body: CompetitionUpdate, user: WriterDep,
                       services: ServicesDep) -> CompetitionPublic:
    """Change a draft; once open, only extend its dates, and only before the deadline (409 otherwise)."""
    service.update_competition(services, _caller(user), competition_id, body.model_dump(exclude_unset=True))
    with services.sessions() as session:
        return _public(session, competition_id, user)


@router.post("/competitions/{competition_id}/open", response_model=CompetitionPublic,
             responses=error_responses(400, 401, 403, 404, 409, 422, 429))
def open_competition(competition_id: CompetitionIdPath, user: WriterDep, services: ServicesDep) -> CompetitionPublic:
    """``draft -> open`` (its organizer): settings freeze. The background service moves it to ``final`` at
    the deadline and to ``finished`` when the final evaluation ends."""
    service.open_competition(services, _caller(user), competition_id)
    with services.sessions() as session:
        return _public(session, competition_id, user)


@router.put("/competitions/organizers/{name}", response_model=OrganizerPublic,
            responses=error_responses(400, 401, 403, 422, 429))
def grant_organizer(name: Annotated[str, Path(max_length=64)], user: WriterDep,
                    services: ServicesDep) -> OrganizerPublic:
    """An admin makes the user ``name`` an organizer (who may then create competitions)."""
    return OrganizerPublic(user_id=service.grant_organizer(services, _caller(user), name), name=name)


@router.post("/competitions/{competition_id}/join", response_model=CompetitionPublic,
             responses=error_responses(400, 401, 404, 409, 422, 429))
def join_competition(competition_id: CompetitionIdPath, body: JoinCompetition, user: WriterDep,
                     services: ServicesDep) -> CompetitionPublic:
    """Join a competition (a private one with its ``invite_code``; a wrong code is a 404)."""
    service.join_competition(services, _caller(user), competition_id, body.invite_code)
    with services.sessions() as session:
        return _public(session, competition_id, user)


def _team_write(services: Services, user: Principal, competition_id: int,
                write: Callable[..., int], value: str) -> TeamPublic:
    """Runs a team write of :mod:`arena.competitions.teams` (create, join, merge: ``value`` is the name or
    the join code) as ``user``, and answers the team it created, joined or grew, as its member sees it."""
    team_id = write(services, _caller(user), competition_id, value)
    with services.sessions() as session:
        mine = comp_repo.team_of(session, competition_id, user.user_id) if user.user_id else None
        rows = read.teams_public(session, competition_id, mine.id if mine else None)
    return TeamPublic(**next(r for r in rows if r["id"] == team_id))


@router.post("/competitions/{competition_id}/teams", status_code=201, response_model=TeamPublic,
             responses=error_responses(400, 401, 403, 404, 409, 422, 429))
def create_team(competition_id: CompetitionIdPath, body: TeamCreate, user: WriterDep,
                services: ServicesDep) -> TeamPublic:
    """Create a team with you in it; its ``join_code`` (shown to its members) lets others join."""
    return _team_write(services, user, competition_id, teams.create_team, body.name)


@router.post("/competitions/{competition_id}/teams/join", response_model=TeamPublic,
             responses=error_responses(400, 401, 403, 404, 409, 422, 429))
def join_team(competition_id: CompetitionIdPath, body: TeamJoin, user: WriterDep,
              services: ServicesDep) -> TeamPublic:
    """Join a team by its code, within the competition's team size (409 when full)."""
    return _team_write(services, user, competition_id, teams.join_team, body.join_code)


@router.post("/competitions/{competition_id}/teams/merge", response_model=TeamPublic,
             responses=error_responses(400, 401, 403, 404, 409, 422, 429))
def merge_team(competition_id: CompetitionIdPath, body: TeamMerge, user: WriterDep,
               services: ServicesDep) -> TeamPublic:
    """Merge another team (by its join code) into yours, before the merge deadline. Kaggle's rule: the
    two teams' submissions together may not exceed the daily limit times the days the competition has run."""
    return _team_write(services, user, competition_id, teams.merge_team, body.join_code)


@router.get("/competitions/{competition_id}/teams", response_model=TeamsPublic,
            responses=error_responses(401, 404, 422))
def list_teams(competition_id: CompetitionIdPath, session: SessionDep, user: CallerDep) -> TeamsPublic:
    """The teams and their members (join codes only to each team's own members)."""
    service.visible(session, competition_id, _caller(user))
    mine = comp_repo.team_of(session, competition_id, user.user_id) if user and user.user_id else None
    rows = read.teams_public(session, competition_id, mine.id if mine else None)
    return TeamsPublic(data=[TeamPublic(**r) for r in rows], count=len(rows))


@router.get("/competitions/{competition_id}/quota", response_model=QuotaPublic,
            responses=error_responses(400, 401, 403, 404, 422))
def my_quota(competition_id: CompetitionIdPath, session: SessionDep, user: UserDep) -> QuotaPublic:
    """My team's submissions today (UTC): used, left, when the count resets, and its active entries."""
    competition = service.visible(session, competition_id, _caller(user))
    team = comp_repo.team_of(session, competition_id, user.user_id) if user.user_id else None
    if team is None:
        raise Forbidden(f"you are in no team of competition {competition_id}; create or join one first")
    left = entries.quota(session, competition, team.id, utcnow())
    active = [e.agent_id for e in comp_repo.entries(session, competition_id, team_id=team.id, active=True)]
    return QuotaPublic(team_id=team.id, team=team.name, used_today=left.used_today, left_today=left.left_today,
                       resets_at=left.resets_at, active_entries=active)


@router.post(
    "/competitions/{competition_id}/entries", status_code=201, response_model=EntryCreated,
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 429, 503),
    openapi_extra={"requestBody": UPLOAD_SCHEMA},
    description="Submit an entry for your team: the multipart upload of `POST /agents` (validated exactly the "
    "same), then tagged with the competition and your team in the same transaction. Refused, with nothing "
    "stored: before it opens or after its deadline (409), a finished competition (409), not in a team (403), a "
    "submission path or env it does not take (422), over the team's daily submissions (429, Retry-After: the "
    "next UTC day). Only the team's latest `active_entries` entries play.",
)
async def submit_entry(competition_id: CompetitionIdPath, request: Request, user: WriterDep,
                       state: StateDep) -> EntryCreated:
    services = state.services
    caller = _caller(user)
    with services.sessions() as session:  # the cheap checks before reading and validating the upload
        competition = service.visible(session, competition_id, caller)

    def tag(submission):
        path = entries.submission_path(submission.spec)
        with services.sessions() as session:
            entries.check_entry(session, competition, caller, path, submission.env, utcnow())
        return entries.entry_tag(competition_id, caller, path, submission.env)

    agent = await receive_agent(request, user, state, tag=tag)
    with services.sessions() as session:
        entry = next(e for e in read.entries_public(session, competition_id) if e["agent_id"] == agent.id)
    return EntryCreated(entry=EntryPublic(**entry), agent=agent)


@router.post("/competitions/{competition_id}/entries/connected", status_code=201, response_model=EntryCreated,
             responses=error_responses(400, 401, 403, 404, 409, 422, 429))
def submit_connected_entry(competition_id: CompetitionIdPath, body: ConnectedEntryCreate, user: WriterDep,
                           services: ServicesDep) -> EntryCreated:
    """Enter a connected agent for your team (the competition must take the `connected` path): refused as an
    upload is, counted against the same daily quota. Play it with `arena connect FILE:FN --env ENV --name NAME`
    (the same name); it plays the season while online, and the final evaluation whether or not (offline, its
    matches forfeit)."""
    caller = _caller(user)
    with services.sessions() as session:
        service.visible(session, competition_id, caller)
    agent_id = entries.enter_connected(services, caller, competition_id, body.name)
    with services.sessions() as session:
        agent = AgentPublic(**agents_public(session, [repo.get_agent(session, agent_id)])[0])
        entry = next(e for e in read.entries_public(session, competition_id) if e["agent_id"] == agent_id)
    return EntryCreated(entry=EntryPublic(**entry), agent=agent)


@router.get("/competitions/{competition_id}/entries", response_model=EntriesPublic,
            responses=error_responses(401, 404, 422))
def list_entries(competition_id: CompetitionIdPath, session: SessionDep, user: CallerDep,
                 team: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None) -> EntriesPublic:
    """The competition's entries (of one team), oldest first."""
    service.visible(session, competition_id, _caller(user))
    rows = read.entries_public(session, competition_id, team)
    return EntriesPublic(data=[EntryPublic(**r) for r in rows], count=len(rows))


@router.get("/competitions/{competition_id}/board", response_model=CompetitionBoardPublic,
            responses=error_responses(401, 404, 422))
def board(competition_id: CompetitionIdPath, session: SessionDep, user: CallerDep,
          final: Annotated[bool, Query(description="The final evaluation's board (else the season's).")] = False,
          ) -> CompetitionBoardPublic:
    """The competition's own board: its active entries and reference agents rated on its own matches
    (the env's public board is separate), with rank ranges; ``final=true``: the final evaluation's."""
    competition = service.visible(session, competition_id, _caller(user))
    env = FINAL_RATING_ENV if final else ladder_rating_env(session, competition.env_id)
    key, rows = read.board_public(session, competition, final, env)
    return CompetitionBoardPublic(competition_id=competition_id, board=key, data=rows, count=len(rows))


@router.get("/competitions/{competition_id}/standings", response_model=StandingsPublic,
            responses=error_responses(401, 404, 422))
def standings(competition_id: CompetitionIdPath, session: SessionDep, user: CallerDep) -> StandingsPublic:
    """The final evaluation's standings and certificate: frozen once the competition is finished."""
    competition = service.visible(session, competition_id, _caller(user))
    result = competition.final_result
    return StandingsPublic(competition_id=competition_id, state=competition.state,
                           final=competition.state == "finished", certified=bool(result and result.get("certified")),
                           matches=repo.count_matches(session, competition.env_id,
                                                      board=final_board_key(competition_id)),
                           result=result)


@router.get(
    "/competitions/{competition_id}/matches/export",
    response_class=StreamingResponse,
    responses=match_log_responses("The board's matches as a Parquet or CSV file, streamed.", 401, 404, 422, 429),
)
def export_matches(
    competition_id: CompetitionIdPath, session: SessionDep, state: StateDep, user: CallerDep,
    final: Annotated[bool, Query(description="The final evaluation's matches (else the season's).")] = True,
    format: Annotated[Literal["parquet", "csv"], Query(description="parquet or csv.")] = "csv",
    after: Annotated[int, Query(ge=0, le=2**63 - 1, description="Only matches with a larger match_seq.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MATCH_LOG_ROWS, description="Most matches in this file.")] = MATCH_LOG_ROWS,
) -> StreamingResponse:
    """A competition board's match log, oldest first, in the columns of the env's match-log export
    (``GET /envs/{env}/matches/export``; the rating columns empty: the board's ratings are derived on it).
    The final evaluation's (``final=true``) is what ``arena competition verify`` recomputes the standings
    and the certificate from."""
    from arena.datasets.match_log import stream_match_log  # pyarrow: loaded on first download

    competition = service.visible(session, competition_id, _caller(user))
    board = final_board_key(competition_id) if final else board_key(competition_id)
    body = state.downloads.stream(stream_match_log(state.services.sessions, get_spec(competition.env_id), format,
                                                   after, limit, board=board))
    return match_log_file(body, format, board.replace(":", "-"))
