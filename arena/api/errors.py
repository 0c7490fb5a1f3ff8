"""The one place where errors become HTTP responses.

Every error a client can cause is an :class:`~envs.errors.ArenaError` subclass (the
games' and agents' in :mod:`envs.errors`, the service's in :mod:`arena.core.errors`);
:data:`STATUS_CODES` says what each means over HTTP, and one handler turns it into
``{"detail": message}`` with that status.
Request validation (pydantic) becomes a 422 whose ``detail`` is a readable string too,
so every error body has the same shape. Anything else is a bug: logged with its
traceback and answered with a generic 500.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.routing import Match

from arena.api.schemas import ConflictPublic, ErrorPublic
from arena.core.errors import (
    Conflict,
    Forbidden,
    InvalidParameter,
    InvalidRecord,
    NotAuthenticated,
    PayloadTooLarge,
    ReplayNotKept,
    TooManyRequests,
    UnknownChallenge,
    UnknownCompetition,
    UnknownMatch,
    UnknownTournament,
)
from arena.snapshots.pool import SnapshotCorrupt, SnapshotNotFound
from envs.errors import ArenaError, InvalidSubmission, ServiceUnavailable, UnknownAgent, UnknownEnv

log = logging.getLogger(__name__)

_DESCRIPTIONS = {
    400: "Bad request",
    401: "Missing or invalid API token",
    403: "Not allowed for this user",
    404: "Unknown id",
    409: "Conflicts with stored state",
    410: "No longer stored",
    413: "Upload over the size limit",
    422: "Invalid request data",
    429: "Over a rate limit or quota; retry after the Retry-After header's seconds",
    503: "A backing service is unavailable",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error codes an operation can answer."""
    return {
        code: {"model": ConflictPublic if code == 409 else ErrorPublic,
               "description": _DESCRIPTIONS[code]}
        for code in codes
    }


STATUS_CODES: dict[type[ArenaError], int] = {
    ArenaError: 400,
    NotAuthenticated: 401,
    Forbidden: 403,
    UnknownEnv: 404,
    UnknownAgent: 404,
    UnknownMatch: 404,
    UnknownChallenge: 404,
    UnknownCompetition: 404,
    UnknownTournament: 404,
    ReplayNotKept: 410,
    SnapshotNotFound: 404,
    Conflict: 409,
    PayloadTooLarge: 413,
    InvalidSubmission: 422,
    InvalidRecord: 422,
    InvalidParameter: 422,
    TooManyRequests: 429,
    SnapshotCorrupt: 500,
    ServiceUnavailable: 503,
}
"""HTTP status of each error class; a subclass answers as its nearest listed ancestor."""


def status_code_of(error: ArenaError) -> int:
    """The HTTP status code ``error`` is answered with."""
    return next(STATUS_CODES[cls] for cls in type(error).__mro__ if cls in STATUS_CODES)


def _arena_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ArenaError)
    body: dict[str, Any] = {"detail": str(exc)}
    if isinstance(exc, Conflict) and exc.existing_id is not None:
        body["existing_id"] = exc.existing_id
    status = status_code_of(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, TooManyRequests):
        headers = {"Retry-After": str(exc.retry_after_s)}
    if status >= 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc)
    return JSONResponse(body, status_code=status, headers=headers)


def _location(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if len(parts) > 1 and parts[0] in ("body", "query", "path", "header"):
        where, rest = parts[0], ".".join(parts[1:])
        return rest if where == "body" else f"{where} parameter {rest}"
    return ".".join(parts) or "request"


def validation_message(errors: list[dict[str, Any]]) -> str:
    """``"field: problem; other field: problem"`` from pydantic's error list."""
    messages = [f"{_location(tuple(e.get('loc', ())))}: {e.get('msg', 'invalid')}" for e in errors[:10]]
    more = f" (+{len(errors) - 10} more)" if len(errors) > 10 else ""
    return "; ".join(messages) + more


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": validation_message(list(exc.errors()))}, status_code=422)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app answers at the request's path (sorted)."""
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):  # also those of included routers
        if route.methods and route.matches(request.scope)[0] is not Match.NONE:
            methods |= route.methods
    return sorted(methods)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (404 of an unknown path, 405), as FastAPI answers them, except
    that a 405's ``Allow`` lists every method of the path: each FastAPI route has one
    method, and Starlette's 405 named only the first route it found there."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        exc = HTTPException(405, exc.detail, headers={**(exc.headers or {}),
                                                      "Allow": ", ".join(allowed_methods(request))})
    return await http_exception_handler(request, exc)


def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"detail": "internal server error; it was logged"}, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(ArenaError, _arena_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
