"""``GET /leaderboard``: an env's ranked agents with rank ranges (see ``arena.api.boards``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from arena.api.boards import board_page, load_board
from arena.api.deps import SessionDep, StateDep
from arena.api.errors import error_responses
from arena.api.schemas import LeaderboardPublic
from envs.errors import InvalidParameter
from envs.registry import get_spec

router = APIRouter(tags=["leaderboard"])


@router.get("/leaderboard", response_model=LeaderboardPublic, responses=error_responses(404, 422))
def leaderboard(
    session: SessionDep,
    state: StateDep,
    env: Annotated[str, Query(max_length=64, description="Env id.")],
    role: Annotated[str | None, Query(max_length=32, description="Default: the first role.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> LeaderboardPublic:
    """Agents best first by ``mu - 3 sigma``; retired and rejected agents are left off."""
    spec = get_spec(env)
    role = role or spec.roles[0]
    if role not in spec.roles:
        raise InvalidParameter(f"{env} has no role {role!r}; its roles: {', '.join(dict.fromkeys(spec.roles))}")
    board = load_board(session, state.boards, env, role)
    rows = board_page(session, board, limit, offset)
    return LeaderboardPublic(env=env, role=role, count=len(board.rows), data=rows)
