"""Three rankings of one board (league.evaluation.board_rankings): a real ladder and a planted cycle."""

from __future__ import annotations

import numpy as np

from agents.catalog import make_policy
from league.evaluation.board_rankings import board_rankings
from league.evaluation.headtohead import Game, HeadToHead
from league.evaluation.rating_dependence import rated_matches
from tests.league.evaluation.played_boards import round_robin


def test_a_ladder_of_heuristics_ranks_the_same_three_ways():
    env = "connect_four-v3"
    strength = ["heuristic", "heuristic:epsilon=0.25", "heuristic:epsilon=0.5", "heuristic:epsilon=0.75", "random"]
    games = round_robin(env, {n: make_policy(n, env) for n in strength}, games_per_pair=60, seed=3)
    _, ratings = rated_matches(games)
    board = board_rankings(HeadToHead.from_games(games), ratings)
    ranks = {r.agent: r for r in board.agents}
    assert [ranks[a].trueskill_rank for a in strength] == [1, 2, 3, 4, 5]
    assert [ranks[a].alpharank_rank for a in strength] == [1, 2, 3, 4, 5]
    nash = [ranks[a].nash_rank for a in strength]
    assert nash[0] == 1 and nash[1] == 2 and nash == sorted(nash)  # the heuristic alone is unbeaten
    assert ranks["heuristic"].nash_mass == 1.0 and ranks["heuristic"].alpharank_mass > 0.99
    assert board.cycles == []


def test_a_planted_cycle_shares_the_top_of_alpha_rank_and_nash():
    rng = np.random.default_rng(0)
    beats = {("rock", "scissors"): 0.75, ("scissors", "paper"): 0.75, ("paper", "rock"): 0.75}
    for hand in ("rock", "paper", "scissors"):
        beats[(hand, "weak")] = 0.8
    games = []
    for (a, b), p in beats.items():
        wins = rng.binomial(100, p)
        games += [Game(a, b, 1.0)] * wins + [Game(a, b, 0.0)] * (100 - wins)
    order = rng.permutation(len(games))
    _, ratings = rated_matches([games[i] for i in order])
    board = board_rankings(HeadToHead.from_games(games), ratings)
    ranks = {r.agent: r for r in board.agents}
    hands = ("rock", "paper", "scissors")
    assert all(ranks[h].nash_rank == 1 and ranks[h].nash_skill == 0.0 for h in hands)
    assert all(0.2 < ranks[h].alpharank_mass < 0.45 for h in hands)
    assert ranks["weak"].trueskill_rank == ranks["weak"].alpharank_rank == ranks["weak"].nash_rank == 4
    assert len(board.cycles) == 1 and set(board.cycles[0].agents) == set(hands)
