"""``GET /health``: liveness, with the state of the database and Redis, and the ONNX sandbox's
confinement (which layers its worker processes get here)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from arena.api.deps import ServicesDep
from arena.api.schemas import HealthPublic, OnnxSandboxPublic
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


def _onnx_sandbox(mode: str | None) -> OnnxSandboxPublic | None:
    from agents.onnx_agents.sandbox import confinement_report  # no onnxruntime: a throwaway probe

    try:
        return OnnxSandboxPublic.model_validate(confinement_report(mode))
    except (ValueError, OSError) as exc:
        log.warning("ONNX sandbox check failed: %s", exc)
        return None


@router.get("/health", response_model=HealthPublic, responses={503: {"model": HealthPublic}})
def health(services: ServicesDep) -> JSONResponse:
    """``ok`` when the database and Redis answer; 503 ``degraded`` otherwise. ``onnx_sandbox``
    says which confinement layers ONNX workers get here (and why uploads are refused, if so)."""

    def database() -> None:
        with services.sessions() as session:
            repo.ping(session)

    body = HealthPublic(status="ok", database=_probe(database), redis=_probe(services.redis.ping),
                        onnx_sandbox=_onnx_sandbox(services.settings.onnx_confinement))
    if body.database != "ok" or body.redis != "ok":
        body.status = "degraded"
    return JSONResponse(body.model_dump(), status_code=200 if body.status == "ok" else 503)

