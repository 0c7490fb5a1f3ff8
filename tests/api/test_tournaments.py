"""``/api/v1/tournaments``: organizers create, anyone who may see reads, the service plays it.

A round robin of four scripted agents, best of 3: created by the admin (a user who is not an
organizer: 403, nothing stored), its first round queued at once, then played by the
background service to the end; the JSON's rounds, games, standings and crosstable agree.
A tournament of a private competition is a 404 to a non-member, in the list too.
"""

from __future__ import annotations

from datetime import timedelta

from arena.competitions.tournament_games import tournament_queue
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.registration import register_builtin_agents
from arena.runners import InProcessRunner
from arena.storage.db.base import utcnow
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, ENV, auth, new_user
from tests.waiting import wait_for

FIELD = ["heuristic", "heuristic:epsilon=0.5", "random", "heuristic:epsilon=0.9"]


def _field(services) -> list[int]:
    ids = services.sessions.write_transaction(lambda s: register_builtin_agents(s, ENV, FIELD), what="builtins")
    return [ids[n] for n in FIELD]


def _finished(client, tournament_id: int, timeout: float = 120.0) -> dict:
    def tournament() -> dict:
        return client.get(f"{API}/tournaments/{tournament_id}").json()
    return wait_for(f"tournament {tournament_id} to end", lambda: (body := tournament())["state"] != "running" and body,
                    timeout_s=timeout, explain=lambda: str(tournament()))


def test_a_round_robin_created_through_the_api_is_played_and_read_back(client, services):
    entrants = _field(services)
    body = {"title": "Spring cup", "kind": "round_robin", "games": 3, "entrants": entrants, "env": ENV}
    eve = new_user(client, "eve")
    refused = client.post(f"{API}/tournaments", json=body, headers=auth(eve))
    assert refused.status_code == 403 and "organizers" in refused.json()["detail"]
    assert client.get(f"{API}/tournaments").json()["count"] == 0

    created = client.post(f"{API}/tournaments", json=body, headers=auth(ADMIN_TOKEN))
    assert created.status_code == 201, created.text
    t = created.json()
    assert (t["state"], t["rounds_total"], t["games_played"]) == ("running", 3, 0)
    assert [e["agent_id"] for e in t["entrants"]] == entrants and len(t["rounds"]) == 1
    queue = tournament_queue(services.redis, services.pool.keys)
    assert services.redis.llen(queue.queue) == 2 * 3  # round 1: two tables of three games, queued at once
    listed = client.get(f"{API}/tournaments").json()
    assert listed["count"] == 1 and listed["data"][0]["entrants"] == 4

    service = BackgroundService(services, InProcessRunner(), ServiceConfig(envs=(), seed=1)).start()
    try:
        done = _finished(client, t["id"])
    finally:
        service.stop()
    assert done["state"] == "finished" and done["finished"] and done["games_played"] == 3 * 2 * 3
    pairs = {frozenset((tb["a"], tb["b"])) for r in done["rounds"] for tb in r["tables"]}
    assert len(pairs) == 6  # everyone met everyone once
    for r in done["rounds"]:
        for tb in r["tables"]:
            assert [g["first"] for g in tb["games"]] == [tb["a"], tb["b"], tb["a"]]
            assert all(g["score_a"] is not None for g in tb["games"]) and tb["complete"]
            replay = client.get(f"{API}/matches/{tb['games'][0]['match_id']}")
            assert replay.status_code == 200 and replay.json()["rated"] is False
    assert sum(s["points"] for s in done["standings"]) == 6
    cross = {row["agent_id"]: {m["agent_id"]: m["points"] for m in row["against"]} for row in done["crosstable"]}
    for s in done["standings"]:
        assert sum(p for pts in cross[s["agent_id"]].values() for p in pts) == s["points"]


def test_a_private_competitions_tournament_is_a_404_to_non_members(client, services):
    entrants = _field(services)
    now = utcnow()
    competition = client.post(f"{API}/competitions", headers=auth(ADMIN_TOKEN), json={
        "env": ENV, "title": "Closed", "opens_at": (now - timedelta(minutes=1)).isoformat(),
        "deadline": (now + timedelta(days=1)).isoformat(), "is_public": False})
    assert competition.status_code == 201, competition.text
    cid = competition.json()["id"]
    created = client.post(f"{API}/tournaments", headers=auth(ADMIN_TOKEN), json={
        "title": "Closed cup", "kind": "single_elimination", "games": 1, "entrants": entrants, "competition_id": cid})
    assert created.status_code == 201, created.text
    tid = created.json()["id"]
    outsider = auth(new_user(client, "outsider"))
    assert client.get(f"{API}/tournaments/{tid}", headers=outsider).status_code == 404
    assert client.get(f"{API}/tournaments/{tid}").status_code == 404
    assert client.get(f"{API}/tournaments", headers=outsider).json()["count"] == 0
    assert client.get(f"{API}/tournaments", params={"competition": cid}, headers=outsider).status_code == 404
    seen = client.get(f"{API}/tournaments", params={"competition": cid}, headers=auth(ADMIN_TOKEN)).json()
    assert [t["id"] for t in seen["data"]] == [tid]
    assert client.get(f"{API}/tournaments/{tid}", headers=auth(ADMIN_TOKEN)).json()["rounds_total"] == 2
