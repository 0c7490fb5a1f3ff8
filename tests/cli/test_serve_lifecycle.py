"""``arena serve`` stopped mid-run and started again: nothing lost, nothing doubled.

The real command in a subprocess (in-process match workers, SQLite and the embedded
Redis under a temporary data dir). SIGKILL while a batch is queued and in flight must
leave it queued, and the next start must play exactly those match ids (same seeds)
before anything new, and record each once; SIGTERM to that server, mid-run with batches
in flight, must then exit cleanly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from arena.ladder.recorder import rebuild_ratings
from arena.storage.db import make_engine, models, session_factory
from arena.storage.db import repositories as repo
from arena.storage.redis_server import free_port
from envs.registry import get_spec
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]
ENVS = ("connect_four-v3", "tictactoe-v3")


class Serve:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        env = {**os.environ, "ARENA_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT), "COLUMNS": "200",
               "ARENA_ENVS": ",".join(ENVS),  # the two-seat board games: every match has 2 participants
               # Flat out, so batches are in flight to kill (a settled board only trickles);
               # no probes competing for the CPU.
               "ARENA_LADDER_SETTLE": "false", "ARENA_PROBE_AUTO": "false"}
        env.pop("ARENA_DATABASE_URL", None)
        env.pop("ARENA_REDIS_URL", None)
        self.log = (data_dir / f"serve-{time.monotonic_ns()}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "arena.cli", "serve", "--workers", "0", "--port", str(free_port()),
             "--max-rate", "1500"], env=env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        if not self.log.closed:  # stop() closes it: the log is still read for a failure's message
            self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=90)
        self.log.close()
        return code


def _wait(predicate, what: str, server: Serve, timeout: float = 180.0) -> None:
    """:func:`wait_for`, failing with the server's log if ``arena serve`` exits first."""
    wait_for(what, predicate, timeout_s=timeout, every_s=0.02, procs=[server.proc], explain=server.output)


def test_serve_survives_sigterm_and_sigkill_with_nothing_lost_or_doubled(tmp_path):
    data_dir = tmp_path / "arena"
    data_dir.mkdir()
    sessions = session_factory(make_engine(f"sqlite:///{data_dir / 'arena.db'}"))

    def count() -> int:
        try:
            with sessions() as s:
                return sum(repo.count_matches(s, e) for e in ENVS)
        except Exception:  # noqa: BLE001 - the schema may not exist yet
            return 0

    def queued() -> dict[str, tuple[int, tuple[str, ...]]]:
        try:
            with sessions() as s:
                return {q.match_id: (q.seed, q.agents) for e in ENVS for q in repo.queued_matches(s, e)}
        except Exception:  # noqa: BLE001
            return {}

    # 1. SIGKILL while a batch is queued (dispatched, not yet recorded).
    left: dict = {}
    for _ in range(5):
        server = Serve(data_dir)
        _wait(lambda: bool(queued()), "a queued batch", server)
        server.stop(signal.SIGKILL)
        left = queued()
        if left:
            break
    assert left, "never caught a batch in flight"
    before = count()

    # 2. Restart: the queued matches are played with their ids and seeds, once; then
    # SIGTERM mid-run (the ladder plays flat out, batches in flight): a clean exit.
    last = Serve(data_dir)
    _wait(lambda: count() >= before + len(left) and not (set(left) & set(queued())), "the resumed batch", last)
    assert last.stop(signal.SIGTERM) == 0, last.output()

    with sessions() as s:
        stored = {m.id: m for m in repo.get_matches(s, list(left))}
        rows = s.scalar(select(func.count()).select_from(models.Match))
        distinct = s.scalar(select(func.count(func.distinct(models.Match.id))))
        per_match = s.execute(select(models.MatchParticipant.match_seq, func.count())
                              .group_by(models.MatchParticipant.match_seq)).all()
    assert set(stored) == set(left)
    assert all(stored[i].seed == seed and tuple(stored[i].seats) == agents for i, (seed, agents) in left.items())
    assert rows == distinct
    assert {n for _, n in per_match} == {2}
    for env_id in ENVS:
        report = rebuild_ratings(sessions, get_spec(env_id))
        assert report.equal, report.mismatches
