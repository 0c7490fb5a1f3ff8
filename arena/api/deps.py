"""Request dependencies: the services, a database session, the calling user (and, for
write endpoints, the write rate limits).

Authentication is a bearer token (``Authorization: Bearer <token>``): either a user's
API token (stored only as its sha256) or the operator's ``ARENA_ADMIN_TOKEN``, which
acts as an admin without a user row. Without one, a browser signed in on the site is
its session's user, where that is CSRF-safe (:mod:`arena.api.browser`). Dependencies
that touch the database are plain functions, so FastAPI runs them in its thread pool,
off the event loop.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from arena.api import browser
from arena.api.schemas import MAX_ID
from arena.api.state import ApiState
from arena.core.errors import Forbidden, NotAuthenticated
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services

_NOT_IN_KEYS = re.compile(r"[^A-Za-z0-9_.:+-]")

AgentIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="Agent id.")]
CompetitionIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="Competition id.")]
LeagueIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="League id.")]
TournamentIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="Tournament id.")]
"""The id path parameters, one definition each for every route that takes one (ids are 32-bit columns)."""

# Longest token looked up: ours are 43 characters; anything much longer is not one.
MAX_TOKEN_CHARS = 512

_bearer = HTTPBearer(
    auto_error=False,
    description="An API token from POST /api/v1/users (or the operator's ARENA_ADMIN_TOKEN).",
)


@dataclass(frozen=True)
class Principal:
    """Who is calling.

    Attributes:
        user_id: The user's id; ``None`` for the operator's admin token.
        name: The user's name (``admin`` for the admin token).
        is_admin: May act on anything (retire any agent).
    """

    user_id: int | None
    name: str
    is_admin: bool


def get_state(request: Request) -> ApiState:
    """The API's services and caches (``app.state.api``)."""
    return request.app.state.api


def get_services(state: Annotated[ApiState, Depends(get_state)]) -> Services:
    return state.services


def read_session(services: Annotated[Services, Depends(get_services)]) -> Iterator[Session]:
    """A session for one request's reads (writes open their own transaction)."""
    with services.sessions() as session:
        yield session


StateDep = Annotated[ApiState, Depends(get_state)]
ServicesDep = Annotated[Services, Depends(get_services)]
SessionDep = Annotated[Session, Depends(read_session)]


def optional_user(
    request: Request,
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal | None:
    """The caller, or ``None`` when no ``Authorization`` header was sent.

    Raises:
        NotAuthenticated: A header was sent but is not a valid bearer token.
    """
    if credentials is None:
        if request.headers.get("authorization"):
            raise NotAuthenticated("the Authorization header must be 'Bearer <token>'")
        return browser_user(request, services)
    principal = principal_for_token(services, credentials.credentials)
    if principal is None:
        raise NotAuthenticated("invalid or revoked API token; create one with POST /api/v1/users")
    return principal


def browser_user(request: Request, services: Services) -> Principal | None:
    """The user of the request's browser session (``None``: none, or expired).

    A read may use the session cookie alone; a write must also carry the session's CSRF
    token in ``X-CSRF-Token`` and come from this site, so another site cannot make a
    signed-in browser write.

    Raises:
        Forbidden: A write signed in by the cookie without its CSRF token, or from another site.
    """
    sid = browser.session_id(request)
    if sid is None:
        return None
    user = browser.session_user(request, services.sessions)
    if user is None:
        return None
    given = request.headers.get(browser.CSRF_HEADER)
    if request.method not in browser.SAFE_METHODS and not browser.csrf_ok(request, given, sid):
        raise Forbidden(f"a write signed in by the site's session cookie needs the page's "
                        f"{browser.CSRF_HEADER} header and must come from this site; scripts "
                        "and the CLI send 'Authorization: Bearer <token>' instead")
    return Principal(user_id=user.id, name=user.name, is_admin=user.is_admin)


def principal_for_token(services: Services, token: str) -> Principal | None:
    """Who ``token`` belongs to (a user, or the operator's admin token); ``None``: nobody."""
    admin = services.settings.admin_token
    if admin is not None and hmac.compare_digest(
        token.encode(), admin.get_secret_value().encode()
    ):
        return Principal(user_id=None, name="admin", is_admin=True)
    if len(token) <= MAX_TOKEN_CHARS:
        with services.sessions() as session:
            user = repo.user_for_token(session, token)
        if user is not None:
            return Principal(user_id=user.id, name=user.name, is_admin=user.is_admin)
    return None


def current_user(user: Annotated[Principal | None, Depends(optional_user)]) -> Principal:
    """The caller; raises :class:`NotAuthenticated` without a token."""
    if user is None:
        raise NotAuthenticated(
            "this endpoint needs an API token: send 'Authorization: Bearer <token>' "
            "(create a user and token with POST /api/v1/users)"
        )
    return user


UserDep = Annotated[Principal, Depends(current_user)]


def client_address(request: Request) -> str:
    """The caller's address, as rate limits count it (a reverse proxy's, unless uvicorn
    trusts its ``X-Forwarded-For``: ``FORWARDED_ALLOW_IPS``)."""
    host = request.client.host if request.client and request.client.host else "unknown"
    return _NOT_IN_KEYS.sub("_", host)[:64]  # e.g. an IPv6 zone ("fe80::1%eth0") in a Redis key


def writer(request: Request, user: UserDep, state: StateDep) -> Principal:
    """The caller of a write request, counted against the write limits (not the admin).

    Raises:
        TooManyRequests: The user or its address made too many writes this minute.
    """
    if user.user_id is not None:
        state.limits.write(user.user_id, client_address(request))
    return user


WriterDep = Annotated[Principal, Depends(writer)]
"""The calling user of a write endpoint (within the write rate limits)."""


def optional_writer(request: Request, user: Annotated[Principal | None, Depends(optional_user)],
                    state: StateDep) -> Principal | None:
    """The caller of a write request anybody may make (``None``: anonymous), counted
    against the write limits: a user's and its address's, or the address's alone.

    Raises:
        TooManyRequests: The user or the address made too many writes this minute.
    """
    if user is None:
        state.limits.anonymous_write(client_address(request))
    elif user.user_id is not None:
        state.limits.write(user.user_id, client_address(request))
    return user


OptionalWriterDep = Annotated[Principal | None, Depends(optional_writer)]
"""The caller, if signed in, of a write endpoint open to anonymous callers (within the write limits)."""


def admin_user(user: UserDep) -> Principal:
    """The caller if an admin (the ``ARENA_ADMIN_TOKEN`` or an admin user); else :class:`Forbidden`."""
    if not user.is_admin:
        raise Forbidden("this endpoint is for admins: use ARENA_ADMIN_TOKEN or an admin user's token")
    return user


AdminDep = Annotated[Principal, Depends(admin_user)]
