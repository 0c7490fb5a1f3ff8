"""Replay retention: old, never-opened replays lose their moves; results and rebuild stay."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from arena.api import create_app
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.ladder.recorder import rebuild_ratings
from arena.ladder.retention import ReplayRetention
from arena.runners import AgentSource, InProcessRunner
from arena.settings import Settings
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.wiring import open_services

ENV = "connect_four-v3"


@pytest.fixture
def services(migrated_db_url, redis_url, tmp_path: Path):
    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url, page_cache_s=0.0)
    with open_services(settings) as svc:
        yield svc


def test_retention_drops_unopened_replays_keeps_results_and_rebuild_equals_live(services):
    ladder = open_ladder(services.sessions, LadderConfig(ENV, batch_size=100, seed=5))
    ladder.add_agents([AgentSource(key=k, builtin=k) for k in ("heuristic", "heuristic:epsilon=0.3", "random")])
    ladder.run(InProcessRunner(), 200)
    with services.sessions() as session:
        old = repo.match_history(session, env_id=ENV, limit=500).matches
    assert len(old) == 200
    with TestClient(create_app(services)) as client:
        opened = old[7].id
        assert client.get(f"/api/v1/matches/{opened}").status_code == 200  # opened: kept from now on
        retention = ReplayRetention(services.sessions, days=30, chunk=64)
        assert retention.run(0.0, wall=utcnow() - timedelta(days=1)) == 0  # nothing is old yet
        ladder.run(InProcessRunner(), 100)  # newer matches than the cutoff below
        with services.sessions() as session:
            newest = repo.match_history(session, env_id=ENV, limit=1).matches[0]
        cutoff_wall = newest.created_at + timedelta(days=30)  # everything but the newest batch is old
        dropped = retention.run(1.0, wall=cutoff_wall)
        assert 199 <= dropped < 300
        assert retention.run(2.0, wall=cutoff_wall) == 0  # the watermark: nothing twice
        with services.sessions() as session:
            stored = {m.id: m for m in repo.get_matches(session, [m.id for m in old])}
            total = repo.count_matches(session, ENV)
        assert total == 300
        assert stored[opened].actions and all(not m.actions for k, m in stored.items() if k != opened)
        assert all(m.winner == o.winner and m.scores == o.scores for o in old for m in [stored[o.id]])
        gone = client.get(f"/api/v1/matches/{old[0].id}")
        assert gone.status_code == 410 and "not kept" in gone.json()["detail"]
        assert client.get(f"/api/v1/matches/{opened}").status_code == 200
        assert client.get(f"/matches/{old[0].id}").status_code == 200  # the page says why, no moves
    report = rebuild_ratings(services.sessions, ladder.spec)
    assert report.matches == 300 and report.equal, report.mismatches
