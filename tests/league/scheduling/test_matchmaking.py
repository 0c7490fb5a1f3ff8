"""Matchmaking: quality, pair weights, expected matches to settle; PFSP weights and
decayed win rates."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import trueskill

from league.ratings.rating import Rating, RatingEnv
from league.scheduling.matchmaking import (
    WinRateTable,
    expected_matches_to_sigma,
    ladder_pair_weights,
    pfsp_weights,
    quality_matrix,
    sample_ladder_pairs,
)

ENV = RatingEnv()
def test_match_quality_equals_package() -> None:
    rng = np.random.default_rng(1)
    ratings = [Rating(rng.uniform(0, 50), rng.uniform(0.5, 9)) for _ in range(8)]
    q = quality_matrix(ratings, env=ENV)
    for i, j in itertools.combinations(range(8), 2):
        a, b = (trueskill.Rating(r.mu, r.sigma) for r in (ratings[i], ratings[j]))
        expected = trueskill.quality_1vs1(a, b, env=ENV.package)
        assert q[i, j] == q[j, i] == pytest.approx(expected, rel=1e-12)
    assert np.all(np.diag(q) == 0.0)
    newcomers = quality_matrix([ENV.new_rating(), ENV.new_rating()], env=ENV)
    assert newcomers[0, 1] == pytest.approx(0.447, abs=1e-3)


def test_pair_weights_are_quality_tilted_toward_uncertain_agents() -> None:
    ratings = [Rating(20, 1.5), Rating(24, 1.0), Rating(26, 1.9), Rating(40, 1.2)]
    weights = ladder_pair_weights(ratings, env=ENV)
    assert np.all(np.tril(weights) == 0.0) and np.all(weights[np.triu_indices(4, 1)] > 0.0)
    # Same mean gap, one uncertain agent: the pair with the high-sigma agent is favoured.
    tilted = ladder_pair_weights([Rating(25, 1), Rating(25, 1), Rating(25, 3)], env=ENV)
    q = quality_matrix([Rating(25, 1), Rating(25, 1), Rating(25, 3)], env=ENV)
    assert tilted[0, 2] / tilted[0, 1] > q[0, 2] / q[0, 1]


def test_expected_matches_decreases_with_lower_initial_sigma() -> None:
    counts = [
        expected_matches_to_sigma(Rating(25, s), 1.5, env=ENV) for s in (8.333, 6.0, 4.0, 2.0)
    ]
    assert counts == sorted(counts, reverse=True) and len(set(counts)) == 4
    assert expected_matches_to_sigma(Rating(25, 1.0), 1.5, env=ENV) == 0
    # One match between newcomers: sigma 8.333 -> ~7.10 (mix of 7.171 decisive, 6.458 drawn).
    assert expected_matches_to_sigma(ENV.new_rating(), 7.2, env=ENV) == 1
    assert expected_matches_to_sigma(ENV.new_rating(), 7.0, env=ENV) == 2
    # A settled opponent teaches more per match than a fellow newcomer.
    assert expected_matches_to_sigma(
        ENV.new_rating(), 1.5, env=ENV, opponent_sigma=1.0
    ) < expected_matches_to_sigma(ENV.new_rating(), 1.5, env=ENV)


def test_expected_matches_is_infinite_below_the_tau_floor() -> None:
    assert math.isinf(expected_matches_to_sigma(ENV.new_rating(), ENV.tau, env=ENV))


def test_pfsp_weightings_match_alphastar_formulas() -> None:
    x = np.array([0.1, 0.5, 0.8, 1.0])
    np.testing.assert_allclose(pfsp_weights(x, "squared"), (1 - x) ** 2 / ((1 - x) ** 2).sum())
    np.testing.assert_allclose(pfsp_weights(x, "variance"), x * (1 - x) / (x * (1 - x)).sum())
    capped = np.array([0.5, 0.5, 0.2, 0.0])
    np.testing.assert_allclose(pfsp_weights(x, "linear_capped"), capped / capped.sum())
    np.testing.assert_allclose(pfsp_weights([1.0, 1.0], "squared"), [0.5, 0.5])
    with pytest.raises(ValueError, match="unknown PFSP weighting"):
        pfsp_weights(x, "cubic")  # type: ignore[arg-type]


def test_win_rate_table_decays_old_results() -> None:
    table = WinRateTable(decay=0.5, prior_games=0.0)
    for _ in range(10):
        table.record("b", 0.0)
    table.record("b", 1.0)
    # Counts: wins 1, games 1 + 0.5 + 0.25 + ... (10 decayed losses) ~ 1.999.
    assert table.games("b") == pytest.approx(sum(0.5**k for k in range(11)))
    assert table.win_rate("b") == pytest.approx(1 / table.games("b"))
    assert table.win_rate("b") > 1 / 11  # the undecayed rate would be 1/11
    no_decay = WinRateTable(decay=1.0, prior_games=0.0)
    for score in (1.0, 0.0, 0.5, 1.0):
        no_decay.record("c", score)
    assert no_decay.win_rate("c") == pytest.approx(2.5 / 4)


def test_a_batch_of_results_equals_the_same_games_recorded_one_by_one() -> None:
    one_by_one, batch = WinRateTable(decay=0.9), WinRateTable(decay=0.9)
    for table in (one_by_one, batch):
        table.record("a", 1.0)  # earlier evidence, decayed by the batch
    for _ in range(8):
        one_by_one.record("a", 0.75)  # 8 games worth 6: spread evenly
    batch.record_many("a", 8, 6.0)
    assert batch.games("a") == pytest.approx(one_by_one.games("a"))
    assert batch.win_rate("a") == pytest.approx(one_by_one.win_rate("a"))
    flat = WinRateTable(decay=1.0, prior_games=0.0)
    flat.record_many("b", 4, 1.0)
    assert flat.win_rate("b") == pytest.approx(0.25) and flat.games("b") == 4.0
    with pytest.raises(ValueError, match="score"):
        flat.record_many("b", 2, 3.0)


def test_win_rate_table_prior_and_decay_are_per_opponent() -> None:
    table = WinRateTable(decay=0.9, prior_games=2.0)
    assert table.win_rate("never") == 0.5
    table.record("a", 1.0)
    for _ in range(5):
        table.record("b", 0.0)
    assert table.win_rate("a") == pytest.approx(2.0 / 3.0)  # (1 + 1) / (1 + 2)
    assert table.games("a") == 1.0  # not decayed by games against "b"
    np.testing.assert_allclose(table.win_rates(["a", "never"]), [2 / 3, 0.5])


def test_pairs_are_valid_balanced_and_placement_gets_its_share():
    rng = np.random.default_rng(0)
    settled = [Rating(20 + i, 1.0) for i in range(9)]
    ratings = settled + [Rating(25.0, 8.0)]  # one newcomer
    pairs = sample_ladder_pairs(ratings, 4000, rng, env=ENV, target_sigma=2.0)
    assert len(pairs) == 4000 and all(i != j for i, j in pairs)
    with_newcomer = sum(9 in p for p in pairs)
    # Half the batch is placement; the rest favours uncertain agents, so it plays more.
    assert 2000 <= with_newcomer < 4000
    first_seat = sum(p[0] == 9 for p in pairs)
    assert abs(first_seat - with_newcomer / 2) < 4 * np.sqrt(with_newcomer / 4)
    # Placement opponents are the highest-quality ones: nearest in mu to 25.
    opponents = {j if i == 9 else i for i, j in pairs if 9 in (i, j)}
    assert {4, 5, 6} <= opponents


def test_everyone_placing_means_the_whole_batch_is_placement():
    rng = np.random.default_rng(1)
    pairs = sample_ladder_pairs([ENV.new_rating() for _ in range(5)], 100, rng, env=ENV, target_sigma=2.0)
    assert len(pairs) == 100 and all(i != j for i, j in pairs)
