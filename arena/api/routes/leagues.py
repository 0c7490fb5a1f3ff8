"""``/leagues``: a training league's strategy timeline (the data of its web page)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from arena.api.deps import LeagueIdPath, SessionDep
from arena.api.errors import error_responses
from arena.api.schemas import LeagueTimelinePublic
from arena.read.leagues import league_page_data

router = APIRouter(tags=["leagues"])
TIMELINE_KEYS = ("id", "name", "env_id", "phases", "roles", "rows", "firsts", "exploiters")


@router.get("/leagues/{league_id}/timeline", response_model=LeagueTimelinePublic,
            summary="Strategy timeline of a training league", responses=error_responses(404, 422))
def timeline(league_id: LeagueIdPath, session: SessionDep) -> dict[str, Any]:
    """Phase rates and ratings per generation, the first match of each phase, and the exploiters apart.

    ``{"id", "name", "env_id", "phases", "roles", "rows": [{"generation",
    "episodes", "rates": {phase: rate}, "ratings": {role: [mu, sigma]}, "firsts"}],
    "firsts": [{"phase", "generation", "match_id"}], "exploiters": [{"generation", "role",
    "index", "score", "edge", "snapshot", "reset"}]}``: ``rows`` are the main teams' generations;
    ``exploiters`` (empty without exploiters) each exploiter's score against the other role's
    main, its edge over its own main, the snapshot it was frozen as (or null) and whether it was reset.
    """
    data = league_page_data(session, league_id)
    if data is None:
        raise HTTPException(status_code=404, detail=f"no league with id {league_id}")
    return {k: data[k] for k in TIMELINE_KEYS}
