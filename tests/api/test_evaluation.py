"""Evaluation over the API: probes (queued by owner or admin, run, shown on the board), payoff
rankings and cycles, results by seat, the admin integrity report."""

from __future__ import annotations

import pytest

from arena.evaluation.probe_backends import ProcessProbeBackend
from arena.evaluation.probes import ProbeService
from arena.storage.db import repositories as repo
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, ENV, auth, checkpoint, new_user, seed_ladder, upload
from tests.waiting import wait_for

KEYS = ["heuristic", "heuristic:epsilon=0.3", "heuristic:epsilon=0.7", "random"]
BUDGET = 8192  # one PPO update of the probe's learner


@pytest.fixture
def settings_overrides():
    return {"probe_budget_steps": BUDGET, "probe_eval_games": 20, "probe_backend": "process"}


def test_probe_requests_need_the_owner_or_an_admin(client):
    ada, bob = new_user(client, "ada"), new_user(client, "bob")
    weights, spec, _ = checkpoint()
    agent = upload(client, ada, weights, spec).json()
    url = f"{API}/agents/{agent['id']}/probes"
    assert client.post(url).status_code == 401
    assert client.post(url, headers=auth(bob)).status_code == 403
    assert client.post(f"{API}/agents/999/probes", headers=auth(ada)).status_code == 404
    too_big = client.post(url, json={"budget_env_steps": BUDGET + 1}, headers=auth(ada))
    assert too_big.status_code == 422 and "at most" in too_big.json()["detail"]
    queued = client.post(url, headers=auth(ada))
    assert queued.status_code == 202, queued.text
    probe = queued.json()
    assert (probe["status"], probe["budget_env_steps"], probe["requested_by"], probe["progress"]) == (
        "queued", BUDGET, "ada", 0.0)
    again = client.post(url, json={"seed": 5}, headers=auth(ada))  # one probe per agent and budget, any seed
    assert again.status_code == 200 and again.json()["id"] == probe["id"]
    admin = client.post(url, json={"budget_env_steps": 10 * BUDGET, "seed": 3}, headers=auth(ADMIN_TOKEN))
    assert admin.status_code == 202 and admin.json()["budget_env_steps"] == 10 * BUDGET
    listed = client.get(url).json()
    assert listed["count"] == 2 and [p["id"] for p in listed["data"]] == [admin.json()["id"], probe["id"]]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # one spawned probe is enough
def test_a_finished_probe_shows_on_the_leaderboard_with_its_budget(client, services):
    ids = seed_ladder(services, KEYS, 40)
    before = client.get(f"{API}/leaderboard", params={"env": ENV}).json()["data"]
    assert all(r["probe_win_rate"] is None for r in before)
    url = f"{API}/agents/{ids['random']}/probes"
    probe = client.post(url, json={"budget_env_steps": 0}, headers=auth(ADMIN_TOKEN)).json()
    service = ProbeService(services, ProcessProbeBackend())
    def ended() -> bool:
        if client.get(url).json()["data"][0]["status"] in ("done", "failed"):
            return True
        service.step()  # the service takes a step per poll
        return False
    try:
        wait_for("the probe to end", ended, timeout_s=120, every_s=0.2,
                 explain=lambda: f"it is {client.get(url).json()['data'][0]['status']}")
    finally:
        service.stop()
    done = client.get(url).json()["data"][0]
    assert done["id"] == probe["id"] and done["status"] == "done", done["error"]
    assert done["games"] == 20 and done["progress"] == 1.0 and done["ci_low"] <= done["win_rate"] <= done["ci_high"]
    rows = {r["agent_id"]: r for r in client.get(f"{API}/leaderboard", params={"env": ENV}).json()["data"]}
    assert rows[ids["random"]]["probe_win_rate"] == done["win_rate"]
    assert rows[ids["random"]]["probe_budget_env_steps"] == 0
    assert rows[ids["random"]]["probe_ci_low"] == done["ci_low"]
    assert all(rows[ids[k]]["probe_win_rate"] is None for k in KEYS[:3])


def test_payoff_rankings_and_seats(client, services):
    ids = seed_ladder(services, KEYS, 200)
    payoff = client.get(f"{API}/envs/{ENV}/payoff", params={"top": 4}).json()
    ranks = {r["agent_id"]: r for r in payoff["rankings"]}
    assert set(ranks) == set(ids.values())
    for system in ("trueskill_rank", "alpharank_rank"):
        assert sorted(r[system] for r in ranks.values()) == [1, 2, 3, 4]
    assert ranks[ids["heuristic"]]["nash_rank"] == 1 and ranks[ids["random"]]["nash_rank"] == 4
    assert abs(sum(r["alpharank_mass"] for r in ranks.values()) - 1) < 1e-6
    assert payoff["cycles"] == []  # heuristics of decreasing epsilon are a ladder
    seats = client.get(f"{API}/envs/{ENV}/seats").json()
    first = seats["first_mover"]
    assert first["games"] == 200 and first["wins"] + first["draws"] + first["losses"] == 200
    assert seats["ci_low"] <= first["score"] <= seats["ci_high"]
    assert seats["first_move_value"] == pytest.approx(2 * first["score"] - 1)
    by_agent = {a["agent_id"]: a for a in seats["agents"]}
    assert sum(a["first"]["games"] for a in by_agent.values()) == 200
    assert sum(a["second"]["games"] for a in by_agent.values()) == 200
    for a in by_agent.values():  # the ladder draws seats at random: balanced up to chance
        games = a["first"]["games"] + a["second"]["games"]
        assert a["imbalance"] == a["first"]["games"] - a["second"]["games"]
        assert abs(a["imbalance"]) <= 3 * games**0.5, a
    assert client.get(f"{API}/envs/nope-v0/seats").status_code == 404


def test_integrity_is_for_admins(client, services):
    seed_ladder(services, KEYS, 80)
    user = new_user(client, "ada")
    url = f"{API}/admin/integrity"
    assert client.get(url, params={"env": ENV}).status_code == 401
    assert client.get(url, params={"env": ENV}, headers=auth(user)).status_code == 403
    report = client.get(url, params={"env": ENV}, headers=auth(ADMIN_TOKEN))
    assert report.status_code == 200, report.text
    body = report.json()
    assert body["matches"] == 80 and body["pairs"] == [] and body["alpha"] == 0.01
    with services.sessions() as session:
        assert repo.count_matches(session, ENV) == 80
