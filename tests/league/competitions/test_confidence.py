"""Betting confidence sequences (league.competitions.confidence): coverage under continuous monitoring."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest

from league.competitions import confidence
from league.evaluation.significance import wilson_interval

ALPHA = 0.05
LOG_SIDE = math.log(2 / ALPHA)  # each side at alpha / 2


def sequences(p: float, count: int, length: int, seed: int) -> np.ndarray:
    """Units of two games with a first-move edge: seated first scores ``p + 0.1``, second ``p - 0.1``."""
    rng = np.random.default_rng(seed)
    first = rng.random((count, length)) < p + 0.1
    second = rng.random((count, length)) < p - 0.1
    return (first.astype(np.float64) + second) / 2.0


def missed(x: np.ndarray, p: float, margin: float = 0.03) -> bool:
    """Whether the sequence ever excluded ``p`` (the running intersection: max wealth over time)."""
    up, down = confidence.bets(x, margin, LOG_SIDE)
    return (confidence.log_wealth(x, up, p, +1) >= LOG_SIDE
            or confidence.log_wealth(x, down, p, -1) >= LOG_SIDE)


@pytest.mark.parametrize("p", [0.5, 0.47, 0.6, 0.3])
def test_a_sequence_monitored_after_every_unit_misses_at_most_alpha(p: float):
    runs = sequences(p, 400, 400, seed=int(p * 100))
    misses = sum(missed(x, p) for x in runs)
    assert misses / len(runs) <= ALPHA


def test_a_fixed_sample_interval_monitored_after_every_unit_misses_far_more():
    # Wilson's 95% interval on the games so far, looked at after every fifth unit: the reason for the rule.
    runs = sequences(0.5, 400, 400, seed=50)
    misses = 0
    for x in runs:
        points = 2 * np.cumsum(x)  # two games a unit
        misses += any(not (lo <= 0.5 <= hi) for lo, hi in
                      (wilson_interval(points[t], 2 * (t + 1)) for t in range(4, x.size, 5)))
    assert misses / len(runs) > 2 * ALPHA


def test_bounds_hold_the_mean_and_narrow_with_more_units():
    x = sequences(0.6, 1, 2000, seed=1)[0]
    up, down = confidence.bets(x, 0.03, LOG_SIDE)
    low, high = confidence.bounds(x, up, down, LOG_SIDE)
    up_s, down_s = confidence.bets(x[:200], 0.03, LOG_SIDE)
    low_s, high_s = confidence.bounds(x[:200], up_s, down_s, LOG_SIDE)
    assert low <= x.mean() <= high
    assert low_s <= low and high <= high_s
    assert high - low < 0.1 < high_s - low_s


def test_wealth_falls_as_the_null_rises():
    x = sequences(0.6, 1, 300, seed=2)[0]
    up, _ = confidence.bets(x, 0.03, LOG_SIDE)
    wealth = [confidence.log_wealth(x, up, m, +1) for m in np.linspace(0.0, 1.0, 21)]
    assert all(a >= b for a, b in pairwise(wealth))
    assert wealth[0] > LOG_SIDE and wealth[-1] == 0.0


def test_golden_bounds():
    x = sequences(0.6, 1, 200, seed=3)[0]
    up, down = confidence.bets(x, 0.03, LOG_SIDE)
    assert confidence.bounds(x, up, down, LOG_SIDE) == pytest.approx(GOLDEN, abs=1e-9)


GOLDEN = (0.53788, 0.65864)
