"""A league's strategy timeline rows: the mains' phases and ratings, the exploiters' entries apart."""

from __future__ import annotations

from arena.storage.db import repositories as repo
from tests.storage.db.builders import setup_env

HIDER_X0 = {"role": "hider", "index": 0, "score": 0.625, "edge": 0.25, "snapshot": "x0", "reset": False}
SEEKER_X0 = {"role": "seeker", "index": 0, "score": 0.5, "edge": -0.0625, "snapshot": None, "reset": True}


def _row(generation: int, **extra) -> dict:
    return {"generation": generation, "episodes": 16, "phase_rates": {"fort": 0.5},
            "ratings": {"hider": [25.0, 8.0]}, "first_matches": {}, **extra}


def test_exploiters_round_trip_and_are_rewritten_with_the_timeline(db_session):
    setup_env(db_session, "hide_and_seek-v1")
    league_id = repo.create_league(db_session, "hs", "hide_and_seek-v1", {})
    other = repo.create_league(db_session, "plain", "hide_and_seek-v1", {})
    assert repo.replace_generations(db_session, league_id, [_row(0, exploiters=[HIDER_X0, SEEKER_X0]),
                                                             _row(1, exploiters=[])]) == 2
    repo.replace_generations(db_session, other, [_row(0)])  # a writer without exploiters: none
    db_session.commit()

    rows = repo.league_generations(db_session, league_id)
    assert [(r.generation, r.exploiters) for r in rows] == [(0, [HIDER_X0, SEEKER_X0]), (1, [])]
    assert rows[0].phase_rates == {"fort": 0.5} and rows[0].ratings == {"hider": [25.0, 8.0]}
    assert [r.exploiters for r in repo.league_generations(db_session, other)] == [[]]

    # rewritten as a whole: the upsert replaces a generation's exploiters too
    frozen = {**SEEKER_X0, "snapshot": "x1", "reset": False}
    repo.replace_generations(db_session, league_id, [_row(0, exploiters=[frozen]), _row(1, exploiters=[HIDER_X0])])
    db_session.commit()
    assert [(r.generation, r.exploiters) for r in repo.league_generations(db_session, league_id)] == [
        (0, [frozen]), (1, [HIDER_X0])]
