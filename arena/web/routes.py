"""The web pages (server-rendered Jinja2); their JSON lives in :mod:`arena.api.routes`.

``web_router()`` returns an :class:`~fastapi.APIRouter` the API app includes with
``app.include_router(web_router())``. It carries the ``/static`` mount, so nothing
else needs registering. Handlers find the database through the app: the API's
``app.state.api`` (:class:`arena.api.state.ApiState`, whose board cache the
leaderboard page shares), else ``app.state.services`` (an
:class:`arena.storage.wiring.Services`) or ``app.state.sessions`` (a session factory).

Every page renders its data on the server, so it reads fine without JavaScript; the
scripts in ``static/`` then make it live (leaderboard polling, charts, replay
controls) by calling the JSON API under ``/api/v1``.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session

from arena.api import browser
from arena.api.routes import API_PREFIX
from arena.api.schemas import MAX_ID
from arena.api.state import ApiState
from arena.core.errors import ReplayNotKept
from arena.ladder.people import PLAYABLE_ENVS, unplayable_reason
from arena.read.frames import match_frames
from arena.read.humans import humans_board
from arena.read.leagues import league_page_data, leagues_of
from arena.read.pages import (
    agent_data,
    env_seats,
    env_summaries,
    leaderboard_data,
    match_data,
    payoff_data,
    recent_matches,
    waiting_data,
)
from arena.read.replays import view_replay
from arena.storage.db import Sessions
from arena.storage.db import repositories as repo
from arena.web.accounts import add_account_routes
from arena.web.competitions import add_competition_routes
from arena.web.filters import FILTERS
from arena.web.tournaments import add_tournament_routes
from envs.errors import UnknownEnv
from envs.registry import get_spec, list_envs

WEB_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = WEB_DIR / "templates"
STATIC_DIR = WEB_DIR / "static"
# Leaderboard refresh period of the page's script, in milliseconds.
POLL_MS = 2000


def page_context(request: Request) -> dict[str, Any]:
    """What every page's template gets: the CSP nonce for its scripts, the signed-in
    ``viewer`` (or ``None``) and that session's CSRF token (``session_csrf``)."""
    viewer, session_csrf = None, None
    sid = browser.session_id(request)
    if sid is not None:
        try:
            viewer = browser.session_user(request, app_sessions(request))
        except RuntimeError:  # an app without a database: nobody is signed in
            viewer = None
        session_csrf = None if viewer is None else browser.csrf_token_for(sid)
    return {"csp_nonce": getattr(request.state, "csp_nonce", ""), "viewer": viewer, "session_csrf": session_csrf}


def make_templates() -> Jinja2Templates:
    """The Jinja2 environment of the pages, with Arena's formatting filters."""
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR), context_processors=[page_context])
    templates.env.filters.update(FILTERS)
    templates.env.globals.update(api=API_PREFIX, poll_ms=POLL_MS)
    return templates


def _api_state(request: Request) -> ApiState | None:
    """The API's state (services and caches) when the app is :func:`arena.api.create_app`'s."""
    return getattr(request.app.state, "api", None)


def app_sessions(request: Request) -> Sessions:
    """The session factory of the app serving ``request``.

    Looked up, in order, in ``app.state.api.services`` (the API app's state),
    ``app.state.services`` and ``app.state.sessions``.

    Raises:
        RuntimeError: The app has none of them.
    """
    state = request.app.state
    api_services = getattr(_api_state(request), "services", None)
    for services in (api_services, getattr(state, "services", None)):
        if services is not None:
            return services.sessions
    sessions = getattr(state, "sessions", None)
    if sessions is None:
        raise RuntimeError("the app has no database: set app.state.api, .services or .sessions")
    return sessions


def db_session(
    sessions: Annotated[Sessions, Depends(app_sessions)],
) -> Iterator[Session]:
    """A read-only session for one request."""
    with sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(db_session)]
LeagueIdPath = Annotated[int, PathParam(ge=1, le=MAX_ID, description="League id.")]


@cache
def web_router() -> APIRouter:
    """The pages and the ``/static`` files (the JSON they call is :func:`arena.api.routes.api_router`'s).

    Built once per process, as ``api_router``, and included by every app made in it (each test makes
    one): the pages find their database in ``request.app``, and the apps share the compiled templates."""
    router = APIRouter()
    templates = make_templates()
    router.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        response = templates.TemplateResponse(request, name, context, status_code=status_code)
        if browser.session_id(request) is not None:  # it names the viewer and carries its CSRF token
            response.headers.setdefault("Cache-Control", "private")
            response.headers["Vary"] = "Cookie"
        return response

    def not_found(request: Request, what: str) -> HTMLResponse:
        return page(request, "not_found.html", status_code=404, title="Not found", what=what)

    add_account_routes(router, page)
    add_competition_routes(router, page, not_found, app_sessions)
    add_tournament_routes(router, page, not_found, app_sessions)

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(request: Request, session: SessionDep) -> HTMLResponse:
        return page(request, "index.html", title="Environments", envs=env_summaries(session))

    @router.get("/envs/{env_id}", response_class=HTMLResponse, include_in_schema=False)
    def leaderboard(request: Request, env_id: str, session: SessionDep,
                    role: str | None = None) -> HTMLResponse:
        try:
            spec = get_spec(env_id)
        except UnknownEnv:
            return not_found(request, f"environment {env_id}")
        roles = list(dict.fromkeys(spec.roles))
        role = role if role in roles else roles[0]
        return page(request, "leaderboard.html", title=f"{env_id} leaderboard", spec=spec,
                    roles=roles, role=role,
                    board=leaderboard_data(session, env_id, role, state=_api_state(request)),
                    matches=recent_matches(session, env_id, limit=10), leagues=leagues_of(session, env_id),
                    waiting=waiting_data(session, env_id, role),
                    seats=env_seats(session, env_id, _api_state(request)) if spec.num_seats == 2 else None,
                    total_matches=repo.count_matches(session, env_id),
                    humans=humans_board(session, env_id, limit=20) if env_id in PLAYABLE_ENVS else None)

    @router.get("/envs/{env_id}/payoff", response_class=HTMLResponse, include_in_schema=False)
    def payoff(request: Request, env_id: str, session: SessionDep, top: int = 8) -> HTMLResponse:
        try:
            get_spec(env_id)
        except UnknownEnv:
            return not_found(request, f"environment {env_id}")
        top = min(max(top, 2), 32)
        return page(request, "payoff.html", title=f"{env_id} payoff", env_id=env_id, top=top,
                    payoff=payoff_data(session, env_id, top, state=_api_state(request)))

    @router.get("/leagues/{league_id}", response_class=HTMLResponse, include_in_schema=False)
    def league(request: Request, league_id: LeagueIdPath, session: SessionDep) -> HTMLResponse:
        data = league_page_data(session, league_id)
        if data is None:
            return not_found(request, f"league {league_id}")
        return page(request, "league.html", title=f"League {data['name']}", league=data)

    @router.get("/agents/{agent_id}", response_class=HTMLResponse, include_in_schema=False)
    def agent(request: Request, agent_id: int, session: SessionDep) -> HTMLResponse:
        data = agent_data(session, agent_id)
        if data is None:
            return not_found(request, f"agent {agent_id}")
        playable = not unplayable_reason(repo.get_agent(session, agent_id))
        return page(request, "agent.html", title=data["name"], agent=data, playable=playable)

    @router.get("/play/{agent_id}", response_class=HTMLResponse, include_in_schema=False)
    def play(request: Request, agent_id: int, session: SessionDep) -> HTMLResponse:
        stored = repo.get_agent(session, agent_id)
        if stored is None:
            return not_found(request, f"agent {agent_id}")
        return page(request, "play.html", title=f"Play {stored.name}", agent=stored,
                    reason=unplayable_reason(stored), choose_seat=stored.env_id != "rps-v2")

    @router.get("/admin/integrity", response_class=HTMLResponse, include_in_schema=False)
    def admin_integrity(request: Request, env: str | None = None) -> HTMLResponse:
        # The flags are fetched by the page's script with the admin's bearer token: the page holds no data.
        # Every env: clone flags concern them all (the rating checks only symmetric 1v1 ladders).
        envs = [s.env_id for s in list_envs()]
        return page(request, "admin_integrity.html", title="Integrity", envs=envs,
                    env=env if env in envs else envs[0])

    @router.get("/matches/{match_id}", response_class=HTMLResponse, include_in_schema=False)
    def match(request: Request, match_id: str, session: SessionDep) -> HTMLResponse:
        data = match_data(session, match_id)
        if data is None:
            return not_found(request, f"match {match_id}")
        stored = repo.get_match(session, match_id)
        state = _api_state(request)
        try:
            view_replay(session, app_sessions(request), stored)  # anonymous: writes nothing
            record = stored.to_record()
            frames = match_frames(record) if state is None else state.frames.frames(record)
        except ReplayNotKept as exc:
            frames = {"kind": "none", "reason": str(exc)}
        return page(request, "match.html", title=f"Match {data['seq']}", match=data, frames=frames)

    return router
