"""``/matches``: the match log, newest first, and one match's full record."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic_core import to_json

from arena.api.deps import ServicesDep, SessionDep
from arena.api.errors import error_responses
from arena.api.schemas import MAX_ID, MatchesPublic, MatchPublic
from arena.api.state import ApiState
from arena.read.replays import open_replay
from arena.read.summaries import match_summaries
from arena.storage.db import repositories as repo
from envs.errors import InvalidParameter, UnknownMatch
from envs.registry import get_spec

router = APIRouter(tags=["matches"])
_CURSOR = re.compile(r"^[0-9]{1,18}$")
_UUID = re.compile(r"^[0-9a-fA-F-]{1,36}$")


def parse_cursor(cursor: str | None) -> int | None:
    """The seq a ``next_cursor`` stands for (opaque to clients)."""
    if cursor is None:
        return None
    if not _CURSOR.fullmatch(cursor):
        raise InvalidParameter("cursor must be a next_cursor value from a previous page")
    return int(cursor)


@router.get("/matches", response_model=MatchesPublic, responses=error_responses(404, 422))
async def list_matches(
    request: Request,
    env: Annotated[str | None, Query(max_length=64)] = None,
    agent: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Agent id.")] = None,
    cursor: Annotated[str | None, Query(max_length=32)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Response:
    """Matches newest first; follow ``next_cursor`` for older ones.

    Pages are served from the page cache: a newest page for ``ARENA_PAGE_CACHE_S``,
    an older one (a cursor page, which cannot change) until it is pushed out.
    """
    if env is not None:
        get_spec(env)
    state: ApiState = request.app.state.api
    key = ("matches", env, agent, parse_cursor(cursor), limit)
    body = state.pages.get(key)
    if body is None:
        body = await state.read(_page_body, state, key)
    return Response(body, media_type="application/json")


def _page_body(state: ApiState, key: tuple) -> bytes:
    """Reads, renders and caches the page of ``key``."""
    _, env, agent, before, limit = key
    with state.services.sessions() as session:
        page = repo.match_history(session, env_id=env, agent_id=agent, before_seq=before, limit=limit,
                                  summary=True)
        data = match_summaries(session, page.matches, agent_ids=state.agent_ids.lookup)
    cursor_out = None if page.next_before_seq is None else str(page.next_before_seq)
    # Rendered without the response model: the summaries already have its types, and
    # pydantic's serializer writes the same bytes (tests/api/test_pages.py checks).
    body = to_json({"data": data, "next_cursor": cursor_out})
    if before is None:
        if page.matches:
            state.saw_match(page.matches[0].seq)
        state.pages.put(key, body, state.fresh_s)
    elif before <= state.newest_match_seq and all(None not in m["agent_ids"] for m in data):
        state.pages.put(key, body)  # final: see ApiState.newest_match_seq
    return body


@router.get("/matches/{match_id}", response_model=MatchPublic, responses=error_responses(404, 410, 422))
def get_match(
    match_id: Annotated[str, Path(max_length=64, description="Match UUID.")], session: SessionDep,
    services: ServicesDep,
) -> MatchPublic:
    """One match: the full record (seed, weights, actions) needed to replay it.

    Opening it keeps its replay; one that replay retention already dropped answers 410.
    """
    match = repo.get_match(session, match_id) if _UUID.fullmatch(match_id) else None
    if match is None:
        raise UnknownMatch(f"no match with id {match_id[:64]!r}")
    open_replay(session, services.sessions, match)
    return MatchPublic(**match_summaries(session, [match], full=True)[0])
