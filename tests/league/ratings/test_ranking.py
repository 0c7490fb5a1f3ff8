"""Rank ranges from confidence intervals (league.ratings.ranking)."""

from __future__ import annotations

import numpy as np
import pytest

from league.ratings.ranking import interval_bounds, rank_ranges


def brute_force(lo: np.ndarray, hi: np.ndarray) -> tuple[list[int], list[int]]:
    n = len(lo)
    best = [1 + sum(lo[j] > hi[i] for j in range(n)) for i in range(n)]
    worst = [n - sum(hi[j] < lo[i] for j in range(n)) for i in range(n)]
    return best, worst


def test_separated_intervals_have_exact_ranks():
    best, worst = rank_ranges([30, 20, 10], [32, 22, 12])
    assert best.tolist() == [1, 2, 3]
    assert worst.tolist() == [1, 2, 3]


def test_overlapping_intervals_share_ranks():
    # a and b overlap; c is certainly below both.
    best, worst = rank_ranges([20, 19, 5], [30, 25, 10])
    assert best.tolist() == [1, 1, 3]
    assert worst.tolist() == [2, 2, 3]


def test_touching_intervals_count_as_overlapping_and_self_is_never_counted():
    best, worst = rank_ranges([10, 5, 5], [15, 10, 5])
    # b's upper bound equals a's lower bound: neither is certainly above the other.
    assert best.tolist() == [1, 1, 2]
    # c (zero width, at 5) touches b, but lies certainly below a.
    assert worst.tolist() == [2, 3, 3]


def test_identical_intervals_span_the_whole_tie():
    best, worst = rank_ranges([1.0] * 4, [2.0] * 4)
    assert best.tolist() == [1] * 4 and worst.tolist() == [4] * 4


def test_matches_brute_force_on_random_boards():
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 60):
        mu = rng.normal(25, 5, n)
        sigma = rng.uniform(0.1, 8, n)
        lo, hi = interval_bounds(mu, sigma)
        best, worst = rank_ranges(lo, hi)
        want_best, want_worst = brute_force(lo, hi)
        assert best.tolist() == want_best and worst.tolist() == want_worst
        assert (1 <= best).all() and (best <= worst).all() and (worst <= n).all()


def test_given_ranks_are_always_inside_their_range():
    # A very uncertain agent: high interval, low conservative score (mu - 3 sigma).
    mu, sigma = np.array([20.0, 37.0]), np.array([0.5, 8.0])
    lo, hi = interval_bounds(mu, sigma)
    assert lo[1] > hi[0]  # by the intervals alone, agent 1 is certainly above agent 0
    order = np.argsort(-(mu - 3 * sigma), kind="stable")
    ranks = np.empty(2, dtype=int)
    ranks[order] = [1, 2]
    assert ranks.tolist() == [1, 2]
    best, worst = rank_ranges(lo, hi, ranks)
    assert best.tolist() == [1, 1] and worst.tolist() == [2, 2]
    plain_best, plain_worst = rank_ranges(lo, hi)
    assert plain_best.tolist() == [2, 1] and plain_worst.tolist() == [2, 1]


def test_interval_bounds_default_to_95_percent():
    lo, hi = interval_bounds([25.0], [2.0])
    assert lo[0] == pytest.approx(25 - 3.92) and hi[0] == pytest.approx(25 + 3.92)


def test_empty_board():
    best, worst = rank_ranges([], [], [])
    assert best.size == 0 and worst.size == 0


@pytest.mark.parametrize(
    "lower, upper, ranks, message",
    [
        ([1, 2], [3], None, "one length"),
        ([float("nan")], [1], None, "finite"),
        ([3], [1], None, "lower <= upper"),
        ([1, 2], [3, 4], [1, 3], "1..2"),
        ([1, 2], [3, 4], [1], "shape"),
    ],
)
def test_bad_input_is_refused(lower, upper, ranks, message):
    with pytest.raises(ValueError, match=message):
        rank_ranges(lower, upper, ranks)
