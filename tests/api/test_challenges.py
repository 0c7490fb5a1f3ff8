"""Challenges (issue 20): queued by the request, played by the background service.

A user's challenge is played unrated; asking for a rated one is refused (403) and
changes nothing. Only the operator's admin token may record a rated challenge. No
request plays a match: ``POST /challenges`` answers 202 with the match ids, the service
plays them, ``GET /challenges/{id}`` says how far it got; a challenge queued while no
service runs is played when one starts, and one a dead service left half played is
finished by the next, each match recorded once.
"""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from agents.catalog import make_policy
from arena.engine import MatchEngine, MatchJob
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.challenges import load_challenge
from arena.ladder.recorder import record_unrated
from arena.ladder.work_queue import MAX_ATTEMPTS
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from envs.registry import get_spec
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, ENV, auth, challenge, new_user, play_challenges, seed_ladder
from tests.waiting import wait_for


def _ratings(client: TestClient, agent_ids: list[int]) -> dict[int, list[dict]]:
    return {a: client.get(f"{API}/agents/{a}").json()["ratings"] for a in agent_ids}


def _matches(client: TestClient, agent_id: int) -> int:
    return len(client.get(f"{API}/matches", params={"agent": agent_id, "limit": 200}).json()["data"])


def _stored(services, match_ids: list[str]) -> list[repo.StoredMatch]:
    with services.sessions() as session:
        return repo.get_matches(session, match_ids)


def _wait_until_ended(client: TestClient, challenge_id: str, timeout: float = 60.0) -> dict:
    def status() -> dict:
        return client.get(f"{API}/challenges/{challenge_id}").json()
    return wait_for(f"challenge {challenge_id} to end", lambda: (found := status())["status"] in ("done", "failed")
                    and found, timeout_s=timeout, explain=lambda: f"it is {status()['status']}")


def _service(services) -> BackgroundService:
    """The background service with no ladders: only its queues (people, challenges) play."""
    return BackgroundService(services, InProcessRunner(), ServiceConfig(envs=(), seed=3))


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
    assert play_challenges(services) == 0  # nothing was queued
    assert _ratings(client, pair) == before and _matches(client, pair[0]) == played  # nothing was played

    unrated = challenge(client, services, {**body, "rated": False}, token)
    assert unrated["status"] == "done" and unrated["rated"] is False and len(unrated["match_ids"]) == 4
    assert [m["id"] for m in unrated["results"]] == unrated["match_ids"] and unrated["recorded"] == 4
    assert _ratings(client, pair) == before  # played and listed, no rating moved
    assert _matches(client, pair[0]) == played + 4

    rated = challenge(client, services, body, ADMIN_TOKEN)
    assert rated["status"] == "done" and rated["rated"] is True
    after = _ratings(client, pair)
    for agent_id in pair:
        assert after[agent_id][0]["games"] == before[agent_id][0]["games"] + 4
        assert after[agent_id][0]["mu"] != before[agent_id][0]["mu"]


def test_the_schema_says_user_challenges_are_unrated_and_queued(client):
    schema = client.get("/openapi.json").json()
    rated = schema["components"]["schemas"]["ChallengeCreate"]["properties"]["rated"]
    assert "unrated" in rated["description"] and "403" in rated["description"]
    post = schema["paths"][f"{API}/challenges"]["post"]["responses"]
    assert "403" in post and "202" in post and "Location" in post["202"]["headers"]
    assert "404" in schema["paths"][f"{API}/challenges/{{challenge_id}}"]["get"]["responses"]


def test_a_challenge_queued_while_no_service_runs_is_played_when_one_starts(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 10)
    token = new_user(client, "ada")
    body = {"env": ENV, "agents": [ids["heuristic"], ids["random"]], "matches": 4}
    with services.sessions() as session:
        before = repo.count_matches(session)

    queued = client.post(f"{API}/challenges", json=body, headers=auth(token))
    assert queued.status_code == 202, queued.text
    answer = queued.json()
    assert (answer["status"], answer["recorded"], answer["results"], answer["rated"]) == ("queued", 0, [], False)
    assert len(answer["match_ids"]) == 4 and answer["agents"] == body["agents"]
    # What the request left for a service: the record, queued and untouched, with every
    # match fixed, its id on the queue and among the open ones; and no match played.
    keys = services.pool.keys
    challenges = keys.work_queue("challenges")
    stored = load_challenge(services.redis, keys, answer["id"])
    assert (stored.status, stored.attempts, stored.recorded, stored.finished) == ("queued", 0, 0, 0.0)
    assert stored.request.match_ids == answer["match_ids"] and list(stored.request.agent_ids) == body["agents"]
    assert not stored.request.rated and stored.request.env_id == ENV
    assert services.redis.lrange(challenges.queue, 0, -1) == [answer["id"].encode()]
    assert services.redis.smembers(challenges.open_set) == {answer["id"].encode()}
    assert client.get(queued.headers["Location"]).json()["status"] == "queued"
    with services.sessions() as session:
        assert repo.count_matches(session) == before  # the request played nothing
    assert client.get(f"{API}/challenges/00000000-0000-4000-8000-000000000000").status_code == 404
    assert client.get(f"{API}/challenges/not-a-uuid").status_code == 422

    service = _service(services).start()
    try:
        done = _wait_until_ended(client, answer["id"])
    finally:
        service.stop()
    assert done["status"] == "done" and done["recorded"] == 4 and done["finished_at"] is not None
    assert [m["id"] for m in done["results"]] == answer["match_ids"]
    assert {tuple(m["agent_ids"]) for m in done["results"]} == {tuple(body["agents"]), tuple(body["agents"][::-1])}
    assert [m.id for m in _stored(services, answer["match_ids"])] == answer["match_ids"]


def test_a_challenge_a_dead_service_left_half_played_is_finished_by_the_next_each_match_once(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 10)
    token = new_user(client, "bo")
    body = {"env": ENV, "agents": [ids["heuristic"], ids["random"]], "matches": 6}
    answer = client.post(f"{API}/challenges", json=body, headers=auth(token)).json()
    keys = services.pool.keys
    challenges = keys.work_queue("challenges")
    # What a service killed mid-play leaves (we cannot SIGKILL a thread): the id popped,
    # the record "playing" under its owner with a heartbeat from a minute ago, and the
    # first three matches recorded with the challenge's ids and seeds.
    assert services.redis.lpop(challenges.queue).decode() == answer["id"]
    services.redis.hset(challenges.record(answer["id"]), mapping={
        "status": "playing", "owner": "dead-service", "heartbeat": time.time() - 60, "attempts": 1})
    key = {ids["heuristic"]: "heuristic", ids["random"]: "random"}
    match_ids = answer["match_ids"]
    assert _stored(services, match_ids) == []
    request = load_challenge(services.redis, keys, answer["id"]).request
    jobs = [MatchJob(seed=seed, agents=tuple(key[a] for a in lineup), match_id=m) for m, seed, lineup in request.jobs]
    with MatchEngine() as engine:
        first = engine.play(ENV, jobs[:3], {k: make_policy(k, ENV) for k in key.values()})
    record_unrated(services.sessions, get_spec(ENV), first, {k: i for i, k in key.items()})
    early = {m.id: m.seq for m in _stored(services, match_ids)}
    assert set(early) == set(match_ids[:3])
    assert client.get(f"{API}/challenges/{answer['id']}").json()["status"] == "playing"

    service = _service(services).start()  # its first sweep queues the stale challenge again
    try:
        done = _wait_until_ended(client, answer["id"])
    finally:
        service.stop()
    assert done["status"] == "done" and done["recorded"] == 6
    stored = _stored(services, match_ids)
    assert sorted(m.id for m in stored) == sorted(match_ids)  # every match once
    assert {m.id: m.seq for m in stored if m.id in early} == early  # the first three were not played again
    assert {m.id: m.seed for m in stored} == {m: seed for m, seed, _ in request.jobs}
    assert services.redis.sismember(challenges.open_set, answer["id"]) == 0


def test_a_challenge_that_keeps_killing_its_service_fails_and_one_whose_agent_retired_fails_at_once(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 10)
    token = new_user(client, "cy")
    challenges = services.pool.keys.work_queue("challenges")
    body = {"env": ENV, "agents": [ids["heuristic"], ids["random"]], "matches": 2}
    doomed = client.post(f"{API}/challenges", json=body, headers=auth(token)).json()
    services.redis.hset(challenges.record(doomed["id"]), "attempts", MAX_ATTEMPTS)  # started thrice, never finished
    assert play_challenges(services) == 1
    failed = client.get(f"{API}/challenges/{doomed['id']}").json()
    assert failed["status"] == "failed" and f"{MAX_ATTEMPTS} times" in failed["error"] and failed["results"] == []
    assert _stored(services, doomed["match_ids"]) == []

    mine = client.post(f"{API}/agents/connected", json={"env": ENV, "name": "mine"}, headers=auth(token)).json()
    offline = client.post(f"{API}/challenges", json={**body, "agents": [mine["id"], ids["random"]]},
                          headers=auth(token))
    assert offline.status_code == 409 and "offline" in offline.json()["detail"]
    retiring = client.post(f"{API}/challenges", json=body, headers=auth(ADMIN_TOKEN)).json()
    assert client.delete(f"{API}/agents/{ids['random']}", headers=auth(ADMIN_TOKEN)).status_code == 200
    assert play_challenges(services) == 1
    failed = client.get(f"{API}/challenges/{retiring['id']}").json()
    assert failed["status"] == "failed" and "retired" in failed["error"]
