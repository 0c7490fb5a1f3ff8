"""Intransitive cycles (league.evaluation.cycles): planted rock-paper-scissors agents against a real ladder."""

from __future__ import annotations

import numpy as np
import pytest

from agents.catalog import make_policy
from league.evaluation.cycles import intransitive_cycles
from league.evaluation.headtohead import Game, HeadToHead
from tests.league.evaluation.played_boards import round_robin


def sampled_board(win_prob: np.ndarray, games: int, seed: int) -> HeadToHead:
    """Counts drawn from a planted win-probability matrix (no draws)."""
    rng = np.random.default_rng(seed)
    n = len(win_prob)
    wins = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            wins[i, j] = rng.binomial(games, win_prob[i, j])
            wins[j, i] = games - wins[i, j]
    return HeadToHead(tuple(f"agent{i}" for i in range(n)), wins, np.zeros((n, n)), wins.T.copy())


def planted_rps(edge: float) -> np.ndarray:
    """Agents 0 > 1 > 2 > 0 by ``edge``; agents 3, 4 a transitive tail everyone beats."""
    p = np.full((5, 5), 0.5)
    for a, b in ((0, 1), (1, 2), (2, 0)):
        p[a, b], p[b, a] = edge, 1 - edge
    for weak in (3, 4):
        p[:weak, weak], p[weak, :weak] = 0.8, 0.2
    return p


def test_finds_the_planted_cycle_in_its_order():
    cycles = intransitive_cycles(sampled_board(planted_rps(0.75), games=100, seed=0))
    assert len(cycles) == 1
    cycle = cycles[0]
    assert cycle.agents == ("agent0", "agent1", "agent2")
    assert cycle.confidence > 0.999
    assert [(e.winner, e.loser) for e in cycle.edges] == [("agent0", "agent1"), ("agent1", "agent2"),
                                                          ("agent2", "agent0")]
    assert all(e.wins > e.losses and e.p_value < 1e-4 for e in cycle.edges)
    assert cycle.p_value == pytest.approx(2 * max(e.p_value for e in cycle.edges))


def test_a_weak_cycle_with_few_games_is_not_significant():
    assert intransitive_cycles(sampled_board(planted_rps(0.6), games=20, seed=1)) == []


def test_benjamini_hochberg_is_no_stricter_than_holm():
    board = sampled_board(planted_rps(0.65), games=60, seed=2)
    holm = intransitive_cycles(board, alpha=0.2)
    bh = intransitive_cycles(board, alpha=0.2, correction="bh")
    assert len(bh) >= len(holm)
    for h, b in zip(holm, bh):
        assert b.adjusted_p <= h.adjusted_p + 1e-15


def test_pairs_below_min_games_are_not_tested():
    board = sampled_board(planted_rps(0.9), games=8, seed=3)
    assert intransitive_cycles(board, min_games=10) == []
    assert len(intransitive_cycles(board, min_games=5, alpha=0.5)) == 1


def test_a_real_ladder_of_heuristics_has_no_cycle():
    env = "connect_four-v3"
    names = ["random", "heuristic:epsilon=0.75", "heuristic:epsilon=0.5", "heuristic:epsilon=0.25", "heuristic"]
    games = round_robin(env, {n: make_policy(n, env) for n in names}, games_per_pair=60, seed=5)
    h2h = HeadToHead.from_games(games)
    assert intransitive_cycles(h2h, alpha=0.5) == []
    # ...while reversing one link of that ladder (the weakest beats the strongest) makes cycles.
    i, j = h2h.agents.index("heuristic"), h2h.agents.index("random")
    flipped = HeadToHead(h2h.agents, h2h.wins.copy(), h2h.draws, h2h.losses.copy())
    flipped.wins[i, j], flipped.losses[i, j] = h2h.losses[i, j], h2h.wins[i, j]
    flipped.wins[j, i], flipped.losses[j, i] = h2h.wins[i, j], h2h.losses[i, j]
    found = intransitive_cycles(flipped)
    assert found and all({"heuristic", "random"} <= set(c.agents) for c in found)


def test_draws_do_not_count_as_direction():
    games = [Game("a", "b", 0.5)] * 100 + [Game("a", "b", 1.0)] * 3
    h2h = HeadToHead.from_games(games + [Game("b", "c", 1.0)] * 30 + [Game("c", "a", 1.0)] * 30)
    assert intransitive_cycles(h2h) == []  # 3-0 in decisive games is no significant edge
