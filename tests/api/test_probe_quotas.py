"""Fair shares of the probe workers (issue 20): one probe per agent and budget, per-user
quotas (429), and users served in turn rather than the queue in order."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from arena.evaluation.probe_backends import ProcessProbeBackend
from arena.evaluation.probes import ProbeService, in_turn
from arena.storage.db import repositories as repo
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, auth, checkpoint, new_user, upload

on_sqlite = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # quotas do not depend on the backend


@pytest.fixture
def settings_overrides():
    return {"probe_budget_steps": 1000, "probe_eval_games": 2, "probe_backend": "process", "probe_concurrency": 2,
            "probe_niceness": 0}


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
    # Two workers free: one round starts the flood's oldest probe and the next user's, not the
    # flood's next two (later rounds order requesters by their last start, recorded here:
    # test_requesters_are_served_in_turn). No probe has to finish, so none is waited for.
    service = ProbeService(services, ProcessProbeBackend())
    try:
        service.step()
        with services.sessions() as session:
            waiting = {p.id for p in repo.probes_by_status(session, "queued")}
            served = repo.last_started(session, ["flood", "fair"])
    finally:
        service.stop()
    assert fair_probe.json()["id"] not in waiting and len(waiting) == quota - 1 and waiting < flooded
    assert served["flood"] is not None and served["fair"] is not None  # what the next round orders by


def _probe(probe_id: int, requested_by: str) -> repo.ProbeInfo:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    return repo.ProbeInfo(id=probe_id, agent_id=probe_id, env_id="connect_four-v3", budget_env_steps=0,
                          eval_games=2, seed=0, status="queued", requested_by=requested_by, env_steps=0,
                          games=None, wins=None, draws=None, losses=None, win_rate=None, ci_low=None,
                          ci_high=None, error="", created_at=created, started_at=None, finished_at=None)


def test_requesters_are_served_in_turn():
    queued = [_probe(2, "flood"), _probe(3, "flood"), _probe(4, "fair"), _probe(5, "ada"), _probe(6, "fair")]
    never = dict.fromkeys(["flood", "fair", "ada"])
    # Nobody served yet: each requester's oldest first, whoever waited longest first, then the second round.
    assert [p.id for p in in_turn(queued, never)] == [2, 4, 5, 3, 6]
    # The flood's probe 1 just started, ada's long ago: fair (never) first, then ada, then the flood.
    t = datetime(2026, 1, 2, tzinfo=UTC)
    served = {"flood": t.replace(hour=12), "fair": None, "ada": t}
    assert [p.id for p in in_turn(queued, served)] == [4, 5, 2, 6, 3]
    assert in_turn([], served) == []


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
