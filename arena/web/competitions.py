"""The competition pages: the list, a competition (rules, dates, boards, my team, final
standings), and the forms a signed-in person uses to join one and its teams.

The data comes from the same read models as ``/api/v1/competitions``
(:mod:`arena.read.competitions`) and the writes from the same service
(:mod:`arena.competitions.service`), so a page shows what the API says. A private
competition is a 404 page to anyone who has not joined it, as in the API. Forms carry the
session's CSRF token (:mod:`arena.api.browser`) and count against the write limits;
a refused form shows the page again with what to fix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.orm import Session

from arena.api import browser
from arena.api.competition_schemas import Code, TeamName
from arena.api.deps import client_address
from arena.api.schemas import MAX_ID
from arena.competitions import service, teams, tournaments
from arena.competitions.entries import quota as team_quota
from arena.competitions.rules import CompetitionState, final_board_key
from arena.core.errors import Conflict, Forbidden, InvalidParameter, TooManyRequests, UnknownCompetition
from arena.ladder.registration import ladder_rating_env
from arena.read import competitions as read
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.db.repositories import competitions as comp_repo
from arena.storage.db.repositories import tournaments as tour_repo
from envs.errors import ArenaError
from league.competitions.certification import FINAL_RATING_ENV

Page = Callable[..., HTMLResponse]
FormText = Annotated[str, Form(max_length=256)]
_team_name, _code = TypeAdapter(TeamName), TypeAdapter(Code)
_STATUS = {Forbidden: 403, UnknownCompetition: 404, Conflict: 409, TooManyRequests: 429}


def _caller(viewer: repo.UserInfo | None) -> service.Caller | None:
    return None if viewer is None else service.Caller(viewer.id, viewer.name, viewer.is_admin)


def _iso(moment: Any) -> str | None:
    return None if moment is None else moment.isoformat()


def competition_summary(c: comp_repo.CompetitionInfo) -> dict[str, Any]:
    """What the list shows of a competition, and its next date (the one a countdown runs to)."""
    now = utcnow()
    upcoming = [(label, moment) for label, moment in (("opens", c.opens_at), ("submissions close", c.deadline),
                                                      ("final evaluation ends", c.final_ends_at))
                if moment is not None and moment > now]
    label, moment = upcoming[0] if upcoming and c.state != CompetitionState.FINISHED else (None, None)
    return {"id": c.id, "title": c.title, "env": c.env_id, "role": c.role, "state": c.state,
            "is_public": c.is_public, "opens_at": _iso(c.opens_at), "deadline": _iso(c.deadline),
            "finished_at": _iso(c.finished_at), "next_label": label, "next_at": _iso(moment)}


def competition_page_data(session: Session, c: comp_repo.CompetitionInfo,
                          viewer: repo.UserInfo | None) -> dict[str, Any]:
    """Everything the competition page renders (boards, teams, my team, standings)."""
    _, season = read.board_public(session, c, False, ladder_rating_env(session, c.env_id))
    final_rows = read.board_public(session, c, True, FINAL_RATING_ENV)[1] if read.is_final(c) else []
    mine = comp_repo.team_of(session, c.id, viewer.id) if viewer is not None else None
    teams = read.teams_public(session, c.id, mine.id if mine else None)
    names = {row["agent_id"]: row for row in season + final_rows}
    standing_ids = [s["entry"] for s in (c.final_result or {}).get("standings", []) if s["entry"] not in names]
    names |= {a.id: {"name": a.name} for a in repo.get_agents(session, standing_ids).values()}
    data = {
        **competition_summary(c), "rules_md": c.rules_md, "merge_deadline": _iso(c.merge_deadline),
        "final_ends_at": _iso(c.final_ends_at), "final_started_at": _iso(c.final_started_at),
        "daily_submissions": c.daily_submissions, "active_entries": c.active_entries, "team_size": c.team_size,
        "allowed_paths": list(c.allowed_paths), "top_k": c.top_k, "confidence": c.confidence,
        "tie_margin": c.tie_margin, "final_floor": c.final_floor, "final_match_budget": c.final_match_budget,
        "season": season, "final_board": final_rows, "references": [r for r in season if r["reference"]],
        "teams": teams, "member": viewer is not None and service.may_see(session, c, _caller(viewer)),
        "accepting_teams": c.state in (CompetitionState.DRAFT, CompetitionState.OPEN) and utcnow() < c.deadline,
        "my_team": None, "standings": _standings(c.final_result, names),
        "final_matches": repo.count_matches(session, c.env_id, board=final_board_key(c.id)) if read.is_final(c) else 0,
        "tournaments": [tournaments.summary(t) for t in tour_repo.tournaments(session, competition_id=c.id)],
    }
    if mine is not None:
        left = team_quota(session, c, mine.id, utcnow())
        entries = read.entries_public(session, c.id, mine.id)
        agents = repo.get_agents(session, [e["agent_id"] for e in entries])
        data["my_team"] = {
            **next(t for t in teams if t["id"] == mine.id), "used_today": left.used_today,
            "left_today": left.left_today, "resets_at": _iso(left.resets_at),
            "entries": [{**e, "name": agents[e["agent_id"]].name if e["agent_id"] in agents else str(e["agent_id"]),
                         "submitted_at": _iso(e["submitted_at"])} for e in reversed(entries)],
        }
    return data


def _standings(result: dict[str, Any] | None, rows: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """The final standings and the tested pairs of a certificate, with the entries' names and teams."""
    if not result:
        return None

    def who(agent_id: Any) -> dict[str, Any]:
        row = rows.get(agent_id, {})
        return {"agent_id": agent_id, "name": row.get("name", str(agent_id)), "team": row.get("team")}

    standings = [{**s, **who(s["entry"])} for s in sorted(result.get("standings", []), key=lambda s: s["rank"])]
    pairs = [{**p, "upper_who": who(p["upper"]), "lower_who": who(p["lower"])} for p in result.get("pairs", [])]
    return {"certified": bool(result.get("certified")), "floor_met": bool(result.get("floor_met")),
            "standings": standings, "pairs": pairs, "config": result.get("config", {})}


def add_competition_routes(router: APIRouter, page: Page, not_found: Callable[[Request, str], HTMLResponse],
                           sessions_of: Callable[[Request], Any]) -> None:
    """Adds ``/competitions`` (and its forms) and ``/competitions/{id}`` to ``router``."""

    def viewer(request: Request) -> repo.UserInfo | None:
        return browser.session_user(request, sessions_of(request))

    def listing(request: Request, status_code: int = 200, error: str | None = None) -> HTMLResponse:
        user = viewer(request)
        with sessions_of(request)() as session:
            found, total = comp_repo.page_competitions(session, user_id=user.id if user else None,
                                                       is_admin=bool(user and user.is_admin), limit=200)
        return page(request, "competitions.html", status_code=status_code, title="Competitions",
                    competitions=[competition_summary(c) for c in found], total=total, error=error)

    @router.get("/competitions", response_class=HTMLResponse, include_in_schema=False)
    def competitions(request: Request) -> HTMLResponse:
        return listing(request)

    def competition_page(request: Request, competition_id: int, status_code: int = 200,
                         error: str | None = None) -> HTMLResponse:
        user = viewer(request)
        with sessions_of(request)() as session:
            try:
                found = service.visible(session, competition_id, _caller(user))
            except UnknownCompetition:
                return not_found(request, f"competition {competition_id}")
            data = competition_page_data(session, found, user)
        return page(request, "competition.html", status_code=status_code, title=data["title"], competition=data,
                    now=utcnow().isoformat(), error=error)

    @router.get("/competitions/{competition_id}", response_class=HTMLResponse, include_in_schema=False)
    def competition(request: Request, competition_id: int) -> HTMLResponse:
        if not 1 <= competition_id <= MAX_ID:
            return not_found(request, f"competition {competition_id}")
        return competition_page(request, competition_id)

    def signed_in_write(request: Request, csrf_token: str) -> service.Caller:
        """The signed-in caller of a form post (CSRF checked, write limits counted)."""
        user = viewer(request)
        if user is None:
            raise Forbidden("sign in first")
        browser.check_csrf(request, csrf_token, browser.session_id(request))
        state = request.app.state.api
        state.limits.write(user.id, client_address(request))
        return _caller(user)

    def on_competition(request: Request, competition_id: int, csrf_token: str,
                       act: Callable[[service.Caller], object]) -> Response:
        if viewer(request) is None:
            return RedirectResponse(f"/signin?next=/competitions/{competition_id}", status_code=303)
        try:
            act(signed_in_write(request, csrf_token))
        except (ArenaError, ValidationError) as exc:
            message = "check the form's values" if isinstance(exc, ValidationError) else str(exc)
            return competition_page(request, competition_id, _STATUS.get(type(exc), 400), error=message)
        return RedirectResponse(f"/competitions/{competition_id}#my-team", status_code=303)

    @router.post("/competitions/{competition_id}/teams", include_in_schema=False)
    def create_team(request: Request, competition_id: int, name: FormText, csrf_token: FormText = "") -> Response:
        services = request.app.state.api.services
        return on_competition(request, competition_id, csrf_token, lambda caller: teams.create_team(
            services, caller, competition_id, _team_name.validate_python(name.strip())))

    @router.post("/competitions/{competition_id}/teams/join", include_in_schema=False)
    def join_team(request: Request, competition_id: int, join_code: FormText, csrf_token: FormText = "") -> Response:
        services = request.app.state.api.services
        return on_competition(request, competition_id, csrf_token, lambda caller: teams.join_team(
            services, caller, competition_id, _code.validate_python(join_code.strip())))

    @router.post("/competitions/join", include_in_schema=False)
    def join_by_invite(request: Request, invite_code: FormText, csrf_token: FormText = "") -> Response:
        if viewer(request) is None:
            return RedirectResponse("/signin?next=/competitions", status_code=303)
        try:
            caller = signed_in_write(request, csrf_token)
            code = _code.validate_python(invite_code.strip())
            with sessions_of(request)() as session:
                found = comp_repo.competition_by_invite(session, code)
            if found is None:
                raise InvalidParameter("no competition has that invite code; ask its organizer for it")
            service.join_competition(request.app.state.api.services, caller, found.id, code)
        except (ArenaError, ValidationError) as exc:
            message = "an invite code is 4-32 letters, digits, '_' or '-'" if isinstance(exc, ValidationError) \
                else str(exc)
            return listing(request, _STATUS.get(type(exc), 400), error=message)
        return RedirectResponse(f"/competitions/{found.id}", status_code=303)
