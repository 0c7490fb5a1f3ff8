"""Payoff matrices of a population and the Nash mixture of the game they define. Pure.

A league's head-to-head results form an empirical *meta-game*: agents are strategies
and ``win_rate[i, j]`` is how often ``i`` beats ``j`` (a draw counts half). Shifting by
one half gives a zero-sum game, ``payoff = win_rate - 0.5`` (antisymmetric when both
directions come from the same matches), whose Nash equilibrium is the mixture of
agents no opponent can exploit (AlphaStar's league and Balduzzi et al.'s "Nash
averaging" use exactly this). A pair that never met counts as even (payoff 0).

The equilibrium is the row player's maximin strategy, one linear program solved with
HiGHS through :func:`scipy.optimize.linprog` (deterministic). A game may have several
equilibria; the program returns one vertex of that set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ZeroSumSolution", "nash_mixture", "solve_zero_sum", "win_rates"]

# Probabilities below this are solver noise: they are set to 0 before renormalizing.
_NEGLIGIBLE = 1e-9


@dataclass(frozen=True)
class ZeroSumSolution:
    """An equilibrium of a two-player zero-sum matrix game.

    Attributes:
        row: The row player's maximin mixture (sums to 1).
        col: The column player's minimax mixture (sums to 1).
        value: The game's value to the row player.
    """

    row: np.ndarray
    col: np.ndarray
    value: float


def win_rates(
    wins: Sequence[Sequence[float]] | np.ndarray,
    draws: Sequence[Sequence[float]] | np.ndarray,
    losses: Sequence[Sequence[float]] | np.ndarray,
) -> np.ndarray:
    """``(wins + draws / 2) / games`` per pair, ``nan`` where a pair never played.

    Args:
        wins: ``wins[i, j]`` is how often ``i`` beat ``j``.
        draws: Draws of ``i`` against ``j``.
        losses: Losses of ``i`` against ``j``.

    Returns:
        A float array of the same shape.

    Raises:
        ValueError: Shapes differ or a count is negative.
    """
    w, d, l = (np.asarray(x, dtype=np.float64) for x in (wins, draws, losses))
    if not (w.shape == d.shape == l.shape):
        raise ValueError(f"wins, draws and losses must share a shape, got {w.shape}, {d.shape}, {l.shape}")
    if (w < 0).any() or (d < 0).any() or (l < 0).any():
        raise ValueError("counts must be non-negative")
    games = w + d + l
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(games > 0, (w + 0.5 * d) / games, np.nan)


def _maximin(payoff: np.ndarray) -> tuple[np.ndarray, float]:
    """The row player's maximin mixture of ``payoff`` and its guaranteed value."""
    from scipy.optimize import linprog  # loaded on first use: the service starts without it

    m, n = payoff.shape
    # Variables (x_1..x_m, v): maximize v subject to (x^T A)_j >= v for every column j,
    # sum(x) = 1, x >= 0, v free.
    cost = np.zeros(m + 1)
    cost[-1] = -1.0
    a_ub = np.hstack([-payoff.T, np.ones((n, 1))])
    a_eq = np.hstack([np.ones((1, m)), np.zeros((1, 1))])
    bounds = [(0.0, None)] * m + [(None, None)]
    result = linprog(cost, A_ub=a_ub, b_ub=np.zeros(n), A_eq=a_eq, b_eq=[1.0],
                     bounds=bounds, method="highs")
    if result.status != 0:  # a finite matrix game always has a solution
        raise RuntimeError(f"linear program failed: {result.message}")
    x = np.clip(result.x[:m], 0.0, None)
    x[x < _NEGLIGIBLE] = 0.0
    return x / x.sum(), float(result.x[-1])


def solve_zero_sum(payoff: Sequence[Sequence[float]] | np.ndarray) -> ZeroSumSolution:
    """An equilibrium of the zero-sum game where the row player receives ``payoff``.

    Args:
        payoff: ``(m, n)`` finite payoffs to the row player.

    Returns:
        Both players' mixtures and the value.

    Raises:
        ValueError: Empty, not 2-D or not finite.
    """
    a = np.asarray(payoff, dtype=np.float64)
    if a.ndim != 2 or 0 in a.shape:
        raise ValueError(f"payoff must be a non-empty 2-D matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("payoff must be finite")
    row, value = _maximin(a)
    col, _ = _maximin(-a.T)
    return ZeroSumSolution(row=row, col=col, value=value)


def nash_mixture(win_rate: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Nash mixture over a population from its square win-rate matrix.

    Args:
        win_rate: ``(n, n)`` win rates in ``[0, 1]`` of row against column; ``nan``
            (never played) and the diagonal count as even.

    Returns:
        The row player's equilibrium mixture of ``payoff = win_rate - 0.5``.

    Raises:
        ValueError: Not square, or a known win rate outside ``[0, 1]``.
    """
    w = np.asarray(win_rate, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] == 0:
        raise ValueError(f"win_rate must be a non-empty square matrix, got shape {w.shape}")
    known = ~np.isnan(w)
    if ((w[known] < 0) | (w[known] > 1)).any():
        raise ValueError("win rates must lie in [0, 1]")
    payoff = np.where(known, w - 0.5, 0.0)
    np.fill_diagonal(payoff, 0.0)
    return solve_zero_sum(payoff).row
