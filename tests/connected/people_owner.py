"""Test-only: a background service's people's-game consumer alone, in a process of its own,
so that a test can SIGKILL it while it owns a game (``python -m tests.connected.people_owner
DATABASE_URL REDIS_URL DATA_DIR``). It runs until killed."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from arena.core.settings import Settings
from arena.ladder.lane import ConnectedLane
from arena.ladder.people import HumanMatchQueue
from arena.storage.wiring import open_services


def main(database_url: str, redis_url: str, data_dir: str) -> None:
    settings = Settings(page_cache_s=0.0, data_dir=Path(data_dir), database_url=database_url, redis_url=redis_url)
    with open_services(settings) as services:
        lane = ConnectedLane(services)
        HumanMatchQueue(services, lane, poll_s=0.1, heartbeat_s=0.2).start()
        threading.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    main(*sys.argv[1:4])
