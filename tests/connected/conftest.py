"""A live Arena server (uvicorn in a thread, real database and Redis), a real `arena serve` process, and
connected clients."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.client.connected.client import AgentClient
from arena.core.settings import Settings
from arena.storage.wiring import Services
from tests.api.helpers import RAISED_LIMITS
from tests.client.live import serving
from tests.connected.api_process import ApiProcess, api_process_serving

ADMIN_TOKEN = "connected-tests-admin"


@dataclass
class Live:
    url: str
    services: Services

    def user(self, name: str) -> str:
        r = httpx.post(f"{self.url}/api/v1/users", json={"name": name})
        assert r.status_code == 201, r.text
        return r.json()["token"]

    def connected_agent(self, token: str, name: str, env: str = "connect_four-v3", role: str | None = None) -> dict:
        body = {"env": env, "name": name, **({"role": role} if role else {})}
        r = httpx.post(f"{self.url}/api/v1/agents/connected", json=body, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code in (200, 201), r.text
        return r.json()


@pytest.fixture
def live_settings() -> dict[str, Any]:
    """Settings a test changes for its live server (parametrize this name to change them)."""
    return {}


@pytest.fixture
def live(tmp_path: Path, migrated_db_url: str, redis_url: str, live_settings: dict[str, Any]) -> Iterator[Live]:
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=migrated_db_url,
                        redis_url=redis_url, admin_token=ADMIN_TOKEN, **RAISED_LIMITS, **live_settings)
    with serving(settings) as (url, services):
        yield Live(url, services)


@pytest.fixture
def run_client() -> Iterator[Callable[..., AgentClient]]:
    """Start :class:`AgentClient` s in threads; all are stopped after the test."""
    started: list[tuple[AgentClient, threading.Thread]] = []

    def start(*args, **kwargs) -> AgentClient:
        client = AgentClient(*args, **kwargs)
        thread = threading.Thread(target=client.run, daemon=True)
        thread.start()
        started.append((client, thread))
        return client

    yield start
    for client, thread in started:
        client.stop()
    for _, thread in started:
        thread.join(10)


@pytest.fixture
def api_process_settings() -> dict[str, str]:
    """``ARENA_*`` variables a test sets for its ``api_process`` (parametrize this name to set them)."""
    return {}


@pytest.fixture
def api_process(tmp_path: Path, redis_url: str, api_process_settings: dict[str, str]) -> Iterator[ApiProcess]:
    """A real ``arena serve --no-service`` process (the API alone), killed after the test if still up."""
    with api_process_serving(tmp_path, redis_url, api_process_settings) as api:
        yield api
