"""``GET /leaderboard``: an env's ranked agents with rank ranges (see ``arena.api.boards``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from arena.api.boards import board_page, load_board
from arena.api.state import ApiState
from arena.api.errors import error_responses
from arena.api.schemas import LeaderboardPublic
from envs.errors import InvalidParameter
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

    Pages are served from a half-second page cache straight from the event loop; a
    miss builds the page on a worker thread (see ``arena.api.state.PageCache``).
    """
    spec = get_spec(env)
    role = role or spec.roles[0]
    if role not in spec.roles:
        raise InvalidParameter(f"{env} has no role {role!r}; its roles: {', '.join(dict.fromkeys(spec.roles))}")
    state: ApiState = request.app.state.api
    key = ("leaderboard", env, role, limit, offset)
    body = state.pages.get(key)
    if body is None:
        body = await run_in_threadpool(_leaderboard_body, state, env, role, limit, offset)
        state.pages.put(key, body)
    return Response(body, media_type="application/json")


def _leaderboard_body(state: ApiState, env: str, role: str, limit: int, offset: int) -> bytes:
    with state.services.sessions() as session:
        board = load_board(session, state.boards, env, role)
        rows = board_page(session, board, limit, offset)
        page = LeaderboardPublic(env=env, role=role, count=len(board.rows), data=rows)
    return page.model_dump_json().encode()
