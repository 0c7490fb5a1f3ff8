"""``GET /leaderboard``: an env's ranked agents with rank ranges (see ``arena.read.boards``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from arena.api.errors import error_responses
from arena.api.schemas import LeaderboardPublic
from arena.api.state import ApiState
from arena.core.errors import InvalidParameter
from arena.read.boards import Board, board_page
from envs.registry import get_spec

router = APIRouter(tags=["leaderboard"])


@router.get("/leaderboard", response_model=LeaderboardPublic, responses=error_responses(404, 422))
async def leaderboard(
    request: Request,
    env: Annotated[str, Query(max_length=64, description="Env id.")],
    role: Annotated[str | None, Query(max_length=32, description="Default: the first role.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> Response:
    """Agents best first by ``mu - 3 sigma``; retired and rejected agents are left off.

    The board's version is checked at most every ``ARENA_PAGE_CACHE_S`` seconds (in
    the background once half of that has passed, so readers need not wait for it),
    and a page is rendered once per board: within that window a page costs no
    database work at all.
    """
    spec = get_spec(env)
    role = role or spec.roles[0]
    if role not in spec.roles:
        raise InvalidParameter(f"{env} has no role {role!r}; its roles: {', '.join(dict.fromkeys(spec.roles))}")
    state: ApiState = request.app.state.api
    board = state.boards.recent(env, role, state.fresh_s)
    if board is None:
        board = await state.read(_current_board, state, env, role, state.fresh_s)
    elif state.boards.checked_age(env, role) >= state.fresh_s / 2:
        state.read_ahead(("board", env, role), _current_board, state, env, role, state.fresh_s / 2)
    key = ("leaderboard", board.stamp, limit, offset)
    body = state.pages.get(key)
    if body is None:
        rows = board_page(board, limit, offset)
        body = LeaderboardPublic(env=env, role=role, count=len(board.rows), data=rows).model_dump_json().encode()
        state.pages.put(key, body)
    return Response(body, media_type="application/json")


def _current_board(state: ApiState, env: str, role: str, checked_within_s: float) -> Board:
    """The board, its version checked now unless a read queued before this one did so
    less than ``checked_within_s`` ago."""
    with state.services.sessions() as session:
        return state.boards.recent(env, role, checked_within_s) or state.boards.get(session, env, role)
