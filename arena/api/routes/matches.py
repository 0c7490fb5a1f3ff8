"""``/matches``: the match log, newest first, one match's full record and its replay frames.

A read changes nothing (no row, no Redis key): see :mod:`arena.read.replays`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic_core import to_json
from sqlalchemy.orm import Session

from arena.api.deps import Principal, ServicesDep, SessionDep, StateDep, optional_user
from arena.api.errors import error_responses
from arena.api.schemas import MAX_ID, MatchesPublic, MatchPublic
from arena.api.state import ApiState
from arena.core.errors import InvalidParameter, UnknownMatch
from arena.read.replays import view_replay
from arena.read.summaries import match_summaries
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from envs.registry import get_spec

router = APIRouter(tags=["matches"])
_CURSOR = re.compile(r"^[0-9]{1,18}$")
_UUID = re.compile(r"^[0-9a-fA-F-]{1,36}$")
MatchIdPath = Annotated[str, Path(max_length=64, description="Match UUID.")]
ViewerDep = Annotated[Principal | None, Depends(optional_user)]
"""Who is reading, if they sent a token (an owner's view keeps a replay)."""


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


def _stored(session: Session, match_id: str) -> repo.StoredMatch:
    match = repo.get_match(session, match_id) if _UUID.fullmatch(match_id) else None
    if match is None:
        raise UnknownMatch(f"no match with id {match_id[:64]!r}")
    return match


def _view(session: Session, services: Services, match: repo.StoredMatch, viewer: Principal | None) -> None:
    """The replay check of :func:`arena.read.replays.view_replay`: anonymous views write nothing."""
    view_replay(session, services.sessions, match, None if viewer is None else viewer.user_id,
                admin=viewer is not None and viewer.is_admin)


@router.get("/matches/{match_id}", response_model=MatchPublic, responses=error_responses(401, 404, 410, 422))
def get_match(match_id: MatchIdPath, session: SessionDep, services: ServicesDep, viewer: ViewerDep) -> MatchPublic:
    """One match: the full record (seed, weights, actions) needed to replay it.

    Reading changes nothing. Opened with the token of an owner of one of its agents (or
    an admin's), its replay is kept past the replay retention; one that retention
    already dropped answers 410.
    """
    match = _stored(session, match_id)
    _view(session, services, match, viewer)
    return MatchPublic(**match_summaries(session, [match], full=True)[0])


@router.get("/matches/{match_id}/frames", summary="Replay frames of a match",
            responses=error_responses(401, 404, 410, 422))
def get_match_frames(match_id: MatchIdPath, session: SessionDep, state: StateDep,
                     viewer: ViewerDep) -> dict[str, Any]:
    """Every position of a match, re-simulated from its record, for drawing it.

    Board games: ``{"kind": "board", "rows", "cols", "frames", "moves", "seats",
    "winner", "termination"}`` with ``frames[i][row][col]`` 0 (empty) or
    ``seat + 1``. Hide and seek: ``{"kind": "grid", "size", "walls", "doors",
    "frames": [{"step", "prep", "agents", "boxes", "ramps", "sight"}], "phases",
    ...}`` (see :func:`arena.read.grid_frames.grid_frames`).
    ``simple_tag``: ``{"kind": "particles", "frames": [{"step",
    "entities": [{"name", "x", "y", "size", "role"}]}], "bounds", ...}``. Other
    envs: ``{"kind": "none", "reason"}``. Frames are cached per match in the process
    (keyed by the record), so a repeated request does not re-simulate; like the
    match itself, reading them changes nothing unless an owner asks.
    """
    match = _stored(session, match_id)
    _view(session, state.services, match, viewer)
    return state.frames.frames(match.to_record())
