"""The API end to end on a real database and Redis: sign up, submit, rank, play, retire."""

from __future__ import annotations

import hashlib

import pytest

from arena.ladder.background import BackgroundService, ServiceConfig
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, ENV, auth, challenge, checkpoint, new_user, seed_ladder, upload

BUILTINS = ["heuristic", "heuristic:epsilon=0.5", "random"]


def test_sign_up_submit_rank_play_and_retire(client, services):
    # --- users ---------------------------------------------------------------------
    token = new_user(client, "ada")
    assert token.startswith("arena_")
    dup = client.post(f"{API}/users", json={"name": "ada"})
    assert dup.status_code == 409 and "taken" in dup.json()["detail"]
    me = client.get(f"{API}/users/me", headers=auth(token)).json()
    assert me["name"] == "ada" and me["is_admin"] is False
    with services.sessions() as session:  # the token is stored only as its hash
        assert repo.user_for_token(session, token).name == "ada"

    # --- envs ----------------------------------------------------------------------
    envs = client.get(f"{API}/envs").json()
    by_id = {e["id"]: e for e in envs["data"]}
    assert envs["count"] == len(envs["data"]) and ENV in by_id
    assert "mlp" in by_id[ENV]["archs"] and by_id[ENV]["roles"] == ["player", "player"]

    # --- submit --------------------------------------------------------------------
    weights, spec, _ = checkpoint(seed=1)
    created = upload(client, token, weights, spec, name="tiny one")
    assert created.status_code == 201, created.text
    agent = created.json()
    sha = hashlib.sha256(weights).hexdigest()
    assert agent["key"] == f"mlp-{sha[:16]}" and agent["status"] == "queued"
    assert agent["owner"] == "ada" and agent["name"] == "tiny one" and agent["kind"] == "neural"
    assert agent["queue_position"] == 1 and agent["expected_matches_to_settle"] > 0
    again = upload(client, token, weights, spec)
    assert again.status_code == 409 and again.json()["existing_id"] == agent["id"]
    second = upload(client, token, *checkpoint(seed=2)[:2]).json()
    assert second["queue_position"] == 2
    assert services.pool.exists(sha) and sha in services.pool.list(f"submissions.{ENV}")
    assert client.get(f"{API}/agents/{agent['id']}").json() == agent
    mine = client.get(f"{API}/agents", params={"owner": "ada", "status": "queued"}).json()
    assert mine["count"] == 2 and [a["id"] for a in mine["data"]] == [second["id"], agent["id"]]
    assert client.get(f"{API}/agents", params={"owner": str(me["id"])}).json()["count"] == 2
    assert client.get(f"{API}/agents", params={"owner": "nobody"}).json() == {"data": [], "count": 0}

    # --- a ladder of builtins ------------------------------------------------------
    ids = seed_ladder(services, BUILTINS, 600)
    board = client.get(f"{API}/leaderboard", params={"env": ENV}).json()
    assert board["env"] == ENV and board["role"] == "player" and board["count"] == 3
    rows = board["data"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert rows[0]["key"] == "heuristic" and rows[-1]["key"] == "random"
    assert [r["conservative"] for r in rows] == sorted((r["conservative"] for r in rows), reverse=True)
    for r in rows:
        assert r["rank_lo"] <= r["rank"] <= r["rank_hi"]
        assert r["ci_low"] == pytest.approx(r["mu"] - 1.96 * r["sigma"])
        assert r["games"] == r["wins"] + r["draws"] + r["losses"] > 0
        assert r["win_rate"] == pytest.approx((r["wins"] + r["draws"] / 2) / r["games"])
        assert r["last_match_at"] is not None
    page = client.get(f"{API}/leaderboard", params={"env": ENV, "limit": 1, "offset": 1}).json()
    assert page["count"] == 3 and [r["key"] for r in page["data"]] == [rows[1]["key"]]

    # --- matches -------------------------------------------------------------------
    first = client.get(f"{API}/matches", params={"env": ENV, "limit": 25}).json()
    seqs = [m["seq"] for m in first["data"]]
    assert len(seqs) == 25 and seqs == sorted(seqs, reverse=True) and first["next_cursor"]
    older = client.get(f"{API}/matches", params={"env": ENV, "limit": 25,
                                                 "cursor": first["next_cursor"]}).json()
    assert max(m["seq"] for m in older["data"]) < min(seqs)
    one = first["data"][0]
    assert one["agent_ids"] == [ids[k] for k in one["seats"]]
    full = client.get(f"{API}/matches/{one['id']}").json()
    assert full["seq"] == one["seq"] and full["rated"] is True and full["actions"]
    assert all(len(pair) == 2 for pair in full["actions"])
    random_games = client.get(f"{API}/matches", params={"agent": ids["random"], "limit": 200}).json()
    assert all(ids["random"] in m["agent_ids"] for m in random_games["data"])

    # --- history and payoff --------------------------------------------------------
    history = client.get(f"{API}/agents/{ids['heuristic']}/history").json()
    points = history["data"]
    assert len(points) == rows[0]["games"] and points[-1]["mu"] == pytest.approx(rows[0]["mu"])
    assert [p["match_seq"] for p in points] == sorted(p["match_seq"] for p in points)
    payoff = client.get(f"{API}/envs/{ENV}/payoff", params={"top": 3}).json()
    assert [a["id"] for a in payoff["agents"]] == [r["agent_id"] for r in rows]
    assert sum(payoff["nash"]) == pytest.approx(1.0)
    rates, games = payoff["win_rate"], payoff["games"]
    for i in range(3):
        assert rates[i][i] is None and games[i][i] == 0
        for j in range(3):
            if i != j:
                assert games[i][j] == games[j][i] > 0
                assert rates[i][j] + rates[j][i] == pytest.approx(1.0)
    assert rates[0][2] > 0.5  # the heuristic beats random

    # --- challenges ----------------------------------------------------------------
    body = {"env": ENV, "agents": [agent["id"], ids["random"]], "matches": 4, "rated": True}
    assert client.post(f"{API}/challenges", json=body).status_code == 401
    users_unrated = client.post(f"{API}/challenges", json=body, headers=auth(token))
    assert users_unrated.status_code == 403 and "unrated" in users_unrated.json()["detail"]
    queued = client.post(f"{API}/challenges", json=body, headers=auth(ADMIN_TOKEN))
    assert queued.status_code == 409 and "queued" in queued.json()["detail"]
    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=(ENV,)))
    service.process_submissions()
    service.stop()
    assert client.get(f"{API}/agents/{agent['id']}").json()["status"] == "placement"  # validated
    rated = challenge(client, services, body, ADMIN_TOKEN)  # the operator may rate
    assert rated["status"] == "done" and rated["rated"] is True
    results = rated["results"]
    assert rated["match_ids"] == [m["id"] for m in results] and len(results) == 4
    assert [m["agent_ids"] for m in results] == [[agent["id"], ids["random"]],
                                                 [ids["random"], agent["id"]]] * 2
    rating = client.get(f"{API}/agents/{agent['id']}").json()["ratings"]
    assert len(rating) == 1 and rating[0]["games"] == 4
    assert len(client.get(f"{API}/agents/{agent['id']}/history").json()["data"]) == 4
    unrated = challenge(client, services, {**body, "rated": False, "matches": 3}, token)
    assert unrated["status"] == "done" and unrated["rated"] is False and len(unrated["results"]) == 3
    for m in unrated["results"]:
        assert client.get(f"{API}/matches/{m['id']}").json()["rated"] is False
    after = client.get(f"{API}/agents/{agent['id']}").json()["ratings"]
    assert after == rating  # unrated matches never move a rating
    played = client.get(f"{API}/matches", params={"agent": agent["id"]}).json()["data"]
    assert len(played) == 4 + 4 + 3  # validation episodes, rated and unrated challenges: all in its history

    # --- retire --------------------------------------------------------------------
    other = new_user(client, "bob")
    url = f"{API}/agents/{agent['id']}"
    assert client.delete(url).status_code == 401
    assert client.delete(url, headers=auth(other)).status_code == 403
    on_board = client.get(f"{API}/leaderboard", params={"env": ENV}).json()
    assert agent["id"] in [r["agent_id"] for r in on_board["data"]]
    retired = client.delete(url, headers=auth(token))
    assert retired.status_code == 200 and retired.json()["status"] == "retired"
    assert "ada" in retired.json()["status_reason"]
    assert client.get(url).json()["status"] == "retired"  # history stays
    off_board = client.get(f"{API}/leaderboard", params={"env": ENV}).json()
    assert agent["id"] not in [r["agent_id"] for r in off_board["data"]]
    assert off_board["count"] == 3
    assert len(client.get(f"{API}/matches", params={"agent": agent["id"]}).json()["data"]) == len(played)
    again = client.post(f"{API}/challenges", json={**body, "rated": False}, headers=auth(token))
    assert again.status_code == 409 and "retired" in again.json()["detail"]


def test_admin_token_may_retire_any_agent(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 20)
    user = new_user(client, "eve")
    assert client.delete(f"{API}/agents/{ids['random']}", headers=auth(user)).status_code == 403
    done = client.delete(f"{API}/agents/{ids['random']}", headers=auth(ADMIN_TOKEN))
    assert done.status_code == 200 and done.json()["status"] == "retired"
    assert client.get(f"{API}/users/me", headers=auth(ADMIN_TOKEN)).json()["is_admin"] is True
