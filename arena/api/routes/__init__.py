"""The ``/api/v1`` routers, one module per resource; handlers stay thin."""

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


def api_router() -> APIRouter:
    """Every JSON endpoint, mounted under :data:`API_PREFIX`."""
    router = APIRouter(prefix=API_PREFIX)
    for module in (health, users, envs, connected, people, agents, clones, probes, leaderboard, matches,
                   leagues, challenges, competitions, tournaments, admin):
        router.include_router(module.router)
    router.include_router(league_api.router)  # the league API for outside trainers
    return router
