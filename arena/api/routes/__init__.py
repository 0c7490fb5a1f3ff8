"""The ``/api/v1`` routers, one module per resource; handlers stay thin."""

from functools import cache

from fastapi import APIRouter

from arena.api.routes import (
    admin,
    agents,
    challenges,
    clones,
    competitions,
    connected,
    envs,
    health,
    leaderboard,
    league_api,
    leagues,
    matches,
    people,
    probes,
    tournaments,
    users,
)

API_PREFIX = "/api/v1"


@cache
def api_router() -> APIRouter:
    """Every JSON endpoint, mounted under :data:`API_PREFIX`.

    Built once per process (0.2 s of FastAPI's route analysis) and included by every app made in it
    (each test makes one): it holds no app's state, a handler finds its services in ``request.app``."""
    router = APIRouter(prefix=API_PREFIX)
    for module in (health, users, envs, connected, people, agents, clones, probes, leaderboard, matches,
                   leagues, challenges, competitions, tournaments, admin):
        router.include_router(module.router)
    router.include_router(league_api.router)  # the league API for outside trainers
    return router
