"""The league API for outside trainers: create or resume, PFSP opponents, results, snapshots, owners."""

from __future__ import annotations

import pytest

from arena.ladder.background import BackgroundService, ServiceConfig
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, ENV, auth, checkpoint, new_user, seed_ladder, stored_state, upload

LEAGUES = f"{API}/leagues"


def _push(client, token: str, league_id: int, seed: int = 0, learner: str | None = None, role: str | None = None):
    weights, spec, _ = checkpoint(seed=seed)
    parts = [("weights", ("me.safetensors", weights, "application/octet-stream")), ("spec", (None, spec))]
    parts += [(k, (None, v)) for k, v in {"learner": learner, "role": role}.items() if v is not None]
    return client.post(f"{LEAGUES}/{league_id}/snapshots", files=parts, headers=auth(token))


def _opponents(client, token: str, league_id: int, **params) -> dict:
    r = client.get(f"{LEAGUES}/{league_id}/opponents", params={"n": 200, "seed": 0, **params}, headers=auth(token))
    assert r.status_code == 200, r.text
    return r.json()


def _report(client, token: str, league_id: int, results: list[dict], **extra):
    return client.post(f"{LEAGUES}/{league_id}/results", json={"results": results, **extra}, headers=auth(token))


def test_a_league_is_created_once_and_resumed_by_its_owner_only(client):
    ada, bob = new_user(client, "ada"), new_user(client, "bob")
    body = {"name": "outside", "env": ENV}
    assert client.post(LEAGUES, json=body).status_code == 401
    created = client.post(LEAGUES, json=body, headers=auth(ada))
    assert created.status_code == 201, created.text
    league = created.json()
    assert (league["name"], league["env"], league["owner"], league["learners"], league["snapshots"]) == \
        ("outside", ENV, "ada", [], [])
    again = client.post(LEAGUES, json=body, headers=auth(ada))
    assert again.status_code == 200 and again.json()["id"] == league["id"]
    taken = client.post(LEAGUES, json=body, headers=auth(bob))
    assert taken.status_code == 403 and "someone else's" in taken.json()["detail"]
    assert client.post(LEAGUES, json={"name": "hs", "env": "hide_and_seek-v0"}, headers=auth(ada)).status_code == 422
    assert client.post(LEAGUES, json={"name": "bad name!", "env": ENV}, headers=auth(ada)).status_code == 422
    assert client.post(LEAGUES, json={**body, "name": "x"}, headers=auth(ADMIN_TOKEN)).status_code == 422
    assert client.get(f"{LEAGUES}/{league['id']}").json()["id"] == league["id"]  # anyone may read it
    assert client.get(f"{LEAGUES}/424242").status_code == 404
    assert client.get(f"/leagues/{league['id']}").status_code == 200  # its web page
    for path in ("opponents", "results", "snapshots"):
        method = client.get if path == "opponents" else client.post
        kwargs = {"json": {"results": []}} if path == "results" else {}
        assert method(f"{LEAGUES}/{league['id']}/{path}", headers=auth(bob), **kwargs).status_code == 403


def test_pfsp_over_the_board_follows_the_reported_results_and_reports_count_once(client, services):
    ids = seed_ladder(services, ["random", "heuristic"], 6)
    ada = new_user(client, "ada")
    league_id = client.post(LEAGUES, json={"name": "pfsp", "env": ENV}, headers=auth(ada)).json()["id"]
    first = _opponents(client, ada, league_id)
    probs = {o["opponent"]: o["probability"] for o in first["distribution"]}
    assert first["role"] == "main" and set(probs) == {"self", str(ids["random"]), str(ids["heuristic"])}
    assert probs["self"] == pytest.approx(0.35) and sum(probs.values()) == pytest.approx(1.0)
    assert len(first["sampled"]) == 200
    assert {o["kind"] for o in first["sampled"]} == {"self", "builtin"}
    assert {o["key"] for o in first["distribution"] if o["kind"] == "builtin"} == {"random", "heuristic"}

    results = [{"opponent": str(ids["heuristic"]), "losses": 40}, {"opponent": str(ids["random"]), "wins": 38,
               "draws": 2}, {"opponent": "self", "wins": 5, "losses": 5}]
    booked = _report(client, ada, league_id, results, report_id="r1")
    assert booked.status_code == 200, booked.text
    learner = booked.json()["learner"]
    assert booked.json()["applied"] and (learner["games"], learner["wins"], learner["draws"], learner["losses"]) == \
        (90, 43, 2, 45)
    rates = learner["win_rates"]
    assert rates[str(ids["heuristic"])] < 0.1 and rates[str(ids["random"])] > 0.9
    retried = _report(client, ada, league_id, results, report_id="r1")
    assert retried.status_code == 200 and not retried.json()["applied"] and retried.json()["learner"] == learner

    after = {o["opponent"]: o["probability"] for o in _opponents(client, ada, league_id)["distribution"]}
    assert after["self"] == pytest.approx(0.35)
    assert after[str(ids["heuristic"])] > 10 * after[str(ids["random"])]  # PFSP: (1 - x)^2
    assert _opponents(client, ada, league_id)["sampled"] == _opponents(client, ada, league_id)["sampled"]  # seeded
    unknown = _report(client, ada, league_id, [{"opponent": "424242", "wins": 1}])
    assert unknown.status_code == 422 and "424242" in unknown.json()["detail"]
    stored = client.get(f"{LEAGUES}/{league_id}").json()["learners"]
    assert stored == [learner]  # resumable: the server has it


def test_pushed_snapshots_are_validated_rated_and_join_the_pool(client, services):
    ids = seed_ladder(services, ["random", "heuristic"], 6)
    ada, bob = new_user(client, "ada"), new_user(client, "bob")
    league_id = client.post(LEAGUES, json={"name": "snaps", "env": ENV}, headers=auth(ada)).json()["id"]
    before = stored_state(services)
    refused = _push(client, bob, league_id)
    assert refused.status_code == 403 and stored_state(services) == before  # nothing stored
    weights, spec, _ = checkpoint(seed=9)
    broken = client.post(f"{LEAGUES}/{league_id}/snapshots", headers=auth(ada),
                         files=[("weights", ("x.safetensors", weights[:-8], "application/octet-stream")),
                                ("spec", (None, spec))])
    assert broken.status_code == 422 and stored_state(services) == before

    pushed = _push(client, ada, league_id)
    assert pushed.status_code == 201, pushed.text
    snapshot, agent = pushed.json()["snapshot"], pushed.json()["agent"]
    assert (snapshot["learner"], snapshot["role"], snapshot["generation"]) == ("main", "main", 1)
    assert agent["status"] == "queued" and agent["owner"] == "ada" and agent["name"] == "snaps-main-g1"
    info = repo_league(services, league_id)
    assert services.pool.list(info.name) == [snapshot["sha256"]]  # the league's pool
    again = _push(client, ada, league_id)  # a retried push: the same agent, no new generation
    assert again.status_code == 200 and again.json()["snapshot"] == snapshot
    second = _push(client, ada, league_id, seed=1).json()["snapshot"]
    assert second["generation"] == 2
    with services.sessions() as session:
        rows = {s.sha256: s for s in repo.list_snapshots(session, league_id=league_id)}
    assert rows[second["sha256"]].parent_sha256 == snapshot["sha256"]  # lineage

    drawn = _opponents(client, ada, league_id)["distribution"]
    assert {o["agent_id"] for o in drawn if o["kind"] == "snapshot"} == {snapshot["agent_id"], second["agent_id"]}

    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=(ENV,)))
    try:
        service.process_submissions()
        while service.ladder_round(ENV):
            if client.get(f"{API}/agents/{snapshot['agent_id']}").json()["ratings"]:
                break
    finally:
        service.stop()
    rated = client.get(f"{API}/agents/{snapshot['agent_id']}").json()
    assert rated["status"] in ("placement", "rated") and rated["ratings"][0]["games"] > 0  # on the ladder

    # The board: bob's published agent joins the league's past players; a private one does not.
    bob_id = upload(client, bob, *checkpoint(seed=5)[:2]).json()["id"]
    client.patch(f"{API}/agents/{bob_id}", json={"published": True}, headers=auth(bob))
    private_id = upload(client, bob, *checkpoint(seed=6)[:2]).json()["id"]
    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=(ENV,)))
    try:
        service.process_submissions()
        for _ in range(20):
            service.ladder_round(ENV)
            with services.sessions() as session:
                if len(repo.load_ratings(session, [bob_id, private_id])) == 2:
                    break
    finally:
        service.stop()
    kinds = {o["agent_id"]: o["kind"] for o in _opponents(client, ada, league_id)["distribution"]}
    assert kinds[bob_id] == "agent" and private_id not in kinds and kinds[ids["random"]] == "builtin"


def test_a_main_exploiter_plays_the_latest_main_snapshot(client, services):
    seed_ladder(services, ["random", "heuristic"], 4)
    ada = new_user(client, "ada")
    league_id = client.post(LEAGUES, json={"name": "roles", "env": ENV}, headers=auth(ada)).json()["id"]
    none_yet = client.get(f"{LEAGUES}/{league_id}/opponents", params={"learner": "main_exploiter"},
                          headers=auth(ada))
    assert none_yet.status_code == 409 and "main" in none_yet.json()["detail"]
    _push(client, ada, league_id, seed=1)
    latest = _push(client, ada, league_id, seed=2).json()["snapshot"]
    exploiter = _opponents(client, ada, league_id, learner="main_exploiter")
    assert exploiter["role"] == "main_exploiter"
    assert [(o["agent_id"], o["probability"]) for o in exploiter["distribution"]] == [(latest["agent_id"], 1.0)]
    pushed = _push(client, ada, league_id, seed=3, learner="exp", role="main_exploiter")
    assert pushed.status_code == 201 and pushed.json()["snapshot"]["role"] == "main_exploiter"
    clash = _report(client, ada, league_id, [], learner="exp", role="main")
    assert clash.status_code == 409 and "main_exploiter" in clash.json()["detail"]


def repo_league(services, league_id: int):
    with services.sessions() as session:
        return repo.get_league(session, league_id)
