"""Leaderboard caching and ranking: fresh after every change, ranks over the whole board."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from arena.api import create_app
from arena.read.boards import BoardCache, VersionedCache, read_board, refresh_board
from arena.storage.db import repositories as repo
from tests.api.helpers import API, ENV, seed_ladder

KEYS = ["heuristic", "heuristic:epsilon=0.3", "heuristic:epsilon=0.7", "random"]


def board(client, **params):
    response = client.get(f"{API}/leaderboard", params={"env": ENV, **params})
    assert response.status_code == 200, response.text
    return response.json()


def test_board_follows_matches_and_status_changes_made_elsewhere(client, services):
    ids = seed_ladder(services, KEYS, 40)
    first = board(client)
    assert sum(r["games"] for r in first["data"]) == 80
    boards = client.app.state.api.boards
    stamp = boards.recent(ENV, "player", 60).stamp
    assert board(client) == first and boards.recent(ENV, "player", 60).stamp == stamp  # the cached board, not reread
    seed_ladder(services, KEYS, 40, seed=2)  # another writer: the scheduler, the CLI
    second = board(client)
    assert sum(r["games"] for r in second["data"]) == 160
    with services.sessions.begin() as session:
        repo.set_agent_status(session, ids["random"], "retired", "by the operator")
    third = board(client)
    assert third["count"] == 3 and ids["random"] not in [r["agent_id"] for r in third["data"]]
    payoff = client.get(f"{API}/envs/{ENV}/payoff", params={"top": 4}).json()
    assert len(payoff["agents"]) == 3  # retired agents are off the payoff matrix too


def full_board(services, version=None):
    with services.sessions() as session:
        return read_board(session, ENV, "player", version)


def test_incremental_refresh_equals_a_full_reload(client, services):
    ids = seed_ladder(services, KEYS, 40)
    with services.sessions() as session:
        old = full_board(services, repo.board_version(session, ENV))
    seed_ladder(services, KEYS[:2], 30, seed=5)  # two agents move
    with services.sessions.begin() as session:
        repo.set_agent_status(session, ids["random"], "retired")  # one leaves
    ids.update(seed_ladder(services, ["heuristic:epsilon=0.9", "heuristic"], 20, seed=6))  # one arrives
    with services.sessions() as session:
        version = repo.board_version(session, ENV)
        changed = {r.agent_id for r in repo.board_changes(session, ENV, "player", *old.version)}
        refreshed = refresh_board(session, old, ENV, "player", version)
    assert changed == {ids[k] for k in (*KEYS[:2], "random", "heuristic:epsilon=0.9")}
    assert refreshed == full_board(services, version)
    assert len(refreshed.rows) == 4 and ids["random"] not in [r.agent_id for r in refreshed.rows]
    # Through the API: a board cached before the changes now equals a cold one.
    cold = TestClient(create_app(services)).get(f"{API}/leaderboard", params={"env": ENV})
    assert board(client) == cold.json()


def test_board_cache_reloads_after_max_age(services):
    seed_ladder(services, KEYS[:2], 10)
    cache = BoardCache(max_age_s=0)
    with services.sessions() as session:
        first = cache.get(session, ENV, "player")
        assert cache.get(session, ENV, "player") is not first  # reloaded every time
    keep = BoardCache(max_age_s=60)
    with services.sessions() as session:
        first = keep.get(session, ENV, "player")
        assert keep.get(session, ENV, "player") is first


def test_rank_ranges_come_from_the_whole_board(client, services):
    seed_ladder(services, KEYS, 60)
    whole = board(client)["data"]
    for offset in range(len(KEYS)):
        page = board(client, limit=1, offset=offset)
        assert page["count"] == len(KEYS)
        assert page["data"] == [whole[offset]]
    assert board(client, offset=10)["data"] == []


def test_empty_board_and_payoff(client):
    assert board(client) == {"env": ENV, "role": "player", "count": 0, "data": []}
    empty = client.get(f"{API}/envs/{ENV}/payoff").json()
    assert empty == {"env": ENV, "role": "player", "agents": [], "win_rate": [], "games": [],
                     "nash": [], "rankings": [], "cycles": [], "alpharank_alpha": 100.0, "cycle_alpha": 0.05}


class Builds:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> int:
        self.count += 1
        return self.count


def test_versioned_cache_rebuilds_on_a_new_version_only():
    cache, build = VersionedCache(max_age_s=60), Builds()
    assert cache.get("k", 1, build) == 1
    assert cache.get("k", 1, build) == 1
    assert cache.get("k", 2, build) == 2
    assert cache.get("other", 2, build) == 3


def test_versioned_cache_ages():
    stale, build = VersionedCache(max_age_s=0), Builds()
    assert [stale.get("k", 1, build) for _ in range(3)] == [1, 2, 3]
    sticky, build = VersionedCache(max_age_s=60, min_age_s=60), Builds()
    assert [sticky.get("k", v, build) for v in (1, 2, 3)] == [1, 1, 1]


def test_versioned_cache_keeps_the_most_recently_used():
    cache, build = VersionedCache(max_age_s=60, max_entries=2), Builds()
    cache.get("a", 0, build)
    cache.get("b", 0, build)
    cache.get("a", 0, build)  # a is now the most recent
    cache.get("c", 0, build)  # evicts b
    assert cache.get("a", 0, build) == 1
    assert cache.get("b", 0, build) == 4


@pytest.mark.parametrize("limit", [1, 3])
def test_history_limit_keeps_the_latest_points(client, services, limit):
    ids = seed_ladder(services, KEYS[:2], 10)
    points = client.get(f"{API}/agents/{ids['heuristic']}/history", params={"limit": limit}).json()
    everything = client.get(f"{API}/agents/{ids['heuristic']}/history").json()
    assert len(everything["data"]) == 10
    assert points["data"] == everything["data"][-limit:]


def test_leaderboard_pages_are_reused_within_the_cache_window(migrated_db_url, redis_url, tmp_path):
    """With a page cache, a burst of readers shares one page; it refreshes after the window.

    The cache runs on a clock the test moves, so a slow machine cannot outlast the window.
    """
    from fastapi.testclient import TestClient

    from arena.api.app import create_app
    from arena.core.settings import Settings
    from arena.ladder.dispatch import LadderConfig, open_ladder
    from arena.runners import AgentSource, InProcessRunner
    from arena.storage.wiring import open_services

    now = [0.0]
    settings = Settings(page_cache_s=0.3, data_dir=tmp_path, database_url=migrated_db_url, redis_url=redis_url)
    with open_services(settings) as services:
        ladder = open_ladder(services.sessions, LadderConfig("tictactoe-v3", batch_size=100))
        ladder.add_agents([AgentSource(key=k, builtin=k) for k in ("heuristic", "random")])
        ladder.run(InProcessRunner(), 100)
        app = create_app(services)
        app.state.api.boards.clock = lambda: now[0]
        with TestClient(app) as client:
            first = client.get("/api/v1/leaderboard", params={"env": "tictactoe-v3"}).json()
            ladder.run(InProcessRunner(), 100)
            now[0] += 0.29
            cached = client.get("/api/v1/leaderboard", params={"env": "tictactoe-v3"}).json()
            now[0] += 0.02
            fresh = client.get("/api/v1/leaderboard", params={"env": "tictactoe-v3"}).json()
    games = lambda page: sum(r["games"] for r in page["data"])
    assert games(first) == games(cached) == 200
    assert games(fresh) == 400
