"""Fixtures of the web tests: a seeded SQLite arena served by the real app.

The app is :func:`arena.api.create_app` (the JSON API, which includes the web
router), so the pages' scripts talk to the real ``/api/v1`` endpoints.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from arena.api import create_app
from arena.core.settings import Settings
from arena.storage.redis_server import EmbeddedRedis
from arena.storage.wiring import Services, open_services
from tests.web.seed import SeededArena, seed_arena


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededArena]:
    """A database private to the test module: 300 connect four ladder matches among
    three builtins, 60 tictactoe ones and one unrated simple_tag match."""
    path = tmp_path_factory.mktemp("web") / "arena.sqlite3"
    arena = seed_arena(f"sqlite:///{path}")
    yield arena
    arena.sessions.dispose()


@pytest.fixture(scope="module")
def services(seeded: SeededArena, embedded_redis: EmbeddedRedis,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """The app's services over the seeded database.

    The pages never touch Redis; the app needs one to start, so it gets logical db 0
    of the session's embedded server, which no test writes to.
    """
    data_dir: Path = tmp_path_factory.mktemp("web-data")
    redis_url = embedded_redis.url.rsplit("/", 1)[0] + "/0"
    settings = Settings(page_cache_s=0.0, data_dir=data_dir, database_url=seeded.url, redis_url=redis_url)
    with open_services(settings) as opened:
        yield opened
        opened.sessions.dispose()


@pytest.fixture(scope="module")
def app(services: Services) -> FastAPI:
    """The whole Arena app: JSON API plus the web pages."""
    return create_app(services)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's chromium driven by Playwright (the browser tests skip without them)."""
    from tests.web.test_browser import CHROMIUM, CHROMIUM_ARGS, sync_api

    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


# Reports every Content-Security-Policy violation of the page (a blocked script, style,
# connection...) on the console; installed through DevTools, so the policy does not block it.
REPORT_CSP_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) =>
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"}` +
                ` at ${e.sourceFile}:${e.lineNumber}`));
"""

# Remote loads the policy is meant to block: ReDoc's sidebar badge fetches its logo from
# Redocly's CDN (the docs are served offline; the badge shows its text without it).
BLOCKED_ON_PURPOSE = ("https://cdn.redoc.ly/",)


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    """A fresh page; the test fails if its JavaScript threw or the page broke its Content-Security-Policy."""
    from tests.web.test_browser import TIMEOUT_MS

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(REPORT_CSP_VIOLATIONS)
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    violations: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda msg: violations.append(msg.text) if msg.type == "error" and (
        "CSP violation" in msg.text or "Content Security Policy" in msg.text) else None)
    yield pg
    context.close()
    assert not errors, f"JavaScript errors: {errors}"
    violations = [v for v in violations if not any(remote in v for remote in BLOCKED_ON_PURPOSE)]
    assert not violations, f"Content-Security-Policy violations: {violations}"
