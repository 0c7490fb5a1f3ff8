"""Test-only: a service's tournament-game worker alone, in a process of its own, that plays
``good`` games and then hangs on every game it claims after them, so that a test can
SIGKILL it while it owns games (``python -m tests.competitions.tournament_owner
DATABASE_URL REDIS_URL DATA_DIR GOOD``). It runs until killed. The hang only fixes the
moment of the kill; the kill is real."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from arena.competitions.tournament_games import TournamentGames
from arena.core.settings import Settings
from arena.storage.wiring import open_services


class HangsAfter(TournamentGames):
    def __init__(self, services, good: int) -> None:
        super().__init__(services, poll_s=0.05, heartbeat_s=0.2, sweep_s=0.2)
        self.good, self.lock, self.started = good, threading.Lock(), 0

    def play(self, request):
        with self.lock:
            self.started += 1
            hang = self.started > self.good
        if hang:
            threading.Event().wait()
        return super().play(request)


def main(database_url: str, redis_url: str, data_dir: str, good: str) -> None:
    settings = Settings(page_cache_s=0.0, data_dir=Path(data_dir), database_url=database_url, redis_url=redis_url)
    with open_services(settings) as services:
        HangsAfter(services, int(good)).start()
        threading.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    main(*sys.argv[1:5])
