"""Every write endpoint is under a write limit (issue 20: fair shares).

Walks the app's routes: each POST, PUT, PATCH or DELETE route must depend on a limiter
(:func:`arena.api.deps.writer`, the per-user and per-address write limits, or
:func:`arena.api.deps.optional_writer` where anonymous callers may write too) or be listed
in :data:`EXEMPT` with the reason it is limited otherwise. A new write route without
either fails here. WebSocket routes are not POST and are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import RouteContext, iter_route_contexts

from arena.api import create_app
from arena.api.deps import UserDep, optional_writer, writer

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LIMITERS: frozenset[Callable] = frozenset({writer, optional_writer})
"""Dependencies that count a request against the write limits."""
EXEMPT: dict[tuple[str, str], str] = {
    ("POST", "/api/v1/users"): "a sign-up has no user yet: the handler counts it against the sign-up limit "
    "per address per hour and the per-address write limit (Limits.sign_up)",
    # The site's forms (arena/web/accounts.py, arena/web/competitions.py) count in the handler, so that a
    # refused form is shown again with the reason instead of a JSON 429.
    ("POST", "/signup"): "Limits.sign_up in the handler, as POST /api/v1/users",
    ("POST", "/signin"): "Limits.anonymous_write (per address) in the handler, before the password is checked",
    ("POST", "/signout"): "deletes only the session of the cookie it carries (one row), CSRF-checked",
    ("POST", "/account/token"): "Limits.write (the user and its address) in the handler",
    ("POST", "/account/password"): "Limits.write (the user and its address) in the handler",
    ("POST", "/competitions/join"): "Limits.write (the user and its address) in the handler",
    ("POST", "/competitions/{competition_id}/teams"): "Limits.write (the user and its address) in the handler",
    ("POST", "/competitions/{competition_id}/teams/join"): "Limits.write (the user and its address) in the handler",
}
"""Write routes limited some other way, each with how."""


def _calls(dependant: Dependant | None) -> Iterator[Callable]:
    for dep in dependant.dependencies if dependant is not None else ():
        if dep.call is not None:
            yield dep.call
        yield from _calls(dep)


def _limited(route: RouteContext) -> bool:
    """Whether ``route`` (with its routers' dependencies) depends on a limiter."""
    dependant = getattr(route, "dependant", None) or getattr(route.original_route, "dependant", None)
    return any(call in LIMITERS for call in _calls(dependant))


def _write_routes(app: FastAPI) -> Iterator[tuple[str, str, RouteContext]]:
    """``(method, path, route)`` of every write route, through included routers (WebSockets have no methods)."""
    for route in iter_route_contexts(app.routes):
        for method in sorted(WRITE_METHODS & set(route.methods or ())):
            yield method, route.path, route


def test_every_write_route_depends_on_a_write_limiter_or_says_why_not():
    routes = list(_write_routes(create_app()))
    unlimited = [f"{m} {p}" for m, p, route in routes if (m, p) not in EXEMPT and not _limited(route)]
    assert not unlimited, (f"write routes outside the write limits: {unlimited}; depend on "
                           "arena.api.deps.WriterDep, or add them to EXEMPT with the limit that applies")
    found = {(m, p) for m, p, _ in routes}
    assert found >= set(EXEMPT), "an exemption names a route that no longer exists"
    assert {("POST", "/api/v1/agents/{agent_id}/probes"), ("POST", "/api/v1/challenges"),
            ("POST", "/api/v1/agents/{agent_id}/play")} <= found


def test_the_walk_finds_an_unlimited_route():
    app = create_app()
    router = APIRouter(prefix="/api/v1")

    @router.post("/unlimited")
    def unlimited(user: UserDep) -> None:  # authenticated, but counted by no limiter
        return None

    app.include_router(router)
    [(_, _, route)] = [w for w in _write_routes(app) if w[1] == "/api/v1/unlimited"]
    assert not _limited(route)
