"""Anytime-valid confidence sequences for a mean in [0, 1], by betting. Pure numpy.

The final evaluation looks at its results after every batch and stops as soon as they
are convincing, so a fixed-sample interval (Wilson, a t-interval) would be wrong: looked
at often enough, a 95% interval excludes the truth sooner or later. A confidence
*sequence* holds at every time at once, so it may be looked at after every game and the
evaluation stopped whenever it likes (Waudby-Smith & Ramdas, "Estimating means of
bounded random variables by betting", JRSS-B 2023).

Betting. Observations ``x_1, x_2, ... in [0, 1]`` with mean ``p``. A gambler who believes
``p > m`` stakes a fraction ``lam_t >= 0`` of their wealth on ``x_t - m``, chosen
before seeing ``x_t`` (predictable). Their wealth

    K_t(m) = prod_{s <= t} (1 + lam_s (x_s - m))

is a nonnegative martingale with ``E = 1`` when ``p = m`` and a supermartingale when
``p <= m``, so by Ville's inequality ``P(sup_t K_t(m) >= 1/a) <= a``: rejecting
"``p <= m``" once the wealth reaches ``1/a`` errs with probability at most ``a``,
however often it is checked. The lower bound ``low_t`` is the largest ``m`` so rejected
up to time ``t``. The bets do not depend on ``m``, so ``K_t(m)`` decreases in ``m``, the
rejected set is an interval ``[0, low_t)`` and one crossing at the true mean covers
every false claim: ``P(exists t: p < low_t) <= a``. The upper bound bets the other way.

The bets are the growth-rate-optimal (Kelly) fraction against a target null ``m*``,
``lam = (mu_hat - m*) / (var_hat + (mu_hat - m*)^2)`` capped at ``CAP``, from the
estimates of the units before (WSR's aGRAPA with its priors: ``mu_hat_0 = 1/2``,
``var_hat_0 = 1/4``). The target is the null the decision needs (:func:`bets`): 1/2 to
tell two entries apart, ``1/2 -+ margin`` to show they are tied; with no decision in
reach the bet is WSR's predictable plug-in. Any predictable choice is valid; this one
only decides how fast a true claim is reached.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["CAP", "bets", "bounds", "log_wealth"]

CAP = 0.75
"""Largest stake: ``1 + lam (x - m) >= 1 - CAP > 0`` for every ``x, m in [0, 1]``."""


def _estimates(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance estimates before each unit (``t`` = units seen), with WSR's priors."""
    t = np.arange(x.size, dtype=np.float64)
    mean = (0.5 + np.concatenate([[0.0], np.cumsum(x)[:-1]])) / (t + 1)
    dev = np.concatenate([[0.0], np.cumsum((x - mean) ** 2)[:-1]])
    return mean, (0.25 + dev) / (t + 1)


def _kelly(gap: np.ndarray, var: np.ndarray) -> np.ndarray:
    return np.clip(gap / (var + gap * gap), 0.0, CAP)


def bets(x: np.ndarray, margin: float, log_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The predictable stakes of both gamblers: ``(up, down)``, each in ``[0, CAP]``.

    ``up`` (towards the lower bound) targets ``m* = 1/2`` while the mean so far looks
    above ``1/2 + margin/2`` (to separate), ``1/2 - margin`` while it looks within
    ``margin/2`` of 1/2 (to show a tie), and otherwise bets WSR's predictable plug-in
    ``sqrt(2 log_threshold / (var t log(t + 1)))``; ``down`` is the mirror image.

    Args:
        x: Observations in ``[0, 1]`` in order.
        margin: Half-width of the tie band around 1/2.
        log_threshold: ``log(1/a)`` of the level the bounds are for (the plug-in's scale).
    """
    x = np.asarray(x, dtype=np.float64)
    mean, var = _estimates(x)
    t = np.arange(1, x.size + 1, dtype=np.float64)
    plug_in = np.minimum(CAP, np.sqrt(2.0 * log_threshold / (var * t * np.log(t + 1.0))))
    half = margin / 2.0
    up = np.where(mean >= 0.5 + half, _kelly(mean - 0.5, var),
                  np.where(mean > 0.5 - half, _kelly(mean - (0.5 - margin), var), plug_in))
    down = np.where(mean <= 0.5 - half, _kelly(0.5 - mean, var),
                    np.where(mean < 0.5 + half, _kelly(0.5 + margin - mean, var), plug_in))
    return up, down


def log_wealth(x: np.ndarray, stakes: np.ndarray, m: float, side: int) -> float:
    """``max_t log K_t(m)`` (0 before any unit) of the gambler on ``side`` (+1 up, -1 down)."""
    if x.size == 0:
        return 0.0
    steps = np.log1p(side * stakes * (np.asarray(x, dtype=np.float64) - m))
    return max(0.0, float(np.cumsum(steps).max()))


def bounds(x: np.ndarray, up: np.ndarray, down: np.ndarray, log_threshold: float,
           digits: int = 5) -> tuple[float, float]:
    """The confidence sequence at the last unit: ``(low, high)``, each side at level ``exp(-log_threshold)``.

    ``low`` is the supremum of the ``m`` whose ``max_t log K_t(m)`` reached
    ``log_threshold`` (found by bisection, rounded down to ``digits`` decimals); ``high``
    the mirror (rounded up).
    """
    tol, scale = 10.0 ** -digits, 10.0 ** digits
    def edge(side: int, stakes: np.ndarray) -> float:
        inside, outside = (1.0, 0.0) if side > 0 else (0.0, 1.0)  # m never / always rejected
        if log_wealth(x, stakes, outside, side) < log_threshold:
            return outside
        while abs(inside - outside) > tol:
            mid = 0.5 * (inside + outside)
            if log_wealth(x, stakes, mid, side) >= log_threshold:
                outside = mid
            else:
                inside = mid
        return outside

    low, high = edge(+1, up), edge(-1, down)
    return round(math.floor(low * scale) / scale, digits), round(math.ceil(high * scale) / scale, digits)
