"""Test-only: the background service as ``arena serve --workers 0`` runs it (validation, the env
ladder, the competitions' season boards and final evaluations, the tournament games), alone in
a process of its own, beside an API served by the test (``python -m tests.competitions.service_process
DATABASE_URL REDIS_URL DATA_DIR ENV [HANG_AFTER]``). It runs until killed.

With ``ARENA_TEST_SERVICE_GATED=1`` it imports and opens its services, then waits for the line
``go`` on its stdin before it starts (:data:`GO`; anything else, or EOF, ends it unstarted): a test
starts the process that takes over from one it kills beforehand, so the successor's start-up
(several seconds of imports) is not spent after the kill.

With ``HANG_AFTER`` (a final-evaluation match count) its runner hangs on the first batch of
a final evaluation dispatched once that many of that evaluation's matches are recorded: the
batch is queued (the persisted queue) and never played, so that a test can SIGKILL the service
during the final evaluation at a known point. The hang only fixes the moment of the kill; the
kill is real."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from arena.core.settings import Settings
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.dispatch import queue_lane
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services, open_services

GO = b"go\n"
"""What a gated service waits for on its stdin before it starts (module doc)."""
BATCH_SIZE = 16
"""Small batches: a final evaluation of a few hundred games takes many rounds."""


class HangsInTheFinal:
    """``inner``, but a final-evaluation batch dispatched after ``after`` final matches hangs forever."""

    def __init__(self, services: Services, inner: InProcessRunner, env_id: str, after: int) -> None:
        self.services, self.inner, self.env_id, self.after = services, inner, env_id, after

    def _final_lane(self, batch) -> str | None:
        ids = {j.match_id for j in batch.jobs}
        with self.services.sessions() as session:
            lanes = {queue_lane(q.batch_key) for q in repo.queued_matches(session, self.env_id) if q.match_id in ids}
        return next((lane for lane in lanes if lane.endswith(":final")), None)

    def run(self, batches):
        for batch in batches:
            lane = self._final_lane(batch)
            if lane is not None:
                with self.services.sessions() as session:
                    recorded = repo.count_matches(session, self.env_id, board=lane)
                if recorded >= self.after:
                    threading.Event().wait()  # until SIGKILL
            yield from self.inner.run([batch])

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def main(database_url: str, redis_url: str, data_dir: str, env_id: str, hang_after: str | None = None) -> None:
    settings = Settings(page_cache_s=0.0, data_dir=Path(data_dir), database_url=database_url, redis_url=redis_url,
                        envs=env_id, probe_concurrency=0)
    with open_services(settings) as services:
        runner = InProcessRunner(services.snapshot_cache_factory()())
        if hang_after is not None:
            runner = HangsInTheFinal(services, runner, env_id, int(hang_after))
        if os.environ.get("ARENA_TEST_SERVICE_GATED") == "1" and sys.stdin.buffer.readline() != GO:
            return  # released by nobody: the test ended first
        config = ServiceConfig(envs=(env_id,), batch_size=BATCH_SIZE, max_rate=1e9, idle_sleep_s=0.05, seed=1)
        BackgroundService(services, runner, config).start()
        threading.Event().wait()  # until killed


if __name__ == "__main__":
    main(*sys.argv[1:6])
