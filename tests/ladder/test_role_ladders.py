"""Ladders for every env: role envs (hiders vs seekers, predators vs prey), rps, ARENA_ENVS.

Real services (SQLite, and PostgreSQL where marked), the real background service and
the API through a TestClient.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agents.checkpoint import serialize_weights
from agents.neural import random_init_checkpoint
from arena.api.app import create_app
from arena.core.settings import Settings
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.demo import seed_demo
from arena.ladder.recorder import rebuild_ratings
from arena.ladder.registration import ladder_envs
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services, open_services
from envs.errors import UnknownEnv
from envs.registry import builtin_env_ids, get_spec
from tests.api.helpers import challenge

API = "/api/v1"
HS = "hide_and_seek-v0"
ADMIN_TOKEN = "role-ladders-admin"  # rated challenges are the operator's
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the first test covers PostgreSQL


def _services(tmp_path: Path, db_url: str, redis_url: str, envs: str = "") -> Services:
    return open_services(Settings(data_dir=tmp_path / "arena", database_url=db_url, redis_url=redis_url,
                                  page_cache_s=0.0, envs=envs, admin_token=ADMIN_TOKEN))


@pytest.fixture
def services(tmp_path, migrated_db_url, redis_url) -> Iterator[Services]:
    with _services(tmp_path, migrated_db_url, redis_url) as svc:
        yield svc


@pytest.fixture
def client(services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


def _service(services: Services, *envs: str, **config) -> BackgroundService:
    runner = InProcessRunner(services.snapshot_cache_factory()())
    return BackgroundService(services, runner, ServiceConfig(envs=envs, max_rate=1e9, **config))


def _token(client: TestClient, name: str) -> str:
    response = client.post(f"{API}/users", json={"name": name})
    assert response.status_code == 201, response.text
    return response.json()["token"]


def _upload(client: TestClient, token: str, env: str, role: str, seed: int = 0, name: str = "tiny"):
    state, spec = random_init_checkpoint(env, "mlp", {"hidden": [8]}, seed=seed, role=role, name=name)
    files = [("weights", ("agent.safetensors", serialize_weights(state), "application/octet-stream")),
             ("spec", (None, json.dumps(spec.to_json()))), ("env", (None, env)), ("name", (None, name))]
    return client.post(f"{API}/agents", files=files, headers={"Authorization": f"Bearer {token}"})


def _board(client: TestClient, env: str, role: str) -> dict[str, dict]:
    response = client.get(f"{API}/leaderboard", params={"env": env, "role": role})
    assert response.status_code == 200, response.text
    return {row["key"]: row for row in response.json()["data"]}


def test_a_hider_and_a_seeker_submitted_via_the_api_are_rated_on_per_role_boards(client, services):
    token = _token(client, "ada")
    hider = _upload(client, token, HS, "hider", name="my-hider")
    assert hider.status_code == 201, hider.text
    assert hider.json()["status"] == "queued" and hider.json()["status_reason"] == "waiting for validation"
    # The same weights for the other role: a second agent, rated on its own.
    seeker = _upload(client, token, HS, "seeker", name="my-seeker")
    assert seeker.status_code == 201, seeker.text
    assert seeker.json()["id"] != hider.json()["id"]
    again = _upload(client, token, HS, "hider", name="again")
    assert again.status_code == 409 and "as hider" in again.json()["detail"]

    service = _service(services, HS, target_sigma=3.0)
    for _ in range(60):
        service.step()
        statuses = {client.get(f"{API}/agents/{a.json()['id']}").json()["status"] for a in (hider, seeker)}
        if statuses == {"rated"}:
            break
    service.stop()
    assert statuses == {"rated"}

    hiders, seekers = _board(client, HS, "hider"), _board(client, HS, "seeker")
    hider_key, seeker_key = hider.json()["key"], seeker.json()["key"]
    assert hider_key.endswith("@hider") and seeker_key.endswith("@seeker")
    assert hider_key in hiders and hider_key not in seekers
    assert seeker_key in seekers and seeker_key not in hiders
    assert "random" in hiders and "random" in seekers  # validation's opponent plays every role
    assert hiders[hider_key]["games"] > 0 and seekers[seeker_key]["games"] > 0
    page = client.get(f"/envs/{HS}", params={"role": "seeker"})
    assert page.status_code == 200 and "my-seeker" in page.text and "my-hider" not in page.text
    # A challenge lines them up in role order; the seeker plays although its weights' stored
    # spec (from the hider's upload) says hider.
    ids = [hider.json()["id"], seeker.json()["id"]]
    body = {"env": HS, "agents": ids, "matches": 2, "rated": True}
    played = challenge(client, services, body, ADMIN_TOKEN)
    assert played["status"] == "done" and len(played["results"]) == 2, played
    swapped = client.post(f"{API}/challenges", json={**body, "rated": False, "agents": ids[::-1]},
                          headers={"Authorization": f"Bearer {token}"})
    assert swapped.status_code == 422 and "plays role 'seeker'" in swapped.json()["detail"]
    report = rebuild_ratings(services.sessions, get_spec(HS))
    assert report.equal, report.mismatches[:3]
    assert report.standings == len(hiders) + len(seekers)


@sqlite_only
def test_an_agent_that_cannot_be_scheduled_says_what_it_waits_for(client, services):
    token = _token(client, "bo")
    hider = _upload(client, token, HS, "hider", name="lonely-hider").json()
    service = _service(services, HS)
    service.process_submissions()
    with services.sessions.begin() as session:  # retire validation's random: nobody can seek
        repo.set_agent_status(session, repo.get_agent_by_key(session, HS, "random").id, "retired")
    assert service.ladder_round(HS) == 0
    agent = client.get(f"{API}/agents/{hider['id']}").json()
    assert agent["status"] == "placement"
    assert agent["status_reason"] == "waiting for a seeker opponent"
    assert "waiting for a seeker opponent" in client.get(f"/agents/{hider['id']}").text
    env_page = client.get(f"/envs/{HS}", params={"role": "hider"}).text
    assert 'id="waiting"' in env_page and "lonely-hider" in env_page and "waiting for a seeker opponent" in env_page
    # A seeker arrives: the hider plays and the reason is gone.
    assert _upload(client, token, HS, "seeker", seed=1, name="a-seeker").status_code == 201
    service.process_submissions()
    assert service.ladder_round(HS) > 0
    service.stop()
    agent = client.get(f"{API}/agents/{hider['id']}").json()
    assert agent["status_reason"] == "" and agent["ratings"][0]["games"] > 0


@sqlite_only
def test_simple_tag_and_rps_ladders_play_with_role_baselines(services):
    envs = ("simple_tag-v3", "rps-v2")
    assert seed_demo(services, envs, neural_per_env=0) > 0
    service = _service(services, *envs)
    played = sum(service.step() for _ in range(3))
    service.stop()
    assert played > 0
    with services.sessions() as session:
        for env_id in envs:
            spec = get_spec(env_id)
            for role in dict.fromkeys(spec.roles):
                rows = repo.board_rows(session, env_id, role)
                assert len(rows) >= 2 and all(r.rating.games > 0 for r in rows), (env_id, role)
            assert rebuild_ratings(services.sessions, spec).equal
        predators = {r.key for r in repo.board_rows(session, "simple_tag-v3", "predator")}
        prey = {r.key for r in repo.board_rows(session, "simple_tag-v3", "prey")}
    assert "chaser" in predators and "chaser" not in prey  # a role baseline plays only its role
    assert "evader" in prey and "evader" not in predators


@sqlite_only
def test_arena_envs_limits_and_extends_the_ladders(tmp_path, migrated_db_url, redis_url):
    assert ladder_envs("") == builtin_env_ids()
    assert {"hide_and_seek-v0", "simple_tag-v3", "rps-v2"} <= set(builtin_env_ids())
    assert ladder_envs(" rps-v2 ,tictactoe-v3") == ("rps-v2", "tictactoe-v3")
    with pytest.raises(UnknownEnv):
        ladder_envs("nope-v1")
    setting = "tictactoe-v3,third_rps-v0=pettingzoo.classic.rps_v2:env"
    envs = ladder_envs(setting)
    assert envs == ("tictactoe-v3", "third_rps-v0")
    with _services(tmp_path, migrated_db_url, redis_url, envs=setting) as services:
        seed_demo(services, envs, neural_per_env=1)  # random and one MLP on the third-party env
        service = _service(services, *envs)
        service.step()
        service.stop()
        with services.sessions() as session:
            assert repo.board_rows(session, "third_rps-v0", "player")[0].rating.games > 0
            assert repo.count_matches(session, "hide_and_seek-v0") == 0  # not listed: no ladder
        with TestClient(create_app(services)) as client:  # a submission for an unlisted env waits, saying why
            response = _upload(client, _token(client, "cy"), "rps-v2", "player")
            assert response.status_code == 201, response.text
            assert "no ladder runs for rps-v2" in response.json()["status_reason"]


@sqlite_only
def test_the_demo_seeds_scripted_baselines_for_every_role_of_every_env(services):
    envs = builtin_env_ids()
    seed_demo(services, envs, neural_per_env=1)
    with services.sessions() as session:
        for env_id in envs:
            agents = repo.list_agents(session, env_id)
            for role in dict.fromkeys(get_spec(env_id).roles):
                scripted = [a.key for a in agents if a.kind == "builtin" and a.plays(role)]
                assert len(scripted) >= 2, (env_id, role, scripted)
                assert any(a.kind == "neural" and a.role == role for a in agents), (env_id, role)
        roles = {a.key: a.role for a in repo.list_agents(session, HS)}
    assert roles["chaser"] == roles["chaser:epsilon=0.3"] == "seeker"
    assert roles["box-hider"] == "hider" and roles["random"] is None
    # The demo's hider and seeker MLPs share weights: one snapshot, two agents, one per role.
    assert roles["mlp-" + next(k for k in roles if k.endswith("@hider"))[4:-6] + "@seeker"] == "seeker"
