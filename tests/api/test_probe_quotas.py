"""Fair shares of the probe workers (issue 20): one probe per agent and budget, per-user
quotas (429), and users served in turn rather than the queue in order."""

from __future__ import annotations

import time

import pytest

from arena.evaluation.probe_backends import ProcessProbeBackend
from arena.evaluation.probes import ProbeService
from arena.storage.db import repositories as repo
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, auth, checkpoint, new_user, upload

on_sqlite = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # quotas do not depend on the backend


@pytest.fixture
def settings_overrides():
    return {"probe_budget_steps": 1000, "probe_eval_games": 2, "probe_backend": "process", "probe_concurrency": 1}


def _probes_url(client, token: str, seed: int) -> str:
    weights, spec, _ = checkpoint(seed=seed)
    created = upload(client, token, weights, spec, name=f"agent-{seed}")
    assert created.status_code == 201, created.text
    return f"{API}/agents/{created.json()['id']}/probes"


def test_one_agent_at_one_budget_is_one_probe_whatever_the_seed(client):
    ada = new_user(client, "ada")
    url = _probes_url(client, ada, seed=1)
    first = client.post(url, json={"seed": 0}, headers=auth(ada))
    assert first.status_code == 202, first.text
    for seed in range(1, 100):
        again = client.post(url, json={"seed": seed}, headers=auth(ada))
        assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    other_budget = client.post(url, json={"budget_env_steps": 0}, headers=auth(ada))
    assert other_budget.status_code == 202
    assert client.get(url).json()["count"] == 2


@on_sqlite
def test_a_flood_queues_at_most_the_quota_and_the_next_user_is_served_next(client, services):
    flooder = new_user(client, "flood")
    url = _probes_url(client, flooder, seed=1)
    answers = [client.post(url, json={"seed": s, "budget_env_steps": s}, headers=auth(flooder)) for s in range(100)]
    quota = services.settings.probes_queued_per_user
    assert quota == 3  # the default
    assert [a.status_code for a in answers] == [202] * quota + [429] * (100 - quota)
    refused = answers[-1]
    assert "ARENA_PROBES_QUEUED_PER_USER" in refused.json()["detail"] and int(refused.headers["Retry-After"]) >= 1
    assert [p["status"] for p in client.get(url).json()["data"]] == ["queued"] * quota

    fair = new_user(client, "fair")
    fair_probe = client.post(_probes_url(client, fair, seed=2), json={"budget_env_steps": 0}, headers=auth(fair))
    assert fair_probe.status_code == 202
    flooded = {a.json()["id"] for a in answers[:quota]}
    started = _start_order(ProbeService(services, ProcessProbeBackend()), services, until=fair_probe.json()["id"])
    assert started[-1] == fair_probe.json()["id"]
    assert len(started) <= 2 and set(started[:-1]) <= flooded  # at most one of the flood went first


def _start_order(service: ProbeService, services, until: int, timeout_s: float = 180.0) -> list[int]:
    """Probe ids in the order the service started them, until probe ``until`` started."""
    started: list[int] = []
    deadline = time.monotonic() + timeout_s
    try:
        while until not in started:
            assert time.monotonic() < deadline, f"started so far: {started}"
            service.step()
            with services.sessions() as session:
                running = [p.id for p in repo.probes_by_status(session, "running")]
                done = [p.id for p in repo.probes_by_status(session, "done") + repo.probes_by_status(session, "failed")]
            started += [i for i in done + running if i not in started]
            time.sleep(0.2)
    finally:
        service.stop()
    return started


@on_sqlite
@pytest.mark.parametrize("settings_overrides", [{"probes_queued_per_user": 0, "probes_per_user_per_day": 2,
                                                 "probe_budget_steps": 1000}])
def test_probes_per_user_per_day(client):
    ada = new_user(client, "ada")
    url = _probes_url(client, ada, seed=1)
    assert [client.post(url, json={"budget_env_steps": b}, headers=auth(ada)).status_code for b in (0, 1)] == [202] * 2
    over = client.post(url, json={"budget_env_steps": 2}, headers=auth(ada))
    assert over.status_code == 429 and "ARENA_PROBES_PER_USER_PER_DAY" in over.json()["detail"]
    assert 1 <= int(over.headers["Retry-After"]) <= 86_400  # until the UTC day ends
    assert client.post(url, json={"budget_env_steps": 0}, headers=auth(ada)).status_code == 200  # asked before
    admin = client.post(url, json={"budget_env_steps": 2}, headers=auth(ADMIN_TOKEN))
    assert admin.status_code == 202  # the operator is never limited
    assert client.get(url).json()["count"] == 3
