"""API test fixtures: real services (SQLite/PostgreSQL + Redis) behind a TestClient."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from arena.api import create_app
from arena.core.settings import Settings
from arena.storage.wiring import Services, open_services
from tests.api.helpers import RAISED_LIMITS

UPLOAD_LIMIT = 4096
ADMIN_TOKEN = "admin-test-token"


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    """Settings a test module changes for its services (override this fixture there)."""
    return {}


@pytest.fixture
def services(tmp_path, migrated_db_url: str, redis_url: str,
             settings_overrides: dict[str, Any]) -> Iterator[Services]:
    """Services on a fresh database and Redis db, with a 4 KiB upload limit by default and
    the abuse limits raised (the tests act for many users from one address)."""
    settings = Settings(**{
        "page_cache_s": 0.0, "data_dir": tmp_path / "arena", "database_url": migrated_db_url,
        "redis_url": redis_url, "max_upload_bytes": UPLOAD_LIMIT, "admin_token": ADMIN_TOKEN,
        **RAISED_LIMITS, **settings_overrides,
    })
    with open_services(settings) as opened:
        yield opened
        opened.sessions.dispose()


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client
