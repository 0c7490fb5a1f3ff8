"""Ratings: bulk upserts in place, the leaderboard order, events, clearing for rebuild."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from arena.storage.db import repositories as repo
from arena.storage.db.models import AgentRating
from tests.storage.db.builders import ENV, match, setup_env


def _rating(agent_id: int, mu: float, sigma: float, *, role="player", env_id=ENV, games=1, seq=None):
    return {
        "agent_id": agent_id, "role": role, "env_id": env_id, "mu": mu, "sigma": sigma,
        "games": games, "wins": games, "draws": 0, "losses": 0, "last_match_seq": seq,
    }


def test_upsert_inserts_then_updates_in_place(db_session):
    ids = setup_env(db_session)
    repo.upsert_ratings(db_session, [_rating(ids["a"], 25.0, 8.0), _rating(ids["b"], 20.0, 5.0)])
    db_session.commit()

    written = repo.upsert_ratings(
        db_session, [{**_rating(ids["a"], 30.0, 2.0, games=7, seq=41), "losses": 2}]
    )
    db_session.commit()

    rows = db_session.execute(select(func.count()).select_from(AgentRating)).scalar_one()
    loaded = repo.load_ratings(db_session, [ids["a"], ids["b"]])
    a = loaded[(ids["a"], "player")]
    assert written == 1 and rows == 2
    assert (a.mu, a.sigma, a.conservative) == (30.0, 2.0, 24.0)
    assert (a.games, a.wins, a.losses, a.last_match_seq) == (7, 7, 2, 41)
    assert loaded[(ids["b"], "player")].conservative == pytest.approx(5.0)


def test_a_key_repeated_in_one_batch_keeps_the_last_row(db_session):
    ids = setup_env(db_session)
    written = repo.upsert_ratings(
        db_session, [_rating(ids["a"], 1.0, 1.0), _rating(ids["a"], 2.0, 1.0)]
    )
    assert written == 1
    assert repo.load_ratings(db_session, [ids["a"]])[(ids["a"], "player")].mu == 2.0


def test_load_ratings_by_role(db_session):
    ids = setup_env(db_session, env_id="simple_tag-v3", keys=("x", "y"))
    repo.upsert_ratings(db_session, [
        _rating(ids["x"], 30.0, 1.0, role="predator", env_id="simple_tag-v3"),
        _rating(ids["x"], 10.0, 1.0, role="prey", env_id="simple_tag-v3"),
        _rating(ids["y"], 20.0, 1.0, role="prey", env_id="simple_tag-v3"),
    ])

    every = repo.load_ratings(db_session, [ids["x"], ids["y"]])
    prey = repo.load_ratings(db_session, [ids["x"], ids["y"]], role="prey")

    assert set(every) == {(ids["x"], "predator"), (ids["x"], "prey"), (ids["y"], "prey")}
    assert {k: v.mu for k, v in prey.items()} == {(ids["x"], "prey"): 10.0, (ids["y"], "prey"): 20.0}


def test_leaderboard_orders_by_conservative_rating_with_stable_ties(db_session):
    keys = ("low", "top", "tie1", "tie2", "unsure")
    ids = setup_env(db_session, keys=keys)
    setup_env(db_session, env_id="tictactoe-v3", keys=("elsewhere",))
    other = repo.get_or_create_agents(db_session, "tictactoe-v3", ["elsewhere"], "builtin")
    repo.upsert_ratings(db_session, [
        _rating(ids["low"], 10.0, 1.0),      # 7
        _rating(ids["top"], 40.0, 1.0),      # 37
        _rating(ids["tie2"], 25.0, 2.0),     # 19
        _rating(ids["tie1"], 22.0, 1.0),     # 19
        _rating(ids["unsure"], 45.0, 8.0),   # 21: high mu, but uncertain
        _rating(other["elsewhere"], 99.0, 1.0, env_id="tictactoe-v3"),
        _rating(ids["low"], 50.0, 1.0, role="other"),
    ])

    board = repo.board_rows(db_session, ENV, "player")

    assert [e.key for e in board] == ["top", "unsure", "tie1", "tie2", "low"]
    assert board[1].rating.conservative == pytest.approx(21.0) and board[1].kind == "builtin"
    assert sorted(board, key=repo.board_order) == board
    assert repo.count_ratings(db_session, ENV, "player") == 5


def test_leaderboard_leaves_off_agents_in_excluded_statuses(db_session):
    ids = setup_env(db_session)
    repo.upsert_ratings(db_session, [_rating(ids["a"], 30.0, 1.0), _rating(ids["b"], 20.0, 1.0)])
    repo.set_agent_status(db_session, ids["a"], "retired")

    board = repo.board_rows(db_session, ENV, "player", exclude_statuses={"retired", "rejected"})

    assert [e.key for e in board] == ["b"]


def test_rating_events_and_clearing_an_env_for_a_rebuild(db_session):
    ids = setup_env(db_session)
    other = setup_env(db_session, env_id="tictactoe-v3", keys=("a",))
    rows = [match(), match()]
    seqs = list(repo.insert_matches(db_session, rows).values())
    (other_seq,) = repo.insert_matches(db_session, [match(env_id="tictactoe-v3")]).values()
    events = [
        {"match_seq": seq, "agent_id": ids["a"], "role": "player", "mu_before": 25.0 + i,
         "sigma_before": 8.0, "mu_after": 26.0 + i, "sigma_after": 7.5}
        for i, seq in enumerate(seqs)
    ]
    assert repo.insert_rating_events(db_session, events) == 2
    repo.insert_rating_events(db_session, [{**events[0], "match_seq": other_seq,
                                            "agent_id": other["a"]}])
    repo.upsert_ratings(db_session, [_rating(ids["a"], 27.0, 7.5),
                                     _rating(other["a"], 27.0, 7.5, env_id="tictactoe-v3")])

    history = repo.rating_history(db_session, ids["a"])
    assert [(h["match_seq"], h["mu_after"]) for h in history] == [(seqs[0], 26.0), (seqs[1], 27.0)]

    assert repo.clear_ratings(db_session, ENV) == 1
    assert repo.load_ratings(db_session, [ids["a"]]) == {}
    assert repo.rating_history(db_session, ids["a"]) == []
    assert len(repo.rating_history(db_session, other["a"])) == 1
    assert set(repo.load_ratings(db_session, [other["a"]])) == {(other["a"], "player")}
