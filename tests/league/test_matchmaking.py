"""Matchmaking: quality, placement, pair sampling, expected matches; PFSP, decayed win
rates, latest-vs-past, uniform and round-robin. Distribution tests use fixed seeds and
tolerances of ~5 binomial standard deviations, so they fail on a wrong weighting but not
by chance."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import trueskill

from league.matchmaking import (
    WinRateTable,
    expected_matches_to_sigma,
    ladder_pair_weights,
    lower_quality_after_win,
    match_quality,
    next_ladder_pair,
    pfsp_weights,
    placement_opponent,
    quality_matrix,
    round_robin_pair,
    round_robin_schedule,
    sample_latest_or_past,
    sample_pfsp,
    sample_uniform,
)
from league.ratings import Rating, RatingEnv

ENV = RatingEnv()
DRAWS = 20_000


def frequencies(draws: list, keys: list) -> np.ndarray:
    counts = {k: 0 for k in keys}
    for d in draws:
        counts[d] += 1
    return np.array([counts[k] for k in keys]) / len(draws)


def assert_frequencies(observed: np.ndarray, expected: np.ndarray, n: int = DRAWS) -> None:
    tolerance = 5 * np.sqrt(expected * (1 - expected) / n) + 1e-12
    assert np.all(np.abs(observed - expected) <= tolerance), (observed, expected)


def test_match_quality_equals_package() -> None:
    rng = np.random.default_rng(1)
    ratings = [Rating(rng.uniform(0, 50), rng.uniform(0.5, 9)) for _ in range(8)]
    q = quality_matrix(ratings, env=ENV)
    for i, j in itertools.combinations(range(8), 2):
        a, b = (trueskill.Rating(r.mu, r.sigma) for r in (ratings[i], ratings[j]))
        expected = trueskill.quality_1vs1(a, b, env=ENV.package)
        assert q[i, j] == q[j, i] == pytest.approx(expected, rel=1e-12)
    assert np.all(np.diag(q) == 0.0)
    newcomer = ENV.new_rating()
    assert match_quality(newcomer, newcomer, env=ENV) == pytest.approx(0.447, abs=1e-3)


def test_placement_picks_highest_quality_opponent() -> None:
    ratings = [Rating(25, 8.3), Rating(10, 1), Rating(27, 1), Rating(45, 1), Rating(25, 6)]
    q = quality_matrix(ratings, env=ENV)
    assert placement_opponent(0, ratings, env=ENV) == int(np.argmax(q[0])) == 2
    # The newcomer (sigma above target) is paired deterministically with that opponent.
    rng = np.random.default_rng(0)
    assert next_ladder_pair(ratings, rng, env=ENV, target_sigma=2.0) == (0, 2)


def test_after_placement_pairs_follow_quality_times_sigma() -> None:
    ratings = [Rating(20, 1.5), Rating(24, 1.0), Rating(26, 1.9), Rating(40, 1.2)]
    weights = ladder_pair_weights(ratings, env=ENV)
    assert np.all(np.tril(weights) == 0.0)
    pairs = list(itertools.combinations(range(4), 2))
    expected = np.array([weights[p] for p in pairs]) / weights.sum()
    rng = np.random.default_rng(7)
    drawn = [next_ladder_pair(ratings, rng, env=ENV, target_sigma=2.0) for _ in range(DRAWS)]
    assert_frequencies(frequencies(drawn, pairs), expected)
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


@pytest.mark.parametrize("weighting", ["squared", "variance", "linear_capped"])
def test_pfsp_sampling_frequencies_match_weights(weighting) -> None:
    opponents = ["easy", "even", "hard", "nemesis"]
    win_rates = [0.9, 0.5, 0.3, 0.05]
    rng = np.random.default_rng(11)
    drawn = [sample_pfsp(opponents, win_rates, rng, weighting) for _ in range(DRAWS)]
    observed = frequencies(drawn, opponents)
    assert_frequencies(observed, pfsp_weights(win_rates, weighting))
    if weighting == "squared":  # hard opponents are picked more often
        assert observed[3] > observed[2] > observed[1] > observed[0]


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


def test_win_rate_table_prior_and_decay_are_per_opponent() -> None:
    table = WinRateTable(decay=0.9, prior_games=2.0)
    assert table.win_rate("never") == 0.5
    table.record("a", 1.0)
    for _ in range(5):
        table.record("b", 0.0)
    assert table.win_rate("a") == pytest.approx(2.0 / 3.0)  # (1 + 1) / (1 + 2)
    assert table.games("a") == 1.0  # not decayed by games against "b"
    np.testing.assert_allclose(table.win_rates(["a", "never"]), [2 / 3, 0.5])


def test_latest_vs_past_is_80_20_and_past_follows_softmax_quality() -> None:
    past, scores = ["v1", "v2", "v3"], [0.0, 1.0, 2.0]
    rng = np.random.default_rng(5)
    drawn = [sample_latest_or_past("v4", past, scores, rng) for _ in range(DRAWS)]
    softmax = np.exp(scores) / np.exp(scores).sum()
    expected = np.concatenate([0.2 * softmax, [0.8]])
    assert_frequencies(frequencies(drawn, [*past, "v4"]), expected)
    assert sample_latest_or_past("v1", [], [], rng) == "v1"


def test_beating_a_past_snapshot_lowers_its_quality() -> None:
    scores = [0.0, 0.0, 0.0, 0.0]
    new = lower_quality_after_win(scores, beaten=2, learning_rate=0.1)
    np.testing.assert_allclose(new, [0.0, 0.0, -0.1, 0.0])  # 0.1 / (4 * 0.25)
    assert scores == [0.0, 0.0, 0.0, 0.0]


def test_uniform_sampling_is_uniform() -> None:
    opponents = list("abcde")
    rng = np.random.default_rng(3)
    drawn = [sample_uniform(opponents, rng) for _ in range(DRAWS)]
    assert_frequencies(frequencies(drawn, opponents), np.full(5, 0.2))


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8])
def test_round_robin_covers_all_pairs_once_per_cycle(n) -> None:
    rounds = round_robin_schedule(n)
    pairs = [pair for round_ in rounds for pair in round_]
    assert sorted(pairs) == list(itertools.combinations(range(n), 2))
    for round_ in rounds:  # nobody plays twice in one round
        players = [p for pair in round_ for p in pair]
        assert len(players) == len(set(players))
    cycle = [round_robin_pair(step, n) for step in range(2 * len(pairs))]
    assert cycle[: len(pairs)] == cycle[len(pairs) :] == pairs
