"""Seat advantage (league.evaluation.seats) on games played through the real engine."""

from __future__ import annotations

import math

import pytest

from agents.catalog import make_policy
from league.evaluation.headtohead import Game
from league.evaluation.seats import SeatRecord, agent_seats, env_seat_advantage
from tests.league.evaluation.played_boards import Alias, play_pairs


def test_connect_four_heuristics_favour_the_first_mover():
    # heuristic:epsilon=0.5 mirror: the first mover scores ~0.55 (0.519 for epsilon 0,
    # too close to even for 2000 games to tell).
    env = "connect_four-v3"
    name = "heuristic:epsilon=0.5"
    policies = {"h1": Alias("h1", make_policy(name, env)), "h2": Alias("h2", make_policy(name, env))}
    games = play_pairs(env, policies, [("h1", "h2")], games_per_pair=2000, seed=0)
    edge = env_seat_advantage(games)
    assert edge.first.games == 2000
    assert edge.ci_low > 0.5  # moving first is worth something, beyond doubt
    assert edge.value == pytest.approx(2 * edge.score - 1)
    assert edge.elo == pytest.approx(400 * math.log10(edge.score / (1 - edge.score)))
    assert edge.trueskill_mu > 0
    seats = agent_seats(games)
    for name in ("h1", "h2"):  # the same policy in both accounts: each gains from seat 0
        assert seats[name].imbalance == 0
        assert seats[name].difference_ci[0] > 0


def test_tictactoe_random_agents_show_the_known_first_mover_edge():
    # Random play in tic-tac-toe: the first mover wins ~58.5%, the second ~28.8%, draws ~12.7%.
    env = "tictactoe-v3"
    policies = {"r1": Alias("r1", make_policy("random", env)), "r2": Alias("r2", make_policy("random", env))}
    games = play_pairs(env, policies, [("r1", "r2")], games_per_pair=4000, seed=1)
    edge = env_seat_advantage(games)
    expected_score = 0.585 + 0.127 / 2
    assert edge.ci_low < expected_score < edge.ci_high
    assert edge.first.draws / edge.first.games == pytest.approx(0.127, abs=0.02)


def test_per_agent_records_by_seat():
    games = [Game("a", "b", 1.0), Game("a", "b", 0.5), Game("b", "a", 1.0), Game("c", "a", 0.0)]
    seats = agent_seats(games)
    assert seats["a"].first == SeatRecord(1, 1, 0)
    assert seats["a"].second == SeatRecord(1, 0, 1)  # won against c, lost against b
    assert seats["a"].difference == pytest.approx(0.75 - 0.5)
    assert seats["b"].imbalance == -1 and seats["c"].imbalance == 1
    assert seats["c"].difference is None and seats["c"].difference_ci is None


def test_no_games_gives_the_uninformative_interval():
    edge = env_seat_advantage([])
    assert (edge.score, edge.ci_low, edge.ci_high, edge.elo) == (None, 0.0, 1.0, None)


def test_from_seat_maps_a_second_mover_result():
    assert Game.from_seat("x", "y", 1, 1.0) == Game("y", "x", 0.0)
    assert Game.from_seat("x", "y", 0, 0.5) == Game("x", "y", 0.5)
    with pytest.raises(ValueError):
        Game("x", "y", 0.7)
