"""Integrity flags and cycles from the service's match log: the planted pair is flagged, honest boards
are not; a planted rock-paper-scissors is reported with its confidence."""

from __future__ import annotations

import pytest

from arena.read.boards import payoff_matrix, read_board
from arena.read.evaluation import integrity_data
from arena.storage.db import make_engine, session_factory, upgrade
from tests.evaluation.planted import C4, OWNER, TTT, plant_board, plant_cycle


@pytest.fixture
def sessions(tmp_path):
    url = f"sqlite:///{tmp_path / 'arena.sqlite3'}"
    upgrade(url)
    factory = session_factory(make_engine(url))
    yield factory
    factory.dispose()


def test_the_planted_pair_is_the_only_flagged_pair(sessions):
    ids = plant_board(sessions)
    with sessions() as session:
        report = integrity_data(session, C4)
    assert report["matches"] == 20 * 40 + 80
    [pair] = report["pairs"]
    assert pair["beneficiary"]["agent_id"] == ids["partner"] and pair["thrower"]["agent_id"] == ids["thrower"]
    assert pair["same_owner"] and pair["beneficiary"]["owner"] == OWNER and pair["family"] == "same_owner"
    assert pair["adjusted_p"] < 1e-6 and pair["observed_win_share"] > pair["expected_win_share"] + 0.3
    assert pair["wins"] + pair["draws"] + pair["losses"] == 80
    flagged = {(f["agent"]["agent_id"], f["opponent"]["agent_id"]) for f in report["dependence"]}
    assert flagged and flagged <= {(ids["partner"], ids["thrower"]), (ids["thrower"], ids["partner"])}


def test_an_honest_board_raises_no_flag(sessions):
    plant_board(sessions, planted=False)
    with sessions() as session:
        report = integrity_data(session, C4)
    assert report["matches"] == 20 * 40 + 80
    assert report["pairs"] == [] and report["dependence"] == []


def test_a_planted_cycle_is_reported_with_its_confidence(sessions):
    ids = plant_cycle(sessions)
    with sessions() as session:
        board = read_board(session, TTT, "player")
        payoff = payoff_matrix(session, board, 8)
    [cycle] = payoff["cycles"]
    wins = {(link["winner"], link["loser"]) for link in cycle["links"]}
    assert wins == {(ids[a], ids[b]) for a, b in (("paper", "rock"), ("scissors", "paper"), ("rock", "scissors"))}
    assert cycle["confidence"] > 0.99 and cycle["confidence"] == pytest.approx(1 - cycle["adjusted_p"])
    # A perfect cycle: alpha-Rank spreads the mass over the three, the Nash core holds all three.
    ranks = {r["agent_id"]: r for r in payoff["rankings"]}
    assert all(r["nash_rank"] == 1 for r in ranks.values())
    assert all(r["alpharank_mass"] > 0.2 for r in ranks.values())
