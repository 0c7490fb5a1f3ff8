"""Replay retention: old replays nobody kept lose their moves; results and rebuild stay.

Kept are what no crawler can forge (issue 20): replays an owner of one of the match's
agents opened with its token, and what the site links (a league timeline's firsts, the
newest matches of every agent and env). Anonymous views and other users' views keep
nothing.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agents.catalog import make_policy
from arena.api import create_app
from arena.core.agent_status import AgentStatus
from arena.core.settings import Settings
from arena.engine import MatchEngine, MatchJob
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.ladder.people import GUEST_DONE
from arena.ladder.recorder import rebuild_ratings, record_unrated
from arena.ladder.registration import register_connected_agent
from arena.ladder.retention import ReplayRetention
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import repositories as repo
from arena.storage.db.base import utcnow
from arena.storage.wiring import open_services
from envs.registry import get_spec
from tests.api.helpers import API, ENV, auth, checkpoint, new_user, upload

RECENT = 2  # newest matches of each agent and env that the site links (20 in the service)


@pytest.fixture
def services(migrated_db_url, redis_url, tmp_path: Path):
    settings = Settings(data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url, page_cache_s=0.0)
    with open_services(settings) as svc:
        yield svc


def _validated_agent(client: TestClient, services, token: str) -> int:
    """A submission of the user of ``token``, through validation (its first, unrated matches)."""
    weights, spec, _ = checkpoint(seed=1)
    agent = upload(client, token, weights, spec, name="kept").json()
    service = BackgroundService(services, InProcessRunner(services.snapshot_cache_factory()()),
                                ServiceConfig(envs=(ENV,)))
    service.process_submissions()
    service.stop()
    return agent["id"]


def _site_linked(services, agent_ids: list[int]) -> set[int]:
    with services.sessions() as session:
        newest = {m.seq for a in agent_ids for m in repo.match_history(session, agent_id=a, limit=RECENT).matches}
        newest |= {m.seq for m in repo.match_history(session, env_id=ENV, limit=RECENT).matches}
    return newest


def test_retention_keeps_owner_views_and_site_links_drops_the_rest_and_rebuild_equals_live(services):
    ladder = open_ladder(services.sessions, LadderConfig(ENV, batch_size=100, seed=5))
    ladder.add_agents([AgentSource(key=k, builtin=k) for k in ("heuristic", "heuristic:epsilon=0.3", "random")])
    ladder.run(InProcessRunner(), 200)
    with services.sessions() as session:
        old = repo.match_history(session, env_id=ENV, limit=500).matches[::-1]  # oldest first
    assert len(old) == 200
    with TestClient(create_app(services)) as client:
        ada, bob = new_user(client, "ada"), new_user(client, "bob")
        agent_id = _validated_agent(client, services, ada)
        with services.sessions() as session:
            validation = repo.match_history(session, agent_id=agent_id, limit=50).matches[::-1]
        assert len(validation) > RECENT  # its oldest ones are kept only if its owner opens them
        owned = validation[0].id
        assert client.get(f"{API}/matches/{owned}", headers=auth(ada)).status_code == 200  # the owner: kept
        assert client.get(f"{API}/matches/{validation[1].id}", headers=auth(bob)).status_code == 200  # not bob's
        assert client.get(f"{API}/matches/{old[7].id}").status_code == 200  # anonymous: keeps nothing
        assert client.get(f"{API}/matches/{old[7].id}/frames").status_code == 200
        assert client.get(f"/matches/{old[7].id}").status_code == 200
        with services.sessions.begin() as session:
            league = repo.create_league(session, "timeline", ENV, {})
            repo.replace_generations(session, league, [{"generation": 0, "episodes": 1, "phase_rates": {},
                                                        "ratings": {}, "first_matches": {"fort": old[9].id}}])

        retention = ReplayRetention(services.sessions, days=30, chunk=64, recent=RECENT)
        assert retention.run(0.0, wall=utcnow() - timedelta(days=1)) == 0  # nothing is old yet
        with services.sessions() as session:
            newest = repo.match_history(session, env_id=ENV, limit=1).matches[0]
            agent_ids = [a.id for a in repo.list_agents(session, ENV)]
        kept = _site_linked(services, agent_ids) | {validation[0].seq, old[9].seq}
        dropped = retention.run(1.0, wall=newest.created_at + timedelta(days=30, seconds=1))  # all of it is old
        assert retention.run(2.0, wall=newest.created_at + timedelta(days=31)) == 0  # the watermark: nothing twice
        with services.sessions() as session:
            every = repo.match_history(session, env_id=ENV, limit=500).matches
            stored = {m.id: m for m in repo.get_matches(session, [m.id for m in every])}
        assert dropped == len(every) - len(kept)
        assert {m.seq for m in stored.values() if m.actions} == kept
        assert all(m.winner is not None or m.scores for m in stored.values())  # results stay
        for gone in (old[7].id, validation[1].id):  # viewed anonymously, viewed by someone else
            answer = client.get(f"{API}/matches/{gone}")
            assert answer.status_code == 410 and "not kept" in answer.json()["detail"]
        assert client.get(f"{API}/matches/{owned}").status_code == 200
        assert client.get(f"{API}/matches/{old[9].id}").status_code == 200  # a league timeline links it
        assert client.get(f"/matches/{old[7].id}").status_code == 200  # the page says why, no moves
    report = rebuild_ratings(services.sessions, ladder.spec)
    assert report.equal, report.mismatches


def _play_unrated(services, seats: tuple[str, str], ids: dict[str, int], seed: int) -> str:
    """A real match between ``seats`` (a person's seat played by ``random``), stored unrated as the lane stores it."""
    policies = {key: make_policy("random" if key not in ("heuristic", "random") else key, ENV) for key in seats}
    with MatchEngine() as engine:
        [record] = engine.play(ENV, [MatchJob(seed=seed, agents=seats)], policies)
    record_unrated(services.sessions, get_spec(ENV), [record], ids)
    return record.match_id


def test_retention_prunes_retired_guests_with_their_games_and_keeps_people_and_ratings(services):
    ladder = open_ladder(services.sessions, LadderConfig(ENV, batch_size=50, seed=6))
    ladder.add_agents([AgentSource(key=k, builtin=k) for k in ("heuristic", "random")])
    ladder.run(InProcessRunner(), 40)
    with services.sessions.begin() as session:
        user_id = repo.create_user(session, "dana")

    def people(session):
        made = [register_connected_agent(session, ENV, name, owner, None, kind="human")[0]
                for name, owner in (("guest-0000aaaa", None), ("guest-0000bbbb", None), ("dana", user_id))]
        return made

    done_guest, playing_guest, person = services.sessions.write_transaction(people, what="people")
    ids = {**ladder.agent_ids, done_guest.key: done_guest.id, playing_guest.key: playing_guest.id,
           person.key: person.id}
    games = {who.id: [_play_unrated(services, (who.key, "heuristic"), ids, seed=10 * who.id + k) for k in range(2)]
             for who in (done_guest, playing_guest, person)}
    services.sessions.write_transaction(
        lambda s: repo.set_agent_status(s, done_guest.id, AgentStatus.RETIRED, GUEST_DONE), what="one game over")
    with services.sessions() as session:
        before = repo.count_matches(session)
    assert before == 40 + 6

    retention = ReplayRetention(services.sessions, days=0.5, chunk=1)  # one guest per transaction
    assert retention.prune_guests(utcnow() + timedelta(days=0.4)) == 0  # nobody old enough yet
    assert retention.prune_guests(utcnow() + timedelta(days=0.6)) == 1  # the retired guest, not the one playing
    with services.sessions() as session:
        assert repo.get_agent(session, done_guest.id) is None
        assert all(repo.get_match(session, m) is None for m in games[done_guest.id])
        assert repo.count_matches(session) == before - 2
        assert repo.get_agent(session, playing_guest.id).status != "retired"
    # A guest whose game's end was never recorded goes once it is a day old; people stay.
    assert retention.prune_guests(utcnow() + timedelta(days=1, hours=1)) == 1
    with services.sessions() as session:
        assert repo.get_agent(session, playing_guest.id) is None
        assert repo.count_matches(session) == before - 4
        assert repo.get_agent(session, person.id).name == "dana"
        assert [m.id for m in repo.match_history(session, agent_id=person.id).matches[::-1]] == games[person.id]
        assert [a.name for a in repo.list_agents(session, ENV) if a.kind == "human"] == ["dana"]
        assert len(repo.match_history(session, agent_id=ladder.agent_ids["random"], limit=500).matches) == 40
    assert retention.prune_guests(utcnow() + timedelta(days=30)) == 0
    report = rebuild_ratings(services.sessions, ladder.spec)
    assert report.equal, report.mismatches
