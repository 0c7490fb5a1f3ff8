"""``GET /health``: liveness, with the state of the database and Redis."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from arena.api.deps import ServicesDep
from arena.api.schemas import HealthPublic
from arena.storage.db import repositories as repo

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


def _probe(check: Callable[[], object]) -> str:
    try:
        check()
    except Exception as exc:  # noqa: BLE001 - any failure is the answer here
        log.warning("health check failed: %s", exc)
        return f"unavailable: {type(exc).__name__}"
    return "ok"


@router.get("/health", response_model=HealthPublic, responses={503: {"model": HealthPublic}})
def health(services: ServicesDep) -> JSONResponse:
    """``ok`` when the database and Redis answer; 503 ``degraded`` otherwise."""

    def database() -> None:
        with services.sessions() as session:
            repo.ping(session)

    body = HealthPublic(status="ok", database=_probe(database), redis=_probe(services.redis.ping))
    if body.database != "ok" or body.redis != "ok":
        body.status = "degraded"
    return JSONResponse(body.model_dump(), status_code=200 if body.status == "ok" else 503)

