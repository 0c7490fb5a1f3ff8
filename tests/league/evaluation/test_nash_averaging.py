"""Nash averaging (league.evaluation.nash_averaging): maximum-entropy equilibria and copy invariance."""

from __future__ import annotations

import numpy as np
import pytest

from league.evaluation.headtohead import Game, HeadToHead
from league.evaluation.nash_averaging import max_entropy_nash, nash_average, nash_average_head_to_head

RPS = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])


def copies(a: np.ndarray, index: list[int]) -> np.ndarray:
    return a[np.ix_(index, index)]


def test_rock_paper_scissors_is_uniform_and_even():
    result = nash_average(RPS)
    assert result.mixture == pytest.approx([1 / 3] * 3, abs=1e-9)
    assert result.skill.tolist() == [0.0, 0.0, 0.0]


def test_copies_share_one_agents_mass_and_change_no_skill():
    game = np.zeros((4, 4))
    game[:3, :3] = RPS
    game[3, :3], game[:3, 3] = -0.5, 0.5  # everyone beats the fourth
    base = nash_average(game)
    index = [0, 0, 0, 1, 2, 3, 3]  # three rocks, two copies of the weak agent
    copied = nash_average(copies(game, index))
    assert copied.mixture[:3] == pytest.approx([1 / 9] * 3, abs=1e-7)
    assert copied.skill == pytest.approx(base.skill[index], abs=1e-9)
    assert [index[i] for i in copied.ranking[-2:]] == [3, 3]  # the weak copies rank last
    assert base.skill.tolist() == [0.0, 0.0, 0.0, -0.5]


def test_copies_flip_the_average_win_rate_but_not_the_nash_ranking():
    # A and B are even; A crushes C, B crushes D. Copies of C lift A's average.
    p = np.array([[0.5, 0.5, 0.9, 0.5], [0.5, 0.5, 0.6, 0.9], [0.1, 0.4, 0.5, 0.5], [0.5, 0.1, 0.5, 0.5]])
    logits = np.log(p) - np.log1p(-p)
    index = [0, 1, 2, 2, 2, 2, 3]
    average = p.mean(axis=1)
    average_copied = copies(p, index).mean(axis=1)
    assert average[1] > average[0] and average_copied[0] > average_copied[1]  # the flip
    base, copied = nash_average(logits), nash_average(copies(logits, index))
    assert copied.skill == pytest.approx(base.skill[index], abs=1e-7)
    assert base.skill[0] == pytest.approx(base.skill[1], abs=1e-9)  # both unbeaten by the mixture


def test_a_continuum_of_equilibria_gives_the_even_split():
    # Two identical dominant agents: every split between them is a Nash; maxent is 1/2-1/2.
    game = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [-1.0, -1.0, 0.0]])
    assert max_entropy_nash(game) == pytest.approx([0.5, 0.5, 0.0], abs=1e-7)


def test_random_games_satisfy_the_equilibrium_conditions():
    rng = np.random.default_rng(7)
    for n in (5, 12, 30):
        x = rng.normal(size=(n, n))
        result = nash_average(x - x.T)
        assert result.mixture.sum() == pytest.approx(1.0)
        assert result.skill.max() <= 1e-9  # nobody beats the mixture
        support = result.mixture > 1e-9
        assert np.abs(result.skill[support]).max() <= 1e-7  # the support is exactly even


def test_rejects_a_game_that_is_not_antisymmetric():
    with pytest.raises(ValueError, match="antisymmetric"):
        nash_average(np.array([[0.0, 1.0], [0.5, 0.0]]))


def test_head_to_head_uses_smoothed_log_odds():
    games = [Game("a", "b", 1.0)] * 9 + [Game("b", "a", 1.0)] + [Game("b", "c", 1.0)] * 8 + [Game("c", "a", 1.0)] * 7
    h2h = HeadToHead.from_games(games)
    result = nash_average_head_to_head(h2h)
    # a: 9 of 10 against b, so logit((9 + 0.5) / 11); a cycle a > b > c > a keeps everyone in.
    assert result.payoff[0, 1] == pytest.approx(np.log(9.5 / 1.5))
    assert (result.mixture > 0).all()
    assert result.skill.tolist() == [0.0, 0.0, 0.0]
