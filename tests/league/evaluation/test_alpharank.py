"""alpha-Rank (league.evaluation.alpharank): known games, OpenSpiel's implementation, the large-alpha limit."""

from __future__ import annotations

import numpy as np
import pytest

from league.evaluation.alpharank import alpharank, alpharank_two_populations, log_fixation_probability

RPS = np.array([[0.5, 0.0, 1.0], [1.0, 0.5, 0.0], [0.0, 1.0, 0.5]])  # rock, paper, scissors
TRANSITIVE = np.array([[0.5, 0.6, 0.7, 0.9], [0.4, 0.5, 0.6, 0.8], [0.3, 0.4, 0.5, 0.7], [0.1, 0.2, 0.3, 0.5]])


def random_win_rates(n: int, rng: np.random.Generator) -> np.ndarray:
    upper = np.triu(rng.uniform(size=(n, n)), 1)
    w = upper + np.tril(1.0 - upper.T, -1)
    np.fill_diagonal(w, 0.5)
    return w


@pytest.mark.parametrize("alpha", [0.1, 10.0, 1e6])
def test_rock_paper_scissors_is_uniform(alpha):
    assert alpharank(RPS, alpha=alpha).mass == pytest.approx([1 / 3] * 3, abs=1e-12)


def test_transitive_game_puts_the_mass_on_the_dominant_agent():
    result = alpharank(TRANSITIVE, alpha=100.0)
    assert result.ranking.tolist() == [0, 1, 2, 3]
    assert result.mass[0] > 1 - 1e-12
    # Mass underflows for the others, but their order is still known from the log mass.
    assert np.all(np.diff(result.log_mass) < 0)


def test_rock_paper_scissors_beats_a_dominated_fourth_agent():
    game = np.full((4, 4), 0.5)
    game[:3, :3] = RPS
    game[3, :3], game[:3, 3] = 0.3, 0.7  # everyone beats the fourth
    result = alpharank(game, alpha=50.0)
    assert result.mass[:3] == pytest.approx([1 / 3] * 3, abs=1e-9)
    assert result.ranking[-1] == 3


def test_unplayed_pairs_count_as_even():
    nan = np.nan
    with_gaps = np.array([[0.5, 0.8, nan], [0.2, 0.5, 0.6], [nan, 0.4, 0.5]])
    filled = np.where(np.isnan(with_gaps), 0.5, with_gaps)
    assert alpharank(with_gaps, alpha=5.0).mass == pytest.approx(alpharank(filled, alpha=5.0).mass, abs=1e-15)


def test_fixation_probability_is_finite_where_the_float_formula_overflows():
    u = np.array([-1e4, -800.0, -1.0, 0.0, 1e-14, 1.0, 800.0, 1e4])
    log_rho = log_fixation_probability(u, 50)
    assert np.isfinite(log_rho).all()
    assert log_rho[3] == pytest.approx(-np.log(50))
    assert log_rho[4] == pytest.approx(-np.log(50), abs=1e-9)
    direct = np.log((1 - np.exp(-1.0)) / (1 - np.exp(-50.0)))
    assert log_rho[5] == pytest.approx(direct, rel=1e-12)
    assert log_rho[2] == pytest.approx(np.log((1 - np.exp(1.0)) / (1 - np.exp(50.0))), rel=1e-12)
    assert np.all(np.diff(log_rho) >= 0)  # fitter mutants fixate more often


def test_two_population_role_game_ranks_each_role():
    # Hiders 0..2 against seekers 0..1: hider 0 wins against every seeker, seeker 1
    # is the stronger seeker against every hider.
    hider_win = np.array([[0.9, 0.7], [0.4, 0.2], [0.3, 0.1]])
    result = alpharank_two_populations(hider_win, 1.0 - hider_win, alpha=50.0)
    assert result.profile_mass.sum() == pytest.approx(1.0)
    hiders, seekers = result.roles
    assert hiders.ranking[0] == 0 and seekers.ranking[0] == 1
    assert result.profile_mass[0, 1] > 0.99


class TestAgainstOpenSpiel:
    """OpenSpiel's own implementation (float arithmetic) where it is exact: moderate alpha."""

    osar = pytest.importorskip("open_spiel.python.egt.alpharank")

    @pytest.mark.parametrize("n", [2, 5, 9])
    @pytest.mark.parametrize("alpha", [0.5, 5.0, 30.0])
    def test_single_population(self, n, alpha):
        w = random_win_rates(n, np.random.default_rng(n))
        _, _, pi, _, _ = self.osar.compute([w], alpha=alpha, m=20)
        assert alpharank(w, alpha=alpha, population_size=20).mass == pytest.approx(pi, abs=1e-9)

    @pytest.mark.parametrize("alpha", [0.5, 5.0])
    def test_two_populations(self, alpha):
        rng = np.random.default_rng(3)
        a, b = rng.uniform(size=(3, 4)), rng.uniform(size=(3, 4))  # general-sum
        _, _, pi, _, _ = self.osar.compute([a, b], alpha=alpha, m=20)
        ours = alpharank_two_populations(a, b, alpha=alpha, population_size=20)
        assert ours.profile_mass.ravel() == pytest.approx(pi, abs=1e-9)
