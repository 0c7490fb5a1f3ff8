"""Win-rate matrices and Nash mixtures of zero-sum meta-games (league.evaluation.payoff)."""

from __future__ import annotations

import numpy as np
import pytest

from league.evaluation.payoff import nash_mixture, solve_zero_sum, win_rates

RPS = [[0.5, 0.0, 1.0], [1.0, 0.5, 0.0], [0.0, 1.0, 0.5]]  # rock, paper, scissors


def test_rock_paper_scissors_is_uniform():
    mix = nash_mixture(RPS)
    assert mix == pytest.approx([1 / 3] * 3, abs=1e-9)
    assert mix.sum() == pytest.approx(1.0)


def test_dominant_agent_is_a_pure_nash():
    win_rate = [[0.5, 0.9, 0.7], [0.1, 0.5, 0.6], [0.3, 0.4, 0.5]]
    assert nash_mixture(win_rate).tolist() == [1.0, 0.0, 0.0]


def test_weighted_rock_paper_scissors_has_the_known_mixture():
    # Antisymmetric payoff [[0,-1,2],[1,0,-1],[-2,1,0]] / 4: Nash is (1/4, 1/2, 1/4).
    payoff = np.array([[0, -1, 2], [1, 0, -1], [-2, 1, 0]]) / 4
    mix = nash_mixture(0.5 + payoff)
    assert mix == pytest.approx([0.25, 0.5, 0.25], abs=1e-9)


def test_unplayed_pairs_count_as_even():
    nan = float("nan")
    # 0 beats 1 always; 2 never played anyone: 0 and 2 are both unexploitable.
    win_rate = [[nan, 1.0, nan], [0.0, nan, nan], [nan, nan, nan]]
    mix = nash_mixture(win_rate)
    assert mix[1] == 0.0
    assert mix.sum() == pytest.approx(1.0)
    payoff = np.nan_to_num(np.asarray(win_rate) - 0.5)
    assert (mix @ payoff >= -1e-9).all()  # no column exploits the mixture


def test_rectangular_game_value_and_both_strategies():
    payoff = [[3.0, -1.0], [-2.0, 1.0]]
    sol = solve_zero_sum(payoff)
    # Row plays row 0 with p: 3p - 2(1-p) = -p + (1-p) gives p = 3/7, value 1/7;
    # column plays column 0 with q: 4q - 1 = 1 - 3q gives q = 2/7.
    assert sol.row == pytest.approx([3 / 7, 4 / 7], abs=1e-9)
    assert sol.col == pytest.approx([2 / 7, 5 / 7], abs=1e-9)
    assert sol.value == pytest.approx(1 / 7, abs=1e-9)
    rect = solve_zero_sum([[1.0, 0.0, 2.0]])
    assert rect.row.tolist() == [1.0] and rect.col.tolist() == [0.0, 1.0, 0.0] and rect.value == 0


def test_win_rates_from_counts():
    wins = [[0, 3], [1, 0]]
    draws = [[0, 2], [2, 0]]
    losses = [[0, 1], [3, 0]]
    rates = win_rates(wins, draws, losses)
    assert np.isnan(rates[0, 0]) and np.isnan(rates[1, 1])
    assert rates[0, 1] == pytest.approx(4 / 6) and rates[1, 0] == pytest.approx(2 / 6)
    assert rates[0, 1] + rates[1, 0] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: nash_mixture([[0.5, 0.2]]), "square"),
        (lambda: nash_mixture([[0.5, 1.5], [-0.5, 0.5]]), r"\[0, 1\]"),
        (lambda: solve_zero_sum([[np.inf]]), "finite"),
        (lambda: solve_zero_sum(np.zeros((0, 2))), "non-empty"),
        (lambda: win_rates([[1]], [[1, 2]], [[1]]), "shape"),
        (lambda: win_rates([[-1]], [[0]], [[0]]), "non-negative"),
    ],
)
def test_bad_input_is_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
