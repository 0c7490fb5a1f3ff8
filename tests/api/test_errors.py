"""Error responses: one shape (``{"detail": str}``), the right status, a useful message."""

from __future__ import annotations

import pytest

from arena.storage.db import repositories as repo
from tests.api.helpers import API, ENV, auth, new_user, seed_ladder

GET_ERRORS = [
        ("/agents/999999", 404, "no agent with id 999999"),
        ("/agents/999999/history", 404, "no agent with id 999999"),
        ("/matches/5f0c8a52-0d8e-4c43-9f4e-3c1d2b7a9e10", 404, "no match with id"),
        ("/matches/not-a-uuid", 404, "no match with id"),
        ("/envs/nope-v1", 404, "unknown env 'nope-v1'; registered envs:"),
        ("/envs/nope-v1/payoff", 404, "unknown env 'nope-v1'"),
        ("/leaderboard?env=nope-v1", 404, "unknown env 'nope-v1'"),
        ("/agents?env=nope-v1", 404, "unknown env"),
        ("/matches?env=nope-v1", 404, "unknown env"),
        ("/agents/abc", 404, "Not Found"),  # /agents/{agent_id:int}: no route for it
        ("/agents/0", 422, "path parameter agent_id: Input should be greater than or equal to 1"),
        (f"/agents/{2**40}", 422, "path parameter agent_id"),
        ("/leaderboard", 422, "query parameter env: Field required"),
        (f"/leaderboard?env={ENV}&limit=0", 422, "query parameter limit"),
        (f"/leaderboard?env={ENV}&role=seeker", 422, "no role 'seeker'; its roles: player"),
        ("/envs/simple_tag-v3/payoff", 422, "symmetric envs"),
        ("/matches?cursor=abc", 422, "cursor must be a next_cursor value"),
        ("/agents?status=sleeping", 422, "query parameter status"),
        ("/users/me", 401, "needs an API token"),
        ("/no/such/route", 404, "Not Found"),
]


def test_get_errors(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 4)
    table = [
        *GET_ERRORS,
        (f"/agents/{ids['random']}/history?role=seeker", 422, "no role 'seeker'"),
        (f"/agents/{ids['random']}/history?role=a%00b", 422, "no role"),
        (f"/leaderboard?env={ENV}&role=a%00b", 422, "no role"),
        ("/agents?owner=a%00b", 200, None),  # never reaches SQL (PostgreSQL refuses NUL)
        ("/matches/a%00b", 404, "no match"),
    ]
    # One app for the whole table: each case is one request (cheaper than a database each).
    for path, status, fragment in table:
        response = client.get(API + path)
        assert response.status_code == status, (path, response.text)
        if fragment is None:
            continue
        detail = response.json()["detail"]
        assert isinstance(detail, str) and fragment in detail, (path, detail)


@pytest.mark.parametrize(
    "headers, fragment",
    [
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "must be 'Bearer <token>'"),
        ({"Authorization": "Bearer nope"}, "invalid or revoked API token"),
        ({"Authorization": "Bearer " + "x" * 5000}, "invalid or revoked API token"),
    ],
)
def test_bad_tokens_are_401(client, headers, fragment):
    response = client.get(f"{API}/users/me", headers=headers)
    assert response.status_code == 401 and fragment in response.json()["detail"]
    assert response.headers["www-authenticate"] == "Bearer"


def test_revoked_token_is_refused(client, services):
    token = new_user(client, "ada")
    assert client.get(f"{API}/users/me", headers=auth(token)).status_code == 200
    with services.sessions.begin() as session:
        assert repo.revoke_api_token(session, token)
    assert client.get(f"{API}/users/me", headers=auth(token)).status_code == 401


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"name": ""}, "name: String should match pattern"),
        ({"name": "1abc"}, "name: String should match pattern"),
        ({"name": "a b"}, "name: String should match pattern"),
        ({"name": "ok", "admin": True}, "admin: Extra inputs are not permitted"),
        ({}, "name: Field required"),
    ],
)
def test_bad_user_bodies_are_422(client, body, fragment):
    response = client.post(f"{API}/users", json=body)
    assert response.status_code == 422 and fragment in response.json()["detail"]


def test_challenge_errors(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 10)
    other = seed_ladder(services, ["heuristic", "random"], 10, env="connect_four-v3")
    token = new_user(client, "ada")

    def challenge(**body):
        payload = {"env": ENV, "agents": [ids["heuristic"], ids["random"]], **body}
        return client.post(f"{API}/challenges", json=payload, headers=auth(token))

    cases = [
        (challenge(agents=[ids["heuristic"]]), 422, "give exactly 2 agent ids"),
        (challenge(agents=[ids["heuristic"], 999_999]), 404, "no agent with id 999999"),
        (challenge(agents=[ids["heuristic"], other["random"]]), 422, "plays connect_four-v3"),
        (challenge(env="nope-v1"), 404, "unknown env"),
        (challenge(matches=101), 422, "matches: Input should be less than or equal to 100"),
        (challenge(matches=0), 422, "matches"),
        (challenge(seed=3), 422, "seed: Extra inputs are not permitted"),
    ]
    for response, status, fragment in cases:
        assert response.status_code == status, response.text
        assert fragment in response.json()["detail"]
    with services.sessions() as session:
        assert repo.count_matches(session, ENV) == 10  # nothing was played


def test_health_and_openapi(client):
    health = client.get(f"{API}/health").json()
    assert {k: health[k] for k in ("status", "database", "redis")} == {"status": "ok", "database": "ok",
                                                                      "redis": "ok"}
    assert set(health) == {"status", "database", "redis", "onnx_sandbox"}  # its layers: test_onnx_confinement
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in ("/api/v1/users", "/api/v1/agents", "/api/v1/agents/{agent_id}",
                 "/api/v1/agents/{agent_id}/history", "/api/v1/leaderboard", "/api/v1/matches",
                 "/api/v1/matches/{match_id}", "/api/v1/challenges", "/api/v1/envs",
                 "/api/v1/envs/{env}/payoff", "/api/v1/health"):
        assert path in paths, path
    upload = paths["/api/v1/agents"]["post"]
    assert "multipart/form-data" in upload["requestBody"]["content"]
    assert {"401", "409", "413", "422"} <= set(upload["responses"])
