"""The FastAPI application: JSON API under ``/api/v1``, web pages, OpenAPI at ``/openapi.json``
(browsable at ``/docs`` and ``/redoc``, served offline from the package).

``create_app(services)`` serves already opened services (tests, ``arena serve``);
``create_app()`` opens them from the ``ARENA_*`` settings when the app starts and
closes them when it stops (``uvicorn --factory arena.api.app:create_app``).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import iter_route_contexts

from arena.api.deps import current_user
from arena.api.docs import docs_router
from arena.api.errors import install_error_handlers
from arena.api.routes import api_router
from arena.api.state import ApiState
from arena.connected.gateway import Releases
from arena.core.metrics import metrics_app
from arena.core.settings import get_settings
from arena.storage.wiring import Services, open_services
from arena.web.security import SecurityHeaders

log = logging.getLogger(__name__)

API_VERSION = "1.0.0"
OPENAPI_URL = "/openapi.json"


def _start_background(stack: ExitStack, services: Services) -> None:
    """The scheduler (validation, ladders) on a thread, stopped with the app."""
    from arena.ladder.background import BackgroundService, ServiceConfig
    from arena.runners import InProcessRunner

    runner = InProcessRunner(services.snapshot_cache_factory()())
    stack.callback(runner.close)
    service = BackgroundService(services, runner, ServiceConfig.from_settings(services.settings)).start()
    stack.callback(service.stop)
    _start_probes(stack, services)
    log.info("background service started")


def _start_probes(stack: ExitStack, services: Services) -> None:
    """Exploitability probes in the background (none when ``ARENA_PROBE_CONCURRENCY`` is 0)."""
    if services.settings.probe_concurrency == 0:
        return
    from arena.evaluation.probes import ProbeService

    probes = ProbeService(services).start()
    stack.callback(probes.stop)


async def _close_gateway_redis(app: FastAPI) -> None:
    """Close the connected agents' gateway's Redis client (made by the first socket), once the releases
    that use it are done: nothing else closes it, and on asyncio's own event loop (uvloop closes them
    when the loop ends) its connections stayed open in Redis after the app stopped."""
    client = getattr(app.state, "connected_redis", None)
    if client is None:
        return
    app.state.connected_redis = None  # an app started again makes a new one
    try:
        await client.aclose()
    except Exception:
        log.warning("could not close the connected agents' Redis client", exc_info=True)


def create_app(services: Services | None = None, *, start_background: bool = False) -> FastAPI:
    """Build the Arena app.

    Args:
        services: Opened services to serve (the caller closes them); ``None`` opens
            them from the settings at startup and closes them at shutdown.
        start_background: Also run the scheduler (:class:`arena.ladder.background.BackgroundService`)
            in this process while the app is up.

    Returns:
        The app; ``app.state.api`` holds the services and the API's caches.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with ExitStack() as stack:
            if getattr(app.state, "api", None) is None:
                app.state.api = ApiState(stack.enter_context(open_services(get_settings())))
                app.state.services = app.state.api.services
                stack.callback(_forget_services, app)
            stack.callback(app.state.api.close)
            if start_background:
                _start_background(stack, app.state.api.services)
            # Move everything loaded so far (torch, SQLAlchemy, ...: millions of objects)
            # out of the collector's sight: full collections otherwise rescan them all
            # and pause a request for 100-300 ms, which dominated the API's p99 latency.
            # A heap someone already froze (the test session, once: it starts an app per
            # test, and the full collection cost each 0.2-0.4 s) is left as it is.
            if gc.get_freeze_count() == 0:
                gc.collect()
                gc.freeze()
                stack.callback(gc.unfreeze)
            yield
            # uvicorn cancels the sockets' handlers still running when its graceful shutdown
            # times out, then ends the loop: let their releases reach Redis first.
            await app.state.connected_releases.wait()
            await _close_gateway_redis(app)

    app = FastAPI(
        title="Arena",
        version=API_VERSION,
        summary="Submit agents, watch rated matches, read leaderboards with their uncertainty.",
        lifespan=lifespan,
        openapi_url=OPENAPI_URL,
        docs_url=None,  # FastAPI's pages load Swagger UI/ReDoc from a CDN: ours are served locally
        redoc_url=None,
    )
    app.state.api = None if services is None else ApiState(services)
    app.state.connected_releases = Releases()  # connected agents' sockets: waited for at shutdown
    # The web pages find the database through app.state.services.
    app.state.services = services
    install_error_handlers(app)
    app.add_middleware(SecurityHeaders)  # CSP with a nonce per request, nosniff, frame-ancestors
    app.mount("/metrics", metrics_app())  # Prometheus text format (not part of the OpenAPI schema)
    app.include_router(api_router())
    app.include_router(docs_router(OPENAPI_URL, app.title))
    from arena.web.routes import web_router  # the pages call the JSON API above

    app.include_router(web_router())
    _say_where_auth_is_optional(app)
    return app


def _needs_token(dependant: Dependant) -> bool:
    """Whether a route's dependencies demand a caller (:func:`~arena.api.deps.current_user`)."""
    return any(d.call is current_user or _needs_token(d) for d in dependant.dependencies)


def _say_where_auth_is_optional(app: FastAPI) -> None:
    """OpenAPI: an operation that reads the token when sent but serves anonymous callers too
    lists the empty requirement ``{}`` beside the bearer scheme, so its schema says that
    auth is optional there (FastAPI lists the scheme alone wherever a route reads it)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # cached by FastAPI (made again when routes change): the marks below are idempotent
        for route in iter_route_contexts(app.routes):  # also those of included routers
            dependant = getattr(route, "dependant", None)
            if dependant is None or _needs_token(dependant):
                continue
            for method in route.methods or ():
                operation = schema["paths"].get(route.path_format, {}).get(method.lower(), {})
                if operation.get("security") and {} not in operation["security"]:
                    operation["security"].append({})
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _forget_services(app: FastAPI) -> None:
    app.state.api = None
    app.state.services = None
