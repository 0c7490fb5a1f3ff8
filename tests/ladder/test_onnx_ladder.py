"""ONNX agents on the ladder: submitted through the real validator, validated by the
service, played by the runners (in-process and on Ray) from the snapshot pool through
the workers' caches; NaN logits forfeit with ``invalid_output``, a run past its time
budget with ``timeout``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from arena.core.settings import Settings
from arena.engine.plan import plan_matches
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.pacing import PacingConfig
from arena.ladder.registration import register_builtin_agents
from arena.ladder.submissions import Submission, submit_agent
from arena.runners import AgentSource, InProcessRunner, MatchBatch
from arena.snapshots.cache import SnapshotCache
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services, open_services
from envs.registry import get_spec
from tests.agents.onnx_corpus import ENV, honest_model, play_time_hostiles, spec_json

TIME_LIMIT_S = 0.5  # the ONNX run deadline here (the service's is the engine budget, 10 s)


@pytest.fixture
def services(migrated_db_url: str, redis_url: str, tmp_path: Path):
    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url)
    with open_services(settings) as svc:
        yield svc


def _submit(services: Services, name: str, data: bytes) -> repo.AgentInfo:
    spec = json.dumps(spec_json()).encode()
    agent_id = submit_agent(services, None, "tester", Submission(data, spec, ENV, name))
    with services.sessions() as session:
        return repo.get_agent(session, agent_id)


def _forfeits(matches: list[repo.StoredMatch], key: str) -> Counter:
    return Counter(m.termination for m in matches
                   if m.forfeit_seat is not None and m.seats[m.forfeit_seat] == key)


def test_the_ladder_plays_onnx_agents_and_forfeits_their_misbehaviour(services):
    agents = {name: _submit(services, name, data)
              for name, data in {"honest": honest_model(seed=1), **play_time_hostiles()}.items()}
    with services.sessions.begin() as session:
        register_builtin_agents(session, ENV, ["random", "heuristic"])
    cache = SnapshotCache(services.pool, time_limit_s=TIME_LIMIT_S)
    service = BackgroundService(services, InProcessRunner(cache),
                                ServiceConfig(envs=(ENV,), batch_size=120, max_rate=1e9,
                                              pacing=PacingConfig(settle=False)))  # whole batches
    try:
        # Validation batches have at most 4 rows: the play-time hostiles behave there.
        assert service.process_submissions() == 3
        with services.sessions() as session:
            assert {repo.get_agent(session, a.id).status for a in agents.values()} == {"placement"}
        assert service.ladder_round(ENV) == 120
    finally:
        service.stop()
    with services.sessions() as session:
        rated = [m for m in repo.match_history(session, env_id=ENV, limit=1000).matches if m.rated]
    assert len(rated) == 120
    honest, nan, loop = (agents[k].key for k in ("honest", "nan_in_play", "loop_in_play"))
    played = Counter(key for m in rated for key in set(m.seats))
    assert played[honest] > 0 and not _forfeits(rated, honest)
    # Policies are called with every row they move in at once: > 8 rows here.
    assert set(_forfeits(rated, nan)) == {"invalid_output"}
    assert set(_forfeits(rated, loop)) == {"timeout"}
    timeouts = [m for m in rated if m.termination == "timeout"]
    assert all(loop in m.detail and "budget" in m.detail for m in timeouts)
    weights = {w for m in rated for w in m.weights if w}
    assert {agents[k].snapshot_sha256 for k in agents} <= weights
    assert cache.stats.misses == 3  # each model loaded once from the pool


@pytest.mark.ray
@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here
def test_ray_workers_play_onnx_agents_from_their_snapshot_cache(services, ray_cluster):
    from arena.runners.on_ray import RayMatchRunner

    agent = _submit(services, "honest", honest_model(seed=2))
    jobs = plan_matches([agent.key, "random"], get_spec(ENV), 64, seed=3)
    sources = {agent.key: AgentSource(agent.key, snapshot=agent.snapshot_sha256),
               "random": AgentSource("random", builtin="random")}
    batch = MatchBatch(ENV, jobs, sources)
    runner = RayMatchRunner(num_workers=1, snapshots_factory=services.snapshot_cache_factory())
    try:
        [(_, on_ray)] = list(runner.run([batch]))
        [stats] = runner.stats()
    finally:
        runner.close()
    [(_, local)] = list(InProcessRunner(services.snapshot_cache_factory()()).run([batch]))
    assert stats["snapshot_cache"]["misses"] == 1 and stats["pid"] != 0
    assert all(r.termination in ("normal", "step_limit") for r in on_ray)
    assert [(r.match_id, r.actions) for r in on_ray] == [(r.match_id, r.actions) for r in local]
    assert {w for r in on_ray for w in r.weights if w} == {agent.snapshot_sha256}


def test_ladder_run_registers_a_file_onnx_agent(services, tmp_path):
    """``arena ladder run --agents file:bot.onnx,...``: the model is validated and pooled."""
    from arena.cli.operate import agent_sources

    (tmp_path / "bot.onnx").write_bytes(honest_model(seed=6))
    (tmp_path / "bot.json").write_text(json.dumps(spec_json()))
    onnx_source, random = agent_sources([f"file:{tmp_path / 'bot.onnx'}", "random"], ENV, services)
    assert onnx_source.key.startswith("onnx-") and random.builtin == "random"
    weights, spec = services.pool.get(onnx_source.snapshot)
    assert weights == honest_model(seed=6) and spec.arch == "onnx"
    with services.sessions() as session:
        assert repo.get_agent_by_key(session, ENV, onnx_source.key).status == "placement"
