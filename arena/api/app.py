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

from fastapi import FastAPI

from arena.api.docs import docs_router
from arena.api.errors import install_error_handlers
from arena.api.routes import api_router
from arena.api.state import ApiState
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
            gc.collect()
            gc.freeze()
            stack.callback(gc.unfreeze)
            yield

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
    # The web pages find the database through app.state.services.
    app.state.services = services
    install_error_handlers(app)
    app.add_middleware(SecurityHeaders)  # CSP with a nonce per request, nosniff, frame-ancestors
    app.mount("/metrics", metrics_app())  # Prometheus text format (not part of the OpenAPI schema)
    app.include_router(api_router())
    app.include_router(docs_router(OPENAPI_URL, app.title))
    from arena.web.routes import web_router  # the pages call the JSON API above

    app.include_router(web_router())
    return app


def _forget_services(app: FastAPI) -> None:
    app.state.api = None
    app.state.services = None
