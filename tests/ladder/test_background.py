"""The background service: demo seeding, submission validation, ladder rounds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from arena.core.settings import Settings
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.demo import seed_demo
from arena.ladder.registration import register_snapshot_agent
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.wiring import open_services


@pytest.fixture
def services(migrated_db_url, redis_url, tmp_path: Path):
    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url)
    with open_services(settings) as svc:
        yield svc


def _submit(services, env_id: str, state, spec, name: str) -> int:
    with services.sessions.begin() as session:
        return register_snapshot_agent(session, services.pool, serialize_weights(state), spec,
                                       pool_name=f"submissions.{env_id}", name=name).id


def test_demo_ladder_moves_and_submissions_are_validated(services):
    created = seed_demo(services, ("tictactoe-v3",), neural_per_env=2)
    assert created == 7
    assert seed_demo(services, ("tictactoe-v3",), neural_per_env=2) == 0  # idempotent
    # A valid submission: validated like the demo's neural agents, then on the ladder.
    state, spec = random_init_checkpoint("tictactoe-v3", "mlp", {"hidden": [16]}, seed=9)
    submitted_id = _submit(services, "tictactoe-v3", state, spec, "submitted")
    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=("tictactoe-v3",), batch_size=500, max_rate=1e9))
    played = service.step() + service.step()
    # Every agent is new (unsettled): a round plays 16 matches per unsettled agent (at least 16).
    assert 2 * 16 <= played <= 2 * 16 * 8
    with services.sessions() as session:
        agents = {a.name: a for a in repo.list_agents(session, "tictactoe-v3")}
        board = repo.board_rows(session, "tictactoe-v3", "player")
        unrated = [m for m in repo.match_history(session, env_id="tictactoe-v3", limit=5000).matches if not m.rated]
    assert agents["demo-mlp-0"].status in ("placement", "rated")
    assert agents["submitted"].status in ("placement", "rated")
    assert len(board) == 8 and board[0].rating.games > 0
    assert len(unrated) == 3 * 4  # validation episodes are stored for replay
    assert submitted_id == agents["submitted"].id
    service.stop()


def test_a_submission_that_forfeits_is_rejected_with_the_reason(services):
    state, spec = random_init_checkpoint("connect_four-v3", "mlp", {"hidden": [16]}, seed=1)
    # Weights that make every logit -inf/+inf: the policy's output is not finite.
    state = {k: torch.full_like(v, 1e38) for k, v in state.items()}
    agent_id = _submit(services, "connect_four-v3", state, spec, "overflow")
    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=("connect_four-v3",)))
    assert service.process_submissions() == 1
    with services.sessions() as session:
        agent = repo.get_agent(session, agent_id)
    assert agent.status == "rejected"
    assert "invalid_output" in agent.status_reason
    service.stop()


def test_service_samples_queue_depths_and_live_workers_into_the_metrics(services):
    from arena.core.metrics import default_metrics
    from arena.storage.db.repositories import QueuedJob

    seed_demo(services, ("tictactoe-v3",), neural_per_env=1)  # one neural agent queued
    with services.sessions.begin() as session:
        repo.enqueue_matches(session, "tictactoe-v3", "run:0",
                             [QueuedJob(f"00000000-0000-0000-0000-00000000000{i}", "run:0", i, ("random", "random"))
                              for i in range(3)])

    class Runner(InProcessRunner):
        def stats(self):
            return [{"pid": 1, "snapshot_cache": None}, {"pid": 2, "snapshot_cache": None}]

    service = BackgroundService(services, Runner(), ServiceConfig(envs=("tictactoe-v3",)))
    service.sample_metrics()
    registry = default_metrics().registry
    assert registry.get_sample_value("arena_queue_depth") == 1
    assert registry.get_sample_value("arena_matches_queued", {"env": "tictactoe-v3"}) == 3
    assert registry.get_sample_value("arena_workers_alive") == 2


def test_an_agent_left_validating_by_a_dead_service_is_validated_by_the_next(services):
    """Regression: a service SIGKILLed mid-validation left the agent ``validating`` for ever
    (only ``queued`` agents were looked at)."""
    state, spec = random_init_checkpoint("tictactoe-v3", "mlp", {"hidden": [16]}, seed=3)
    agent_id = _submit(services, "tictactoe-v3", state, spec, "orphan")
    with services.sessions.begin() as session:  # as the dead service left it
        assert repo.set_agent_status(session, agent_id, "validating", "playing its validation episodes")
    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=("tictactoe-v3",)))
    assert service.process_submissions() == 1
    assert service.process_submissions() == 0  # only the first call looks at ``validating``
    with services.sessions() as session:
        assert repo.get_agent(session, agent_id).status == "placement"
    service.stop()


def test_stop_asks_every_loop_to_stop_before_it_waits_for_any(services, monkeypatch):
    """Each worker's last round may block (a queue pop of up to a second): asked in turn, the
    service's stop took the sum of them; asked first, their last rounds end together."""
    from arena.core.loop import ServiceLoop

    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=("tictactoe-v3",))).start()
    loops = [service, service.people, service.challenges, service.tournament_games, service.fingerprints]
    asked_when_waiting: list[list[bool]] = []
    stop_loop = ServiceLoop.stop_loop

    def recording(loop: ServiceLoop, timeout: float) -> None:
        asked_when_waiting.append([other._stop.is_set() for other in loops])
        stop_loop(loop, timeout)

    monkeypatch.setattr(ServiceLoop, "stop_loop", recording)
    service.stop()
    assert len(asked_when_waiting) == len(loops)
    assert all(all(asked) for asked in asked_when_waiting), asked_when_waiting
    assert not any(loop._thread.is_alive() for loop in loops)


def test_a_stopping_service_validates_no_further_agent_and_leaves_the_rest_queued(services, monkeypatch):
    """A service's first round validates every waiting agent (a fresh demo: dozens of episodes);
    asked to stop, it ends after the agent under way instead of after all of them."""
    ids = []
    for seed in range(3):
        state, spec = random_init_checkpoint("tictactoe-v3", "mlp", {"hidden": [16]}, seed=seed)
        ids.append(_submit(services, "tictactoe-v3", state, spec, f"waiting-{seed}"))
    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=("tictactoe-v3",)))
    validate = service.validate

    def validate_then_stop(agent) -> None:
        validate(agent)
        service.ask_to_stop()  # as stop() does from another thread while this round runs

    monkeypatch.setattr(service, "validate", validate_then_stop)
    assert service.process_submissions() == 1
    with services.sessions() as session:
        statuses = sorted(repo.get_agent(session, agent_id).status for agent_id in ids)
    assert statuses == ["placement", "queued", "queued"]
    service.stop()
