"""Head-to-head counts (league.evaluation.headtohead) and the shared statistics (league.evaluation.significance)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtri
from scipy.stats import binomtest

from league.evaluation.headtohead import Game, HeadToHead
from league.evaluation.significance import benjamini_hochberg, holm, sign_test, wilson_interval


def test_games_fold_into_mirrored_counts():
    games = [Game("a", "b", 1.0), Game("b", "a", 1.0), Game("a", "b", 0.5), Game("c", "a", 0.0)]
    h2h = HeadToHead.from_games(games)
    assert h2h.agents == ("a", "b", "c")
    assert h2h.wins.tolist() == [[0, 1, 1], [1, 0, 0], [0, 0, 0]]
    assert h2h.draws[0, 1] == h2h.draws[1, 0] == 1
    assert (h2h.losses == h2h.wins.T).all()
    assert h2h.games[0, 1] == 3
    assert h2h.win_rate()[0, 1] == pytest.approx(0.5)
    assert np.isnan(h2h.win_rate()[1, 2])


def test_a_given_agent_list_fixes_the_order_and_drops_outsiders():
    h2h = HeadToHead.from_games([Game("a", "b", 1.0), Game("a", "z", 1.0)], agents=["b", "a"])
    assert h2h.agents == ("b", "a") and h2h.wins.tolist() == [[0, 0], [1, 0]]


def test_smoothed_log_odds_are_finite_and_antisymmetric():
    h2h = HeadToHead.from_games([Game("a", "b", 1.0)] * 5)
    logits = h2h.logits()
    assert logits[0, 1] == pytest.approx(np.log(5.5 / 0.5)) == -logits[1, 0]
    assert h2h.smoothed_win_rate()[0, 0] == 0.5


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        HeadToHead(("a", "a"), np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="2x2"):
        HeadToHead(("a", "b"), np.zeros((3, 3)), np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="itself"):
        Game("a", "a", 1.0)


@pytest.mark.parametrize("wins,games", [(0, 10), (7, 10), (10, 10), (480, 1000)])
def test_wilson_matches_scipy_on_integer_counts(wins, games):
    ref = binomtest(wins, games).proportion_ci(method="wilson")
    exact_z = float(ndtri(0.975))  # Arena's intervals use 1.96; scipy the exact quantile
    assert wilson_interval(wins, games, z=exact_z) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_sign_test_is_the_exact_binomial_tail():
    assert sign_test(10, 0) == pytest.approx(0.5**10)
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 5) == pytest.approx(binomtest(5, 10, alternative="greater").pvalue)


def test_holm_and_benjamini_hochberg_known_values():
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert holm([]).size == 0 and holm([0.9, 0.8]).max() == 1.0
