"""Abuse limits: each answers 429 with Retry-After, and a refused request stores nothing.

Each test sets one limit low (``settings_overrides``) and leaves the others at the
raised test values. The counters live in the test's own Redis database. Limits do not
depend on the database backend, so these run on SQLite only.
"""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from arena.core.limits import Limits
from arena.core.settings import Settings
from arena.storage.db import repositories as repo
from arena.storage.redis_server import free_port
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import (
    API,
    ENV,
    auth,
    checkpoint,
    new_user,
    play_challenges,
    seed_ladder,
    stored_state,
    upload,
)

on_sqlite = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def refused(response, window_s: int) -> int:
    """Assert a 429 with a usable Retry-After (1..window_s); returns it."""
    assert response.status_code == 429, response.text
    retry_after = int(response.headers["Retry-After"])
    assert 1 <= retry_after <= window_s
    assert "too many requests" in response.json()["detail"]
    return retry_after


def matches_stored(services) -> int:
    with services.sessions() as session:
        return repo.count_matches(session)


@on_sqlite
@pytest.mark.parametrize("settings_overrides", [{"signups_per_hour": 3}])
def test_sign_ups_per_client_per_hour(client, services):
    for name in ("a", "b", "c"):
        new_user(client, name)
    refused(client.post(f"{API}/users", json={"name": "d"}), 3600)
    with services.sessions() as session:
        assert repo.get_user_by_name(session, "d") is None
        assert repo.get_user_by_name(session, "c") is not None


@on_sqlite
@pytest.mark.parametrize("settings_overrides", [{"submissions_per_day": 2}])
def test_submissions_per_user_per_env_per_day(client, services):
    token = new_user(client, "alice")
    weights, spec, _ = checkpoint(seed=1)
    assert upload(client, token, weights, "{not json", name="bad").status_code == 422  # refused: not counted
    assert upload(client, token, weights, spec, name="a1").status_code == 201
    assert upload(client, token, weights, spec, name="again").status_code == 409  # duplicate: not counted
    assert upload(client, token, *checkpoint(seed=2)[:2], name="a2").status_code == 201
    before = stored_state(services)
    weights, spec, _ = checkpoint(seed=3)
    refused(upload(client, token, weights, spec, name="a3"), 86_400)
    assert stored_state(services) == before
    # The quota is per env and per user.
    c4_weights, c4_spec, _ = checkpoint("connect_four-v3", seed=3, hparams={"hidden": [4]})
    assert upload(client, token, c4_weights, c4_spec, env="connect_four-v3", name="c4").status_code == 201
    assert upload(client, new_user(client, "bob"), weights, spec, name="b3").status_code == 201
    assert upload(client, ADMIN_TOKEN, *checkpoint(seed=4)[:2], name="admin").status_code == 201


@on_sqlite
@pytest.mark.parametrize("settings_overrides", [{"writes_per_minute": 2}])
def test_writes_per_user_per_minute(client, services):
    token = new_user(client, "alice")
    for seed in (1, 2):
        assert upload(client, token, *checkpoint(seed=seed)[:2], name=f"a{seed}").status_code == 201
    before = stored_state(services)
    refused(upload(client, token, *checkpoint(seed=3)[:2], name="a3"), 60)
    agent = client.get(f"{API}/agents", params={"owner": "alice"}).json()["data"][0]
    refused(client.delete(f"{API}/agents/{agent['id']}", headers=auth(token)), 60)
    assert stored_state(services) == before
    assert client.get(f"{API}/agents/{agent['id']}").json()["status"] == "queued"  # not retired
    # Another user writes on.
    assert upload(client, new_user(client, "bob"), *checkpoint(seed=3)[:2], name="b3").status_code == 201


@on_sqlite
@pytest.mark.parametrize("settings_overrides", [{"client_writes_per_minute": 3}])
def test_writes_per_client_address_per_minute(client, services):
    alice = new_user(client, "alice")  # sign-ups count as writes of the address
    assert upload(client, alice, *checkpoint(seed=1)[:2], name="a1").status_code == 201
    bob = new_user(client, "bob")
    before = stored_state(services)
    refused(upload(client, bob, *checkpoint(seed=2)[:2], name="b2"), 60)
    refused(client.post(f"{API}/users", json={"name": "carol"}), 60)
    assert stored_state(services) == before
    with services.sessions() as session:
        assert repo.get_user_by_name(session, "carol") is None


@on_sqlite
@pytest.mark.parametrize("settings_overrides", [{"challenge_matches_per_hour": 5}])
def test_challenge_matches_per_user_per_hour(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 20)
    token = new_user(client, "alice")
    body = {"env": ENV, "agents": [ids["heuristic"], ids["random"]]}
    assert client.post(f"{API}/challenges", json={**body, "matches": 4}, headers=auth(token)).status_code == 202
    assert play_challenges(services) == 1
    before = matches_stored(services)
    refused(client.post(f"{API}/challenges", json={**body, "matches": 2}, headers=auth(token)), 3600)
    assert play_challenges(services) == 0  # nothing was queued
    assert client.post(f"{API}/challenges", json={**body, "matches": 1}, headers=auth(token)).status_code == 202
    assert play_challenges(services) == 1
    assert matches_stored(services) == before + 1


@on_sqlite
@pytest.mark.parametrize("settings_overrides", [{"challenges_in_flight": 1}])
def test_challenges_in_flight_per_user(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 20)
    token = new_user(client, "alice")
    with services.sessions() as session:
        alice = repo.get_user_by_name(session, "alice").id
    body = {"env": ENV, "agents": [ids["heuristic"], ids["random"]], "matches": 1}
    held = services.pool.keys.busy("challenges", str(alice))
    before = matches_stored(services)
    first = client.post(f"{API}/challenges", json=body, headers=auth(token))
    assert first.status_code == 202 and first.json()["status"] == "queued"
    assert services.redis.get(held) == b"1"  # held by her queued challenge, though its request returned
    assert refused(client.post(f"{API}/challenges", json=body, headers=auth(token)), 1) == 1
    other = client.post(f"{API}/challenges", json=body, headers=auth(new_user(client, "bob")))
    assert other.status_code == 202  # bob is not held up by alice
    assert play_challenges(services) == 2
    assert services.redis.get(held) is None  # given back when her challenge was done
    assert matches_stored(services) == before + 2
    assert client.post(f"{API}/challenges", json=body, headers=auth(token)).status_code == 202
    assert play_challenges(services) == 1
    assert matches_stored(services) == before + 3


def test_limits_let_requests_through_while_redis_is_down(tmp_path):
    """The limits protect the service; they must not take it down with Redis."""
    down = redis.Redis(port=free_port(), socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    limits = Limits(down, Settings(data_dir=tmp_path, signups_per_hour=1, challenges_in_flight=1))
    for _ in range(3):
        limits.sign_up("127.0.0.1")
        limits.write(1, "127.0.0.1")
        with limits.submission(1, ENV), limits.challenge(1, 5):
            pass
