"""The probe service: queued probes run in spawned processes with tiny budgets, recorded, requeued on stop."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from pathlib import Path

import pytest

from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from arena.core.agent_status import AgentStatus
from arena.core.errors import InvalidParameter
from arena.core.settings import Settings
from arena.evaluation.probe_backends import ProcessProbeBackend
from arena.evaluation.probes import ProbeService, queue_probe
from arena.ladder.registration import register_builtin_agents, register_snapshot_agent
from arena.storage.db import repositories as repo
from arena.storage.wiring import open_services
from envs.errors import ServiceUnavailable
from tests.waiting import wait_for

C4 = "connect_four-v3"
ONE_UPDATE = 512 * 16  # the probe's PPO: 512 boards x 16 steps per update
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def services(migrated_db_url, redis_url, tmp_path: Path):
    # Probes at the service's own priority: a niced one gets a tenth of a CPU beside the
    # other pytest worker (test_stopping_... checks that the niceness is applied).
    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url,
                        probe_budget_steps=ONE_UPDATE, probe_eval_games=40, probe_concurrency=2,
                        probe_queue_size=3, probe_backend="process", probe_niceness=0)
    with open_services(settings) as svc:
        yield svc


def _rated_submission(services, seed: int, owner: str | None = "owner") -> int:
    state, spec = random_init_checkpoint(C4, "mlp", {"hidden": [16]}, seed=seed)
    with services.sessions.begin() as session:
        owner_id = None if owner is None else repo.create_user(session, f"{owner}-{seed}")
        agent_id = register_snapshot_agent(session, services.pool, serialize_weights(state), spec,
                                           pool_name=f"submissions.{C4}", name=f"sub-{seed}",
                                           owner_id=owner_id).id
        for status in (AgentStatus.VALIDATING, AgentStatus.PLACEMENT, AgentStatus.RATED):
            assert repo.set_agent_status(session, agent_id, status)
    return agent_id


def _run_until_finished(service: ProbeService, probe_ids: list[int], timeout_s: float = 240.0) -> dict:
    def probes() -> dict:
        with service.services.sessions() as session:
            return {i: repo.get_probe(session, i) for i in probe_ids}

    def finished() -> dict | None:
        service.step()  # the service takes a step per poll
        found = probes()
        return found if all(p.status in ("done", "failed") for p in found.values()) else None
    return wait_for(f"probes {probe_ids} to finish", finished, timeout_s=timeout_s, every_s=0.2,
                    explain=lambda: f"still open: {probes()}")


@sqlite_only
def test_probes_of_a_builtin_and_an_auto_queued_submission_run_and_are_recorded(services):
    with services.sessions.begin() as session:
        random_id = register_builtin_agents(session, C4, ["random"])["random"]
    submission = _rated_submission(services, seed=3)
    probe, created = queue_probe(services, random_id, "ada")
    again, created_again = queue_probe(services, random_id, "ada")
    assert created and not created_again and again.id == probe.id  # one open probe per agent and budget
    _rated_submission(services, seed=4, owner=None)  # a demo or league snapshot: never auto-probed
    service = ProbeService(services, ProcessProbeBackend())
    assert service.auto_queue() == 1 and service.auto_queue() == 0  # the rated submission, once
    with services.sessions() as session:
        [auto] = repo.agent_probes(session, submission)
    assert auto.requested_by == "auto" and auto.status == "queued"
    try:
        done = _run_until_finished(service, [probe.id, auto.id])
    finally:
        service.stop()
    for p in done.values():
        assert p.status == "done", p.error
        assert p.env_steps == ONE_UPDATE == p.budget_env_steps and p.games == 40
        assert p.wins + p.draws + p.losses == 40 and p.ci_low <= p.win_rate <= p.ci_high
        assert p.started_at <= p.finished_at
    # Even one update's exploiter beats random most of the time (the untrained greedy one: 0.755).
    assert done[probe.id].win_rate >= 0.6
    with services.sessions() as session:
        latest = repo.latest_probes(session, [random_id, submission])
    assert {a: p.id for a, p in latest.items()} == {random_id: probe.id, submission: auto.id}


@sqlite_only
def test_stopping_terminates_running_probes_and_queues_them_again(services):
    with services.sessions.begin() as session:
        agent_id = register_builtin_agents(session, C4, ["heuristic"])["heuristic"]
    probe, _ = queue_probe(services, agent_id, "admin", budget_env_steps=50_000_000, may_exceed_budget=True)
    backend = ProcessProbeBackend()
    niced = dataclasses.replace(services, settings=services.settings.model_copy(update={"probe_niceness": 7}))
    service = ProbeService(niced, backend)
    service.step()
    with services.sessions() as session:
        assert repo.get_probe(session, probe.id).status == "running"
    procs = [p for p in multiprocessing.active_children() if p.name == f"arena-probe-{probe.id}"]
    assert len(procs) == 1 and procs[0].is_alive()  # the probe's own process, spawned by the backend
    niceness = min(os.getpriority(os.PRIO_PROCESS, 0) + 7, 19)  # ARENA_PROBE_NICENESS below this process
    wait_for(f"the probe process to take niceness {niceness} (it kept the server's priority)",
             lambda: os.getpriority(os.PRIO_PROCESS, procs[0].pid) == niceness, timeout_s=120, every_s=0.05)
    service.stop()
    assert not procs[0].is_alive()
    with services.sessions() as session:
        assert repo.get_probe(session, probe.id).status == "queued"


@sqlite_only
def test_probe_requests_are_bounded(services):
    with services.sessions.begin() as session:
        ids = register_builtin_agents(session, C4, ["random", "heuristic", "heuristic:epsilon=0.5",
                                                    "heuristic:epsilon=0.2"])
        tag = register_builtin_agents(session, "simple_tag-v3", ["random"])["random"]
    with pytest.raises(InvalidParameter, match="at most"):
        queue_probe(services, ids["random"], "ada", budget_env_steps=ONE_UPDATE + 1)
    with pytest.raises(InvalidParameter, match="vectorized core"):
        queue_probe(services, tag, "ada")
    for key in ("random", "heuristic", "heuristic:epsilon=0.5"):
        queue_probe(services, ids[key], "ada")
    with pytest.raises(ServiceUnavailable, match="queue is full"):
        queue_probe(services, ids["heuristic:epsilon=0.2"], "ada")


@pytest.mark.ray
@pytest.mark.xdist_group("ray")
@sqlite_only
def test_probes_run_as_ray_tasks_when_the_service_runs_on_ray(services, ray_cluster):
    from arena.evaluation.probe_backends import RayProbeBackend, make_backend

    assert isinstance(make_backend(services.settings.model_copy(update={"probe_backend": "auto"})), RayProbeBackend)
    with services.sessions.begin() as session:
        agent_id = register_builtin_agents(session, C4, ["random"])["random"]
    probe, _ = queue_probe(services, agent_id, "ada", budget_env_steps=0)
    service = ProbeService(services, RayProbeBackend())
    try:
        done = _run_until_finished(service, [probe.id])[probe.id]
    finally:
        service.stop()
    assert done.status == "done", done.error
    assert done.env_steps == 0 and done.games == 40 and done.ci_low <= done.win_rate <= done.ci_high
