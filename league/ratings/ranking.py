"""Rank ranges from confidence intervals, as Chatbot Arena shows them. Pure functions.

A leaderboard sorted by a point score (ours: the conservative ``mu - 3 sigma``) hides
how sure the order is. Following Chatbot Arena, every agent also gets the range of
ranks consistent with the 95% intervals of everyone on the board:

* agent ``j`` is **certainly above** ``i`` when their intervals do not overlap and
  ``j``'s is higher: ``lower[j] > upper[i]``;
* agent ``j`` is **certainly below** ``i`` when ``upper[j] < lower[i]``.

Then ``rank_lo = 1 + #certainly above`` (the best rank ``i`` could hold) and
``rank_hi = n - #certainly below`` (the worst). Comparisons are strict, so touching
intervals count as overlapping and an agent is never above or below itself, even with
a zero-width interval. Chatbot Arena's single "rank (UB)" column is our ``rank_lo``.

The sort key and the interval are different statistics (a very uncertain agent can
have a high interval but a low conservative score), so the displayed rank can fall
outside ``[rank_lo, rank_hi]``; given the displayed ranks, :func:`rank_ranges` widens
each range to contain its rank, so a page never shows "rank 7 (1-5)".

Both counts come from binary searches in the sorted bounds: ``O(n log n)`` for the
whole board, about a millisecond for 10,000 agents.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from league.ratings.rating import Z95

__all__ = ["interval_bounds", "rank_ranges"]


def interval_bounds(
    mu: Sequence[float] | np.ndarray, sigma: Sequence[float] | np.ndarray, z: float = Z95
) -> tuple[np.ndarray, np.ndarray]:
    """``(mu - z sigma, mu + z sigma)`` as float arrays (the 95% interval by default)."""
    mu_a = np.asarray(mu, dtype=np.float64)
    sigma_a = np.asarray(sigma, dtype=np.float64)
    return mu_a - z * sigma_a, mu_a + z * sigma_a


def rank_ranges(
    lower: Sequence[float] | np.ndarray,
    upper: Sequence[float] | np.ndarray,
    ranks: Sequence[int] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The best and worst rank of every agent consistent with everyone's intervals.

    Args:
        lower: Lower interval bound of each agent.
        upper: Upper interval bound of each agent (``upper[i] >= lower[i]``).
        ranks: The displayed 1-based rank of each agent; when given, each range is
            widened to contain it.

    Returns:
        ``(rank_lo, rank_hi)``: int64 arrays with ``1 <= rank_lo <= rank_hi <= n``.

    Raises:
        ValueError: Shapes differ or are not 1-D, a bound is not finite, an interval
            is reversed, or a rank is outside ``1..n``.
    """
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    if lo.ndim != 1 or lo.shape != hi.shape:
        raise ValueError(f"lower and upper must be 1-D of one length, got {lo.shape} and {hi.shape}")
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise ValueError("interval bounds must be finite")
    if (lo > hi).any():
        raise ValueError("every interval needs lower <= upper")
    n = lo.size
    # #{j: lower[j] > upper[i]} and #{j: upper[j] < lower[i]}, by binary search.
    above = n - np.searchsorted(np.sort(lo), hi, side="right")
    below = np.searchsorted(np.sort(hi), lo, side="left")
    best = (1 + above).astype(np.int64)
    worst = (n - below).astype(np.int64)
    if ranks is not None:
        shown = np.asarray(ranks, dtype=np.int64)
        if shown.shape != lo.shape:
            raise ValueError(f"ranks must have shape {lo.shape}, got {shown.shape}")
        if n and (shown.min() < 1 or shown.max() > n):
            raise ValueError(f"ranks must lie in 1..{n}")
        best = np.minimum(best, shown)
        worst = np.maximum(worst, shown)
    return best, worst
