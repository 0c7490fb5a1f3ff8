"""People against agents: ``POST /agents/{id}/play`` and each env's humans board.

A person plays in the browser (``/play/{agent_id}``) or with any client of the
connected-agent protocol: this endpoint opens the match and answers with a play token,
which the client sends in its ``hello`` on ``ws_path``. The API process only queues the
match; the background service plays it (:mod:`arena.ladder.people`), unrated. Signed-in
people are rated on the env's humans board (:mod:`arena.read.humans`), guests are not.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from arena.api.deps import OptionalWriterDep, SessionDep, StateDep, client_address
from arena.api.errors import error_responses
from arena.api.people_schemas import HumansPublic, PlayCreate, PlayPublic
from arena.api.routes.envs import EnvId
from arena.api.schemas import MAX_ID
from arena.core.errors import InvalidParameter
from arena.ladder.people import PLAYABLE_ENVS, Person, open_game
from arena.read.humans import humans_board
from envs.registry import get_spec

router = APIRouter(tags=["people"])


@router.post(
    "/agents/{agent_id}/play", status_code=202, response_model=PlayPublic,
    responses=error_responses(400, 401, 403, 404, 409, 422, 429),
    description="Open a match between you and agent {agent_id} (connect_four-v3, tictactoe-v3, rps-v2): "
    "connect to ws_path and say hello with the play_token, then answer the requests (one move each; a "
    "minute a move). Signed in, you play as your own human agent of the env and are rated on its humans "
    "board; without a token, as a guest. Either way the match is unrated: it never moves the agent's "
    "rating. At most 3 open games per user (one per env) or per address of guests.",
)
def play(request: Request, agent_id: Annotated[int, Path(ge=1, le=MAX_ID)], user: OptionalWriterDep,
         state: StateDep, body: PlayCreate | None = None) -> PlayPublic:
    signed_in = user is not None and user.user_id is not None
    person = Person(user.user_id if signed_in else None, user.name if signed_in else "", client_address(request))
    ticket = open_game(state.services, agent_id, person, None if body is None else body.seat)
    return PlayPublic(match_id=ticket.match_id, human_agent_id=ticket.human_agent_id, seat=ticket.seat,
                      play_token=ticket.play_token, ws_path=ticket.ws_path)


@router.get("/envs/{env}/humans", response_model=HumansPublic, responses=error_responses(404, 422))
def humans(env: EnvId, session: SessionDep,
           limit: Annotated[int, Query(ge=1, le=500, description="Rows, best first.")] = 100) -> Any:
    """People rated against the agents they played (their matches are unrated for the agents:
    each match moves only the person's rating, against the agent's rating at the time).
    Derived from the match log on every read; guests are not on it."""
    get_spec(env)  # unknown env: 404 with the list
    if env not in PLAYABLE_ENVS:
        raise InvalidParameter(f"people play {', '.join(PLAYABLE_ENVS)} only; {env} has no humans board")
    return humans_board(session, env, limit)
