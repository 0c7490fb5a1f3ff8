"""A league's strategy timeline on a real database: recorded matches in, per-generation rows out."""

from __future__ import annotations

from arena.ladder.recorder import record_unrated
from arena.ladder.registration import register_builtin_agents
from arena.read.grid_frames import match_phases
from arena.storage.db import make_engine, session_factory
from arena.storage.db import repositories as repo
from arena.training.phases import (
    fill_ratings,
    match_generation,
    publish_timeline,
    refresh_timeline,
    scan_recorded_matches,
)
from arena.training.state import LeagueState, SnapshotEntry
from envs.registry import get_spec
from tests.web.seed import HS, play_hide_and_seek


def snapshot(key: str, role: str, generation: int) -> SnapshotEntry:
    return SnapshotEntry(sha256=key * 8, key=key, name=f"{key}-g{generation}", role=role, learner=role,
                         generation=generation, updates=0, env_steps=0, reason="test")


def test_recorded_matches_become_generation_rows_with_first_matches(migrated_db_url):
    sessions = session_factory(make_engine(migrated_db_url))
    records = play_hide_and_seek(3, seed=3)  # the first: seekers see a hider all the time
    with sessions.begin() as session:
        ids = register_builtin_agents(session, HS, ["random"])
        league_id = repo.create_league(session, "hs", HS, {})
    record_unrated(sessions, get_spec(HS), records[:2], ids)
    # "random" stands for a generation-2 hider snapshot, as a snapshot's agent key would.
    state = LeagueState("hs", HS, {}, [], [], snapshots=[snapshot("random", "hider", 2)], league_id=league_id,
                        ratings={"random-g2": [26.0, 2.0]})
    assert match_generation(state, ["x", "random"]) == 2 and match_generation(state, ["x"]) is None

    assert refresh_timeline(sessions, state) == 2
    with sessions() as session:
        rows = {r.generation: r for r in repo.league_generations(session, league_id)}
    assert list(rows) == [2]
    expected = [match_phases(r) for r in records[:2]]
    assert rows[2].episodes == 2
    assert rows[2].phase_rates["chasing"] == (expected[0]["chasing"] + expected[1]["chasing"]) / 2
    assert rows[2].ratings == {"hider": [26.0, 2.0]}
    assert expected[0]["chasing"] >= 0.5 > expected[1]["chasing"]
    assert rows[2].first_matches == {"chasing": records[0].match_id}  # fort never happened

    # A second scan only reads what was recorded since; the third match counts once.
    record_unrated(sessions, get_spec(HS), records[2:], ids)
    assert scan_recorded_matches(sessions, state) == 1 and scan_recorded_matches(sessions, state) == 0
    assert state.phases.record(2).episodes == 3

    # The timeline is rewritten as a whole: generations gone from the state leave the table.
    state.phases.generations.pop(2)
    state.phases.firsts.clear()
    state.phases.add_rates(5, {"fort": 0.25}, episodes=4)
    fill_ratings(state)  # generation 2's rating comes back with its snapshot
    assert publish_timeline(sessions, state.league_id, state.phases) == 2
    with sessions() as session:
        got = [(r.generation, r.episodes, r.phase_rates) for r in repo.league_generations(session, league_id)]
    assert got == [(2, 0, {}), (5, 4, {"fort": 0.25})]
    sessions.dispose()


def test_board_game_leagues_get_ratings_without_replays(migrated_db_url):
    sessions = session_factory(make_engine(migrated_db_url))
    with sessions.begin() as session:
        register_builtin_agents(session, "tictactoe-v3", ["random"])
        league_id = repo.create_league(session, "ttt", "tictactoe-v3", {})
    state = LeagueState("ttt", "tictactoe-v3", {}, [], [], snapshots=[snapshot("a", "main", 1)],
                        league_id=league_id, ratings={"a-g1": [30.0, 1.5]})
    assert refresh_timeline(sessions, state) == 0
    with sessions() as session:
        [row] = repo.league_generations(session, league_id)
    role = get_spec("tictactoe-v3").roles[0]
    assert (row.generation, row.ratings, row.phase_rates) == (1, {role: [30.0, 1.5]}, {})
    sessions.dispose()
