"""``create_app`` on its own: services opened from the settings, and the background service."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from arena.api import create_app
from arena.core.settings import get_settings
from tests.api.helpers import API, auth, checkpoint, new_user, upload
from tests.waiting import wait_for


@pytest.fixture
def arena_env(monkeypatch, tmp_path, migrated_db_url, redis_url):
    """``ARENA_*`` settings pointing at a test database and Redis db."""
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "arena"))
    monkeypatch.setenv("ARENA_DATABASE_URL", migrated_db_url)
    monkeypatch.setenv("ARENA_REDIS_URL", redis_url)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_app_opens_and_closes_its_own_services(arena_env):
    app = create_app()
    with TestClient(app) as client:
        assert client.get(f"{API}/health").json()["status"] == "ok"
        assert app.state.api.services.settings.data_dir.name == "arena"
    assert app.state.api is None  # closed with the app


@pytest.mark.slow
def test_background_service_validates_a_submission(arena_env):
    with TestClient(create_app(start_background=True)) as client:
        token = new_user(client, "ada")
        agent = upload(client, token, *checkpoint(seed=3)[:2]).json()
        def status() -> str:
            return client.get(f"{API}/agents/{agent['id']}", headers=auth(token)).json()["status"]
        settled = wait_for("the upload's validation", lambda: (s := status()) not in ("queued", "validating") and s,
                           timeout_s=120, every_s=0.2)
        assert settled in ("placement", "rated"), settled


def test_metrics_endpoint_counts_recorded_matches(migrated_db_url, redis_url, tmp_path):
    from fastapi.testclient import TestClient

    from arena.api.app import create_app
    from arena.core.settings import Settings
    from arena.ladder.dispatch import LadderConfig, open_ladder
    from arena.runners import AgentSource, InProcessRunner
    from arena.storage.wiring import open_services

    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url)
    with open_services(settings) as services, TestClient(create_app(services)) as client:
        def played() -> float:
            text = client.get("/metrics/").text
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith("arena_matches_played_total{") and 'env="tictactoe-v3"' in line)

        before = played()
        ladder = open_ladder(services.sessions, LadderConfig("tictactoe-v3", batch_size=50))
        ladder.add_agents([AgentSource(key=k, builtin=k) for k in ("heuristic", "random")])
        ladder.run(InProcessRunner(), 150)
        assert played() - before == 150


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_docs_pages_load_their_assets_from_the_package(client):
    """/docs and /redoc reference only local assets, and the package serves them (the
    browser test, tests/web/test_browser.py, renders both with the network blocked)."""
    for page, assets in (("/docs", 2), ("/redoc", 1)):
        html = client.get(page)
        assert html.status_code == 200
        urls = re.findall(r'(?:src|href)="([^"]+)"', html.text)
        assert urls and all(u.startswith("/") for u in urls), urls
        vendored = [u for u in urls if u.startswith("/static/vendor/")]
        assert len(vendored) == assets, urls
        for url in urls:
            served = client.get(url)
            assert served.status_code == 200 and len(served.content) > 100, url
    assert client.get("/docs/oauth2-redirect").status_code == 404  # FastAPI's own pages are off
