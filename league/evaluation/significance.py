"""The few statistics the evaluation measures share. Pure functions.

* :func:`wilson_interval` - the Wilson score interval of a proportion. Fed a score
  with draws counted half, it stays valid and errs on the wide side: a game's score
  ``X`` lies in [0, 1], so ``Var X = E[X^2] - p^2 <= E[X] - p^2 = p (1 - p)``, the
  binomial variance Wilson assumes.
* :func:`sign_test` - one-sided exact binomial test that the first of two agents wins
  more than half of their decisive games (draws carry no direction and are left out).
* :func:`holm` and :func:`benjamini_hochberg` - adjusted p-values for a family of
  tests: Holm controls the family-wise error rate under any dependence, Benjamini-
  Hochberg the false discovery rate (under independence or positive dependence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from league.ratings.rating import Z95

__all__ = ["benjamini_hochberg", "holm", "sign_test", "wilson_interval"]


def wilson_interval(score: float, games: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``score / games`` (95% by default).

    Args:
        score: Successes (wins plus half the draws).
        games: Trials; ``0`` gives the uninformative ``(0, 1)``.
        z: Normal quantile of the two-sided level.

    Returns:
        ``(low, high)`` within ``[0, 1]``.
    """
    if games < 0 or not 0 <= score <= games:
        raise ValueError(f"need 0 <= score <= games, got score={score}, games={games}")
    if games == 0:
        return 0.0, 1.0
    p = score / games
    z2 = z * z
    center = (p + z2 / (2 * games)) / (1 + z2 / games)
    half = z * math.sqrt(p * (1 - p) / games + z2 / (4 * games * games)) / (1 + z2 / games)
    return max(0.0, center - half), min(1.0, center + half)


def sign_test(wins: float | np.ndarray, losses: float | np.ndarray) -> float | np.ndarray:
    """One-sided p-value of "wins are more likely than losses": ``P(X >= wins)``, ``X ~ Bin(wins + losses, 1/2)``.

    Element-wise on arrays; no decisive games gives 1.
    """
    from scipy.stats import binom  # loaded on first use: importing scipy.stats costs ~0.4 s

    w = np.rint(np.asarray(wins, dtype=np.float64))
    n = w + np.rint(np.asarray(losses, dtype=np.float64))
    p = binom.sf(w - 1, n, 0.5)
    return float(p) if p.ndim == 0 else p


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1)."""
    return _adjusted(p_values, step_down=True)


def benjamini_hochberg(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values; step-up, monotone, capped at 1)."""
    return _adjusted(p_values, step_down=False)


def _adjusted(p_values: Sequence[float] | np.ndarray, step_down: bool) -> np.ndarray:
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    if step_down:  # Holm: the k-th smallest times (m - k), running maximum
        scaled = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    else:  # BH: the k-th smallest times m / k, running minimum from the largest
        scaled = np.minimum.accumulate((p[order] * m / np.arange(1, m + 1))[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(scaled, 1.0)
    return out
