"""A tiny training league on the real services: embedded Redis pool + SQLite/PostgreSQL.

It must snapshot into the pool, register the snapshots as queued neural agents, log
to TensorBoard, resume from its saved state (counters continue, weights equal the
saved tensors), and rate + plot its generations through the ladder.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from agents.trainers.ppo_selfplay import PPOConfig
from arena.core.settings import Settings
from arena.storage.db import repositories as repo
from arena.storage.wiring import open_services
from arena.training.config import LeagueConfig
from arena.training.trainer import LeagueTrainer
from league.scheduling.roles import SnapshotRule

ENV = "tictactoe-v3"


@pytest.fixture
def services(migrated_db_url, redis_url, tmp_path: Path):
    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url)
    with open_services(settings) as svc:
        yield svc


def tiny(max_updates: int) -> LeagueConfig:
    return LeagueConfig(
        name="tiny", env_id=ENV, roles=("main", "main_exploiter"), minutes=1.0, max_updates=max_updates,
        ppo=PPOConfig(num_envs=64, rollout_steps=8, hidden=[32, 32], epochs=1, minibatches=2),
        snapshot=SnapshotRule(threshold=0.7, max_updates=2, min_updates=1), seed=3)


def test_league_snapshots_registers_resumes_and_plots(services):
    torch.set_num_threads(1)
    trainer = LeagueTrainer(services, tiny(max_updates=6))
    assert not trainer.resumed
    seen = []
    result = trainer.run(seen.append)
    assert result.updates == 6 and len(seen) == 6
    assert seen[-1].learners[0].opponents  # the display gets top opponents with win rates

    snaps = trainer.state.snapshots
    assert len(snaps) >= 4  # every 2 updates per learner (3 each), plus each learner's final weights
    assert {s.learner for s in snaps} == {"main", "main_exploiter"}
    assert [s.generation for s in snaps if s.learner == "main"] == [1, 2]
    pool = services.pool.list(f"league.tiny.{ENV}")
    assert sorted(pool) == sorted({s.sha256 for s in snaps})
    with services.sessions() as session:
        agents = {a.key: a for a in repo.list_agents(session, ENV)}
    for s in snaps:
        agent = agents[s.key]
        assert (agent.kind, agent.status, agent.snapshot_sha256) == ("neural", "queued", s.sha256)
        assert agent.name == s.name and s.name.startswith("tiny-")
    assert list(trainer.dir.tb_dir.glob("events.out.tfevents.*"))

    # A new process on the same data dir continues where the saved state ends.
    saved = {lr.name: (lr.updates, lr.env_steps, lr.generation) for lr in trainer.state.learners}
    again = LeagueTrainer(services, tiny(max_updates=2))
    assert again.resumed
    assert {lr.name: (lr.updates, lr.env_steps, lr.generation) for lr in again.state.learners} == saved
    for name, learner in again.trainers.items():
        stored = trainer.dir.load_tensors(name)
        for key, value in learner.model.state_dict().items():
            assert torch.equal(value, stored[f"model.{key}"]), (name, key)
        assert any(k.startswith("optim.") for k in stored)  # Adam moments were saved too
    again.run()
    assert again.state.learners[0].updates == saved["main"][0] + 1
    assert again.state.learners[0].generation == saved["main"][2] + 1
    assert again.state.runs == 2

    ratings = again.report(matches_per_agent=8)
    assert {s.name for s in again.state.snapshots} <= set(ratings)
    assert {"random", "heuristic"} <= set(ratings)
    png = Path(again.state.plot)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with services.sessions() as session:
        statuses = {a.status for a in repo.list_agents(session, ENV) if a.kind == "neural"}
    assert statuses <= {"placement", "rated"}  # validated through the service path


def test_many_snapshots_never_thrash_the_bounded_cache(services):
    """Regression: with more snapshots in play than the cache holds, every ply missed."""
    torch.set_num_threads(1)
    config = replace(tiny(max_updates=12), roles=("main",), cache_size=4,
                     snapshot=SnapshotRule(threshold=0.0, max_updates=1, min_updates=1))
    trainer = LeagueTrainer(services, config)
    trainer.run()
    snaps = trainer.state.snapshots
    assert len(snaps) >= 12
    in_play = [o for o in trainer.opponent_probs("main") if o.startswith("tiny-")]
    assert 1 <= len(in_play) <= 2  # cache_size // 2
    stats = trainer.cache.stats
    assert stats.size <= 4
    assert stats.misses <= 2 * len(snaps), stats  # each snapshot loads about once, not once per ply
