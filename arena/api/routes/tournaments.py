"""``/tournaments``: round robin, Swiss and single elimination among chosen agents (issue 28 item 6).

Handlers are thin: creating is :func:`arena.competitions.tournaments.create_tournament`
(then the first round is queued for the background service at once), reading derives the
tournament from its recorded games. A tournament of a private competition is a 404 to
anyone who may not see the competition.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from arena.api.deps import Principal, ServicesDep, SessionDep, TournamentIdPath, WriterDep, optional_user
from arena.api.errors import error_responses
from arena.api.schemas import MAX_ID
from arena.api.tournament_schemas import TournamentCreate, TournamentPublic, TournamentsPublic, TournamentSummary
from arena.competitions import service
from arena.competitions import tournaments as tours
from arena.competitions.tournament_games import advance

router = APIRouter(tags=["tournaments"])
CallerDep = Annotated[Principal | None, Depends(optional_user)]


def _caller(user: Principal | None) -> service.Caller | None:
    return None if user is None else service.Caller(user.user_id, user.name, user.is_admin)


@router.post("/tournaments", status_code=201, response_model=TournamentPublic,
             responses=error_responses(400, 401, 403, 404, 422, 429))
def create_tournament(body: TournamentCreate, user: WriterDep, services: ServicesDep) -> TournamentPublic:
    """Create a tournament (admins and organizers; a competition's by its organizer). The background
    service plays it at once, round by round; its games are unrated on the ladder."""
    spec = tours.TournamentSpec(title=body.title, kind=body.kind, games=body.games, rounds=body.rounds,
                                entrants=None if body.entrants is None else tuple(body.entrants),
                                competition_id=body.competition_id, top=body.top, env_id=body.env,
                                seed_from_board=body.seed_from_board)
    tournament_id = tours.create_tournament(services, _caller(user), spec)
    advance(services, tournament_id)
    with services.sessions() as session:
        return TournamentPublic(**tours.public(session, *tours.load(session, tournament_id)))


@router.get("/tournaments", response_model=TournamentsPublic, responses=error_responses(401, 404, 422))
def list_tournaments(
    session: SessionDep, user: CallerDep,
    competition: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Only this competition's.")] = None,
) -> TournamentsPublic:
    """Tournaments the caller may see, newest first."""
    found = tours.visible_list(session, _caller(user), competition)
    return TournamentsPublic(data=[TournamentSummary(**tours.summary(t)) for t in found], count=len(found))


@router.get("/tournaments/{tournament_id}", response_model=TournamentPublic,
            responses=error_responses(401, 404, 422))
def get_tournament(tournament_id: TournamentIdPath, session: SessionDep, user: CallerDep) -> TournamentPublic:
    """One tournament now: its rounds and games, standings and crosstable (the page polls this)."""
    tours.visible(session, tournament_id, _caller(user))
    return TournamentPublic(**tours.public(session, *tours.load(session, tournament_id)))
