"""A GET changes nothing (issue 20): reading a match, its frames or its page writes no row
and no Redis key; only an owner's (or an admin's) view keeps a replay; frames are cached."""

from __future__ import annotations

from arena.storage.db import repositories as repo
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, auth, challenge, checkpoint, every_row_and_key, new_user, seed_ladder, upload


def _requested(services, match_id: str) -> bool:
    with services.sessions() as session:
        return repo.replay_state(session, match_id).requested


def test_anonymous_reads_of_a_match_its_frames_and_its_page_change_nothing(client, services):
    seed_ladder(services, ["heuristic", "random"], 6)
    with services.sessions() as session:
        match_id = repo.match_history(session, limit=1).matches[0].id
    new_user(client, "ada")  # something in Redis: the sign-up limit's counters
    before = every_row_and_key(services)
    assert before["tables"]["matches"] and before["redis"]
    for url in (f"{API}/matches/{match_id}", f"{API}/matches/{match_id}/frames", f"/matches/{match_id}",
                f"{API}/matches/{match_id}/frames", f"{API}/matches", f"/matches/{match_id}"):
        assert client.get(url).status_code == 200, url
    assert every_row_and_key(services) == before
    assert not _requested(services, match_id)


def test_frames_are_simulated_once_per_match(client, services):
    seed_ladder(services, ["heuristic", "random"], 4)
    with services.sessions() as session:
        first, second = (m.id for m in repo.match_history(session, limit=2).matches)
    cache = client.app.state.api.frames
    hits, misses = cache.hits, cache.misses
    one = client.get(f"{API}/matches/{first}/frames").json()
    assert (cache.hits, cache.misses) == (hits, misses + 1)
    assert client.get(f"{API}/matches/{first}/frames").json() == one  # served from the cache
    assert client.get(f"/matches/{first}").status_code == 200  # the page draws the same frames
    assert (cache.hits, cache.misses) == (hits + 2, misses + 1)
    assert one["kind"] == "board" and len(one["frames"]) == len(one["moves"]) + 1
    client.get(f"{API}/matches/{second}/frames")
    assert (cache.hits, cache.misses) == (hits + 2, misses + 2)  # another match: simulated


def test_only_an_owner_or_an_admin_keeps_a_replay_by_viewing_it(client, services):
    ids = seed_ladder(services, ["heuristic", "random"], 4)
    ada, bob = new_user(client, "ada"), new_user(client, "bob")
    weights, spec, _ = checkpoint(seed=1)
    agent = upload(client, ada, weights, spec).json()
    body = {"env": "tictactoe-v3", "agents": [ids["heuristic"], ids["random"]], "matches": 1}
    builtin_match = challenge(client, services, body, bob)["match_ids"][0]
    with services.sessions() as session:
        ladder_match = repo.match_history(session, agent_id=ids["random"], limit=1).matches[0].id
    assert agent["status"] == "queued"  # no matches of ada's yet: she owns no seat of either match

    for token in (None, ada, bob):  # anonymous, and users who own none of the agents
        headers = {} if token is None else auth(token)
        assert client.get(f"{API}/matches/{builtin_match}", headers=headers).status_code == 200
        assert client.get(f"{API}/matches/{builtin_match}/frames", headers=headers).status_code == 200
    assert not _requested(services, builtin_match)
    assert client.get(f"{API}/matches/{ladder_match}", headers=auth(ADMIN_TOKEN)).status_code == 200
    assert _requested(services, ladder_match)  # the operator's view keeps it
    bad = client.get(f"{API}/matches/{builtin_match}", headers=auth("not-a-token"))
    assert bad.status_code == 401


def test_an_owners_view_keeps_the_replay_of_its_agents_match(client, services):
    from arena.ladder.background import BackgroundService, ServiceConfig
    from arena.runners import InProcessRunner

    seed_ladder(services, ["heuristic", "random"], 2)
    ada, bob = new_user(client, "ada"), new_user(client, "bob")
    weights, spec, _ = checkpoint(seed=1)
    agent_id = upload(client, ada, weights, spec).json()["id"]
    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=("tictactoe-v3",)))
    service.process_submissions()  # validation: the agent's first matches
    service.stop()
    with services.sessions() as session:
        match_id = repo.match_history(session, agent_id=agent_id, limit=1).matches[0].id
    client.get(f"{API}/matches/{match_id}", headers=auth(bob))
    assert not _requested(services, match_id)
    client.get(f"{API}/matches/{match_id}/frames", headers=auth(ada))
    assert _requested(services, match_id)
