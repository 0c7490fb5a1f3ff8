"""The tournament page: standings, a crosstable (round robin, Swiss) or a bracket (single
elimination), and every round's tables and games, linked from its competition's page.

The page renders the same JSON as ``GET /api/v1/tournaments/{id}``
(:func:`arena.competitions.tournaments.public`); while the tournament runs,
``/static/tournament.js`` polls that endpoint and redraws the sections. A tournament of a
private competition is a 404 page to anyone who may not see the competition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from arena.api import browser
from arena.api.schemas import MAX_ID
from arena.client.tournaments import points
from arena.competitions import service
from arena.competitions import tournaments as tours
from arena.core.errors import UnknownTournament

TIEBREAKS = {"swiss": "Buchholz", "round_robin": "Sonneborn-Berger", "double_round_robin": "Sonneborn-Berger",
             "single_elimination": "Round reached"}
KINDS = {"swiss": "Swiss", "round_robin": "Round robin", "double_round_robin": "Double round robin",
         "single_elimination": "Single elimination"}


def page_data(data: dict[str, Any]) -> dict[str, Any]:
    """The API's JSON plus what the template looks up: names and seeds by agent id, crosstable cells."""
    names = {e["agent_id"]: e["name"] for e in data["entrants"]}
    seeds = {e["agent_id"]: e["seed"] for e in data["entrants"]}
    cells = {row["agent_id"]: {m["agent_id"]: " ".join(points(p) for p in m["points"]) for m in row["against"]}
             for row in data["crosstable"]}
    return {**data, "names": names, "seeds": seeds, "cells": cells, "tiebreak_name": TIEBREAKS[data["kind"]],
            "kind_name": KINDS[data["kind"]], "bracket": data["kind"] == "single_elimination"}


def add_tournament_routes(router: APIRouter, page: Callable[..., HTMLResponse],
                          not_found: Callable[[Request, str], HTMLResponse],
                          sessions_of: Callable[[Request], Any]) -> None:
    """Adds ``/tournaments/{id}`` to ``router``."""

    @router.get("/tournaments/{tournament_id}", response_class=HTMLResponse, include_in_schema=False)
    def tournament(request: Request, tournament_id: int) -> HTMLResponse:
        if not 1 <= tournament_id <= MAX_ID:
            return not_found(request, f"tournament {tournament_id}")
        user = browser.session_user(request, sessions_of(request))
        caller = None if user is None else service.Caller(user.id, user.name, user.is_admin)
        with sessions_of(request)() as session:
            try:
                tours.visible(session, tournament_id, caller)
            except UnknownTournament:
                return not_found(request, f"tournament {tournament_id}")
            data = page_data(tours.public(session, *tours.load(session, tournament_id)))
        return page(request, "tournament.html", title=data["title"], t=data, points=points)
