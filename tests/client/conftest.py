"""A real Arena server for the client tests: uvicorn on a free 127.0.0.1 port, in a thread.

The server runs ``create_app(services)`` over real services (a migrated database from
``migrated_db_url``, the embedded Redis from ``redis_url``), as ``arena serve`` wires
them, minus the background scheduler: submitted agents stay ``queued`` unless a test
advances them itself. Only the scheduler's challenge queue runs (a challenge is played
by the background service, never by the request).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from arena.core.settings import Settings
from arena.ladder.challenge_queue import ChallengeQueue
from arena.ladder.lane import ConnectedLane
from arena.storage.wiring import Services, open_services
from tests.api.helpers import RAISED_LIMITS
from tests.client.live import LiveServer


@dataclass
class Arena:
    """A running server and the services behind it."""

    url: str
    services: Services
    data_dir: Path


@pytest.fixture
def arena(tmp_path: Path, migrated_db_url: str, redis_url: str) -> Iterator[Arena]:
    """A live Arena server on a fresh database (SQLite and PostgreSQL)."""
    from arena.api.app import create_app

    data_dir = tmp_path / "server"
    settings = Settings(page_cache_s=0.0, data_dir=data_dir, database_url=migrated_db_url, redis_url=redis_url,
                        **RAISED_LIMITS)
    with open_services(settings) as services:
        server = LiveServer(create_app(services))
        lane = ConnectedLane(services)
        challenges = ChallengeQueue(services, lane, poll_s=0.1).start()
        try:
            yield Arena(server.url, services, data_dir)
        finally:
            server.stop()
            challenges.stop()
            lane.close()


@pytest.fixture
def cli_home(tmp_path: Path) -> Path:
    """A private HOME for CLI subprocesses (the token file goes under it)."""
    home = tmp_path / "home"
    home.mkdir()
    return home
