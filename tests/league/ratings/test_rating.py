"""Ratings: TrueSkill golden numbers, the closed-form fast path, the mpmath fallback,
role-specific ratings.

Golden values are the numbers published in TrueSkill's documentation (default
environment: mu=25, sigma=25/3, beta=sigma/2, tau=sigma/100, 10% draws), to 3 decimals.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import trueskill

from league.ratings.book import RatingBook, Standing
from league.ratings.closed_form import (
    TRUSTED_MIN_WIN_X,
    Result1v1,
    apply_results,
    rate_1v1_arrays,
    rate_1v1_fast,
)
from league.ratings.rating import Rating, RatingEnv, rate_teams

ENV = RatingEnv()
NEW = ENV.new_rating()


def assert_rating(rating: Rating, mu: float, sigma: float) -> None:
    # The published numbers have 3 decimals, some truncated rather than rounded
    # (1v2: mu 33.7307 is published as 33.730), hence 1e-3 and not round-equality.
    assert (rating.mu, rating.sigma) == pytest.approx((mu, sigma), abs=1e-3)


def flat(pair: tuple[Rating, Rating]) -> tuple[float, float, float, float]:
    return (pair[0].mu, pair[0].sigma, pair[1].mu, pair[1].sigma)


def package_1v1(winner: Rating, loser: Rating, drawn: bool) -> tuple[float, ...]:
    """The reference: the package's own module-level rate_1vs1 on the default backend."""
    new_w, new_l = trueskill.rate_1vs1(
        trueskill.Rating(winner.mu, winner.sigma),
        trueskill.Rating(loser.mu, loser.sigma),
        drawn=drawn,
        env=ENV.package,
    )
    return (new_w.mu, new_w.sigma, new_l.mu, new_l.sigma)


def package_rate(winner: Rating, loser: Rating, drawn: bool = False, *, env: RatingEnv) -> tuple[Rating, Rating]:
    """Our package path of a 1v1: two teams of one, as ``trueskill.rate_1vs1`` rates it (mpmath on overflow)."""
    (new_w,), (new_l,) = rate_teams([[winner], [loser]], [0, 0 if drawn else 1], env=env)
    return new_w, new_l


def test_env_defaults_are_trueskill_defaults() -> None:
    assert (ENV.mu, ENV.sigma, ENV.beta, ENV.tau, ENV.draw_probability) == pytest.approx(
        (trueskill.MU, trueskill.SIGMA, trueskill.BETA, trueskill.TAU, trueskill.DRAW_PROBABILITY)
    )
    assert ENV.precise.backend == "mpmath" and ENV.package.backend is None


@pytest.mark.parametrize("rate", [package_rate, rate_1v1_fast], ids=["package", "fast"])
def test_golden_1v1_win(rate) -> None:
    winner, loser = rate(NEW, NEW, env=ENV)
    assert_rating(winner, 29.396, 7.171)
    assert_rating(loser, 20.604, 7.171)


@pytest.mark.parametrize("rate", [package_rate, rate_1v1_fast], ids=["package", "fast"])
def test_golden_1v1_draw(rate) -> None:
    first, second = rate(NEW, NEW, drawn=True, env=ENV)
    assert_rating(first, 25.000, 6.458)
    assert_rating(second, 25.000, 6.458)


def test_golden_2v2_win() -> None:
    (a, b), (c, d) = rate_teams([[NEW, NEW], [NEW, NEW]], [0, 1], env=ENV)
    for rating in (a, b):
        assert_rating(rating, 28.108, 7.774)
    for rating in (c, d):
        assert_rating(rating, 21.892, 7.774)


def test_golden_1v2_single_player_wins() -> None:
    (single,), (c, d) = rate_teams([[NEW], [NEW, NEW]], [0, 1], env=ENV)
    assert_rating(single, 33.730, 7.317)
    assert_rating(c, 16.270, 7.317)
    assert_rating(d, 16.270, 7.317)


def test_golden_three_player_free_for_all() -> None:
    (first,), (second,), (third,) = rate_teams([[NEW], [NEW], [NEW]], [0, 1, 2], env=ENV)
    assert_rating(first, 31.675, 6.656)
    assert_rating(second, 25.000, 6.208)
    assert_rating(third, 18.325, 6.656)


def test_rate_teams_equal_ranks_is_a_draw_and_order_follows_input() -> None:
    # Ranks given out of order: results must come back in input order.
    (last,), (first,) = rate_teams([[NEW], [NEW]], [1, 0], env=ENV)
    assert last.mu < 25.0 < first.mu
    (a,), (b,) = rate_teams([[NEW], [NEW]], [0, 0], env=ENV)
    assert_rating(a, 25.000, 6.458)
    assert_rating(b, 25.000, 6.458)


def test_rate_teams_rejects_missing_ranks() -> None:
    with pytest.raises(ValueError, match="one per team"):
        rate_teams([[NEW], [NEW]], [0], env=ENV)


def test_fast_path_matches_package_on_wide_random_range() -> None:
    rng = np.random.default_rng(20240601)
    n = 4000
    mu_w, mu_l = rng.uniform(0, 50, n), rng.uniform(0, 50, n)
    sd_w, sd_l = rng.uniform(0.5, 9, n), rng.uniform(0.5, 9, n)
    drawn = rng.random(n) < 0.3
    expected = np.array(
        [
            package_1v1(Rating(a, b), Rating(c, d), bool(e))
            for a, b, c, d, e in zip(mu_w, sd_w, mu_l, sd_l, drawn)
        ]
    )
    vectorized = np.stack(rate_1v1_arrays(mu_w, sd_w, mu_l, sd_l, drawn, env=ENV), axis=1)
    scalar = np.array(
        [
            flat(rate_1v1_fast(Rating(a, b), Rating(c, d), bool(e), env=ENV))
            for a, b, c, d, e in zip(mu_w, sd_w, mu_l, sd_l, drawn)
        ]
    )
    assert drawn.sum() > 1000 and (~drawn).sum() > 2000  # both branches exercised
    np.testing.assert_allclose(vectorized, expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(scalar, expected, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(vectorized, scalar)  # bit for bit: waves of a batch rely on it


def test_fast_path_honours_a_non_default_env() -> None:
    env = RatingEnv(mu=1500.0, sigma=300.0, draw_probability=0.3)
    a, b = Rating(1600.0, 120.0), Rating(1450.0, 250.0)
    for drawn in (False, True):
        fast, slow = rate_1v1_fast(a, b, drawn, env=env), package_rate(a, b, drawn, env=env)
        assert flat(fast) == pytest.approx(flat(slow), abs=1e-9)
        assert fast[0].mu != a.mu  # a real update happened


def test_fast_path_falls_back_to_package_beyond_trusted_region() -> None:
    # x = t - e ~ -25 < TRUSTED_MIN_WIN_X: the closed form is no longer trusted there,
    # so the fast path must return the package's numbers bit for bit (the closed form
    # would differ from them in the last ~5 digits).
    winner, loser = Rating(0.0, 0.5), Rating(150.0, 0.5)
    c = math.sqrt(2 * (0.5**2 + ENV.tau**2) + 2 * ENV.beta**2)
    assert (winner.mu - loser.mu) / c < TRUSTED_MIN_WIN_X
    expected = rate_1v1_fast(winner, loser, env=ENV)
    assert flat(expected) == package_1v1(winner, loser, False)
    arrays = rate_1v1_arrays(
        [0.0, 25.0], [0.5, ENV.sigma], [150.0, 25.0], [0.5, ENV.sigma], env=ENV
    )
    assert tuple(a[0] for a in arrays) == flat(expected)
    assert (arrays[0][1], arrays[1][1]) == pytest.approx((29.396, 7.171), abs=1e-3)


def test_extreme_upset_retries_on_mpmath() -> None:
    # NB: the often-quoted mu=100 vs mu=0 (sigma 0.5) upset does NOT overflow
    # trueskill 0.4.5's float backend; the gap has to exceed ~230 (x < ~-38).
    winner, loser = Rating(0.0, 0.5), Rating(300.0, 0.5)
    with pytest.raises(FloatingPointError):
        trueskill.rate_1vs1(
            trueskill.Rating(0.0, 0.5), trueskill.Rating(300.0, 0.5), env=ENV.package
        )
    for drawn in (False, True):
        new_w, new_l = package_rate(winner, loser, drawn, env=ENV)
        assert all(math.isfinite(x) for x in (new_w.mu, new_w.sigma, new_l.mu, new_l.sigma))
        assert 0.0 < new_w.mu < 5.0 and 295.0 < new_l.mu < 300.0
        assert (new_w, new_l) == rate_1v1_fast(winner, loser, drawn, env=ENV)


def test_apply_results_is_sequential_and_does_not_mutate_input() -> None:
    start = {"a": NEW, "b": NEW}
    log = [Result1v1("a", "b"), Result1v1("a", "c"), Result1v1("b", "c", drawn=True)]
    final = apply_results(start, log, env=ENV)
    a1, b1 = package_rate(NEW, NEW, env=ENV)
    a2, c1 = package_rate(a1, NEW, env=ENV)  # "c" is new: starts at the prior
    b2, c2 = package_rate(b1, c1, drawn=True, env=ENV)
    assert set(final) == {"a", "b", "c"}
    for got, want in ((final["a"], a2), (final["b"], b2), (final["c"], c2)):
        assert (got.mu, got.sigma) == pytest.approx((want.mu, want.sigma), abs=1e-9)
    assert start == {"a": NEW, "b": NEW}
    with pytest.raises(ValueError, match="itself"):
        apply_results(start, [Result1v1("a", "a")], env=ENV)


def test_role_ratings_update_only_the_role_played() -> None:
    book = RatingBook(ENV, {("b", "predator"): Standing(Rating(30.0, 4.0), games=3)})
    # "b" plays prey (never played it: the prior); the predator team ("a") loses.
    book.apply(["a", "b"], ["predator", "prey"], winner=1)
    winner, loser = package_rate(NEW, NEW, env=ENV)
    assert_rating(book.rating(("a", "predator")), loser.mu, loser.sigma)
    assert_rating(book.rating(("b", "prey")), winner.mu, winner.sigma)
    assert book.standings[("b", "predator")] == Standing(Rating(30.0, 4.0), games=3)  # untouched
    assert book.rating(("b", "hider")) == NEW


def test_conservative_score_and_interval() -> None:
    rating = Rating(30.0, 2.0)
    assert rating.conservative == pytest.approx(24.0)
    assert rating.interval95 == pytest.approx((26.08, 33.92))
    assert NEW.conservative == pytest.approx(0.0)
    # A settled agent with a lower mean can outrank an unknown one on the leaderboard.
    assert Rating(27.0, 1.0).conservative > Rating(35.0, 5.0).conservative


def test_rating_rejects_non_positive_sigma() -> None:
    with pytest.raises(ValueError, match="sigma > 0"):
        Rating(25.0, 0.0)
