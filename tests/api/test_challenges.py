"""Challenges: rated results come only from the ladder's own pairings (issue 20).

A user's challenge is played unrated; asking for a rated one is refused (403) and
changes nothing. Only the operator's admin token may record a rated challenge.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, ENV, auth, new_user, seed_ladder


def _ratings(client: TestClient, agent_ids: list[int]) -> dict[int, list[dict]]:
    return {a: client.get(f"{API}/agents/{a}").json()["ratings"] for a in agent_ids}


def _matches(client: TestClient, agent_id: int) -> int:
    return len(client.get(f"{API}/matches", params={"agent": agent_id, "limit": 200}).json()["data"])


def test_a_users_rated_challenge_of_other_peoples_agents_changes_no_rating(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 20)  # nobody's agents: the ladder's builtins
    pair = [ids["heuristic"], ids["random"]]
    token = new_user(client, "mallory")
    before, played = _ratings(client, pair), _matches(client, pair[0])
    body = {"env": ENV, "agents": pair, "matches": 4, "rated": True}

    refused = client.post(f"{API}/challenges", json=body, headers=auth(token))
    assert refused.status_code == 403
    detail = refused.json()["detail"]
    assert "challenges by users are unrated" in detail and "ARENA_ADMIN_TOKEN" in detail
    assert _ratings(client, pair) == before and _matches(client, pair[0]) == played  # nothing was played

    unrated = client.post(f"{API}/challenges", json={**body, "rated": False}, headers=auth(token))
    assert unrated.status_code == 201, unrated.text
    assert unrated.json()["rated"] is False and len(unrated.json()["match_ids"]) == 4
    assert _ratings(client, pair) == before  # played and listed, no rating moved
    assert _matches(client, pair[0]) == played + 4

    rated = client.post(f"{API}/challenges", json=body, headers=auth(ADMIN_TOKEN))
    assert rated.status_code == 201, rated.text
    assert rated.json()["rated"] is True
    after = _ratings(client, pair)
    for agent_id in pair:
        assert after[agent_id][0]["games"] == before[agent_id][0]["games"] + 4
        assert after[agent_id][0]["mu"] != before[agent_id][0]["mu"]


def test_the_schema_says_user_challenges_are_unrated(client):
    schema = client.get("/openapi.json").json()
    rated = schema["components"]["schemas"]["ChallengeCreate"]["properties"]["rated"]
    assert "unrated" in rated["description"] and "403" in rated["description"]
    assert "403" in schema["paths"][f"{API}/challenges"]["post"]["responses"]
